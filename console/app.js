// The console's shell: sign-in, the routes (#/, #/account/ID, #/hold/ID, #/job/ID, #/locks,
// #/ratelimits, #/webhooks, #/webhook/ID, #/prices, #/price/FEATURE), and the live loop. Live means the change feed (GET /v1/events, admin), long-polled: one request waits up to
// FEED_WAIT_MS for an event newer than the last one seen; when events come, the view on screen is
// asked whether they concern it (affectedBy) and, if so, re-reads what it shows — at once after a
// quiet spell, at most once every REFRESH_GAP_MS under a steady stream (one refresh at a time, never
// overlapping). Figures no event announces (GET /metrics' rates, the reaper's age, a job's provider
// attempts) are re-read every view's `periodicMs` (15 s), not every 2 s. The feed starts at its
// head (`after=latest`), resumes from the last event id it saw after an error (backing off 1 s, 2 s,
// … 30 s), jumps to the head again when it fell a whole page behind (the view re-reads anyway), and
// stops while the tab is hidden or signed out. Clocks (ages, countdowns) tick every TICK_MS
// without asking the server.
import { api, ApiError, key, hooks } from './api.js';
import * as overview from './overview.js';
import * as account from './account.js';
import * as hold from './hold.js';
import * as coord from './coord.js';
import * as webhooks from './webhooks.js';
import * as prices from './prices.js';

const FEED_WAIT_MS = 25_000;     // one long-poll's wait (the server allows up to 60 s)
const FEED_LIMIT = 1000;         // events a feed answer carries at most (the server's page limit)
const FEED_GAP_MS = 2000;        // after an answer with events, wait this long: a stream comes in pages
const REFRESH_GAP_MS = 2000;     // event-driven refreshes at most this often
const BACKOFF_MS = [1000, 2000, 5000, 10_000, 30_000];
const TICK_MS = 500;
const $ = (id) => document.getElementById(id);

let current = null;     // {refresh, tick} of the view on screen
let generation = 0;     // bumped on every navigation: a late answer of an old view is dropped
let refreshing = false;
let refreshAgain = false;
let lastRefreshAt = -Infinity;  // when the last refresh started (performance.now())
let refreshTimer = null;  // a refresh asked for while the last one was under REFRESH_GAP_MS ago
let periodicTimer = null;

// A refresh because something changed: now, or when REFRESH_GAP_MS has passed since the last one.
function refreshSoon() {
  if (refreshTimer) return;
  const wait = Math.max(0, lastRefreshAt + REFRESH_GAP_MS - performance.now());
  refreshTimer = setTimeout(async () => {
    refreshTimer = null;
    await refresh();
  }, wait);
}

// The figures no event announces: the view's own slow period (none: only the feed refreshes it).
function restartPeriodic() {
  clearInterval(periodicTimer);
  periodicTimer = null;
  if (current && current.periodicMs) {
    periodicTimer = setInterval(() => { if (!document.hidden) refresh(); }, current.periodicMs);
  }
}

// --- the change feed ------------------------------------------------------------------------------
const feed = {
  after: null,        // the last event id seen (next_after); null: start at the head
  token: 0,           // bumped by stopFeed(): a loop whose token is old ends
  controller: null,   // aborts the request under way
  running: false,
  wake: null,         // ends the loop's pause (sleep) at once
  sleepTimer: null,
  events: 0,          // events received since the page loaded (shown on the live marker)
};

// A pause of the loop that stopFeed() cuts short.
function sleep(ms) {
  return new Promise((resolve) => {
    feed.wake = resolve;
    feed.sleepTimer = setTimeout(resolve, ms);
  });
}

function markFeed(ok, detail) {
  const live = $('live');
  live.className = ok ? 'live' : 'live stale';
  live.dataset.feed = ok ? 'following' : 'retrying';
  live.dataset.lastEvent = feed.after == null ? '' : String(feed.after);
  live.dataset.events = String(feed.events);
  live.title = ok ? `following the change feed (last event ${feed.after ?? '–'})` : `change feed: ${detail}; retrying`;
}

function startFeed() {
  if (feed.running || document.hidden || !key.get()) return;
  feed.running = true;
  loop(++feed.token);
}

function stopFeed() {
  feed.token++;
  feed.running = false;
  if (feed.controller) feed.controller.abort();
  feed.controller = null;
  clearTimeout(feed.sleepTimer);
  if (feed.wake) feed.wake();
  feed.wake = null;
}

async function loop(token) {
  let failures = 0;
  while (token === feed.token) {
    const atHead = feed.after == null;
    // From the head: answer at once (wait_ms=0) to learn where it is, then re-read the view, so
    // that nothing written between the view's first read and the head is missed.
    const query = atHead ? `after=latest&limit=1&wait_ms=0` : `after=${feed.after}&limit=${FEED_LIMIT}&wait_ms=${FEED_WAIT_MS}`;
    feed.controller = new AbortController();
    const asked = performance.now();
    let page;
    try {
      page = await api(`/v1/events?${query}`, { signal: feed.controller.signal });
    } catch (e) {
      if (token !== feed.token || e.name === 'AbortError') return;
      if (e instanceof ApiError && (e.status === 401 || e.status === 403)) {  // signed out, or not an admin key
        feed.running = false;
        markFeed(false, e.message);
        return;
      }
      markFeed(false, e.message);
      await sleep(BACKOFF_MS[Math.min(failures++, BACKOFF_MS.length - 1)]);
      continue;  // from feed.after, the last event seen
    }
    if (token !== feed.token) return;
    failures = 0;
    feed.after = page.next_after;
    feed.events += page.events.length;
    markFeed(true);
    if (atHead) {
      if (lastRefreshAt < asked) refresh();  // else the view's read began after the head: it is current
      continue;
    }
    if (page.events.length === FEED_LIMIT) {  // a whole page behind: the view re-reads; go to the head
      feed.after = null;
      continue;
    }
    if (page.events.length) {
      if (current && (!current.affectedBy || current.affectedBy(page.events))) refreshSoon();
      await sleep(FEED_GAP_MS);
    }
  }
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) stopFeed();
  else if (current) {
    startFeed();
    refreshSoon();
  }
});

function showError(message) { $('error').textContent = message || ''; }

function showSignIn(message) {
  current = null;
  generation++;
  stopFeed();
  restartPeriodic();
  $('nav').hidden = true;
  $('view').hidden = true;
  $('view').replaceChildren();
  $('sign-in').hidden = false;
  $('sign-in-error').textContent = message || '';
  $('key').value = '';
  $('key').focus();
}

// The key in use (GET /v1/key): {key_id, account_id, scopes, name, expires_at}; null until read.
let keyInfo = null;
// A server older than scoped keys has no GET /v1/key: its keys are admin keys or account keys, and
// GET /v1/accounts (an admin call) tells them apart.
async function readKey(candidate) {
  try {
    return await api('/v1/key', { keyOverride: candidate });
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
    await api('/v1/accounts?limit=1', { keyOverride: candidate });
    return { key_id: null, account_id: null, scopes: ['admin'], name: null, expires_at: null };
  }
}

const ACCOUNT_KEY = 'This is an account key: the console shows every account and needs an admin key ' +
  '(admin, or admin:read to look without changing anything).';

// The key must be an admin key (admin or admin:read): an account key sees one account only.
async function checkKey(candidate) {
  try {
    const info = await readKey(candidate);
    if (info.account_id != null) return { problem: ACCOUNT_KEY };
    return { info };
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) {
      return { refused: true, problem: /expired/i.test(e.message) ? `This key has expired: ${e.message}`
        : 'Wrong key: the server does not know this key (or it was revoked).' };
    }
    if (e instanceof ApiError && e.status === 403) return { problem: ACCOUNT_KEY };
    return { problem: `Could not check the key: ${e.message}` };
  }
}

// An admin:read key (no "admin" scope) may read everything and change nothing: every control that
// would change something (class "write": credit, debit, commit, release, refund) is hidden, and a
// badge says why.
function applyKey(info) {
  keyInfo = info;
  const readOnly = !!info && !(info.scopes || []).includes('admin');
  document.body.classList.toggle('read-only', readOnly);
  const badge = $('read-only-badge');
  badge.hidden = !readOnly;
  badge.dataset.scopes = info ? (info.scopes || []).join(' ') : '';
  badge.title = readOnly ? `This key (${info.name || info.key_id}) has the scopes ${(info.scopes || []).join(', ')}: ` +
    'every page reads, nothing can be changed from here.' : '';
}

function signOut(message) {
  key.clear();
  applyKey(null);
  stopFeed();
  feed.after = null;
  showSignIn(message);
}

hooks.unauthorized = (detail) => signOut(`Signed out: the server refused the key (${detail || '401'}).`);

async function route() {
  showError('');
  if (!key.get()) return showSignIn();
  if (!keyInfo) {  // a reload with the key in the tab's storage: which key is it?
    const checked = await checkKey(key.get());
    if (checked.refused) return signOut(`Signed out: ${checked.problem}`);
    if (checked.problem) {  // an account key put into the tab's storage: no view shows anything of it
      current = null;
      generation++;
      $('sign-in').hidden = true;
      $('nav').hidden = false;
      $('view').hidden = true;
      $('view').replaceChildren();
      return showError(checked.problem);
    }
    applyKey(checked.info);
  }
  $('sign-in').hidden = true;
  $('nav').hidden = false;
  const view = $('view');
  view.hidden = false;
  view.replaceChildren();
  const gen = ++generation;
  const hash = location.hash || '#/';
  let m;
  const ctx = { alive: () => gen === generation, container: view };
  if ((m = /^#\/account\/(.+)$/.exec(hash))) current = account.mount(ctx, decodeURIComponent(m[1]));
  else if ((m = /^#\/hold\/(.+)$/.exec(hash))) current = hold.mount(ctx, decodeURIComponent(m[1]));
  else if ((m = /^#\/job\/(.+)$/.exec(hash))) current = hold.mountJob(ctx, decodeURIComponent(m[1]));
  else if (hash === '#/locks') current = coord.mountLocks(ctx);
  else if (hash === '#/ratelimits') current = coord.mountRateLimits(ctx);
  else if (hash === '#/webhooks') current = webhooks.mountEndpoints(ctx);
  else if ((m = /^#\/webhook\/(.+)$/.exec(hash))) current = webhooks.mountEndpoint(ctx, decodeURIComponent(m[1]));
  else if (hash === '#/prices') current = prices.mountPrices(ctx);
  else if ((m = /^#\/price\/(.+)$/.exec(hash))) current = prices.mountPrice(ctx, decodeURIComponent(m[1]));
  else current = overview.mount(ctx);
  startFeed();
  restartPeriodic();
  await refresh();
}

async function refresh() {
  if (!current) return;
  if (refreshing) {  // once more when the one under way is done (it may have read too early)
    refreshAgain = true;
    return;
  }
  refreshing = true;
  refreshAgain = false;
  lastRefreshAt = performance.now();
  const gen = generation;
  try {
    await current.refresh();
    if (gen === generation) {
      showError('');
      $('live').className = 'live';
      $('live').dataset.refreshed = new Date().toISOString();
    }
  } catch (e) {
    if (gen === generation && !(e instanceof ApiError && e.status === 401)) {
      $('live').className = 'live stale';
      showError(e.message);
    }
  } finally {
    refreshing = false;
    if (refreshAgain) refresh();  // also for a view mounted meanwhile
  }
}

$('sign-in-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const candidate = $('key').value.trim();
  if (!candidate) return;
  $('sign-in-button').disabled = true;
  const { problem, info } = await checkKey(candidate);
  $('sign-in-button').disabled = false;
  if (problem) {
    $('sign-in-error').textContent = problem;
    $('key').select();
    return;
  }
  applyKey(info);
  key.set(candidate);
  route();
});
$('sign-out').addEventListener('click', () => signOut('Signed out.'));
$('goto-account').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const id = $('goto-account-id').value.trim();
  if (id) location.hash = `#/account/${encodeURIComponent(id)}`;
});
$('goto-hold').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const id = $('goto-hold-id').value.trim();
  if (id) location.hash = `#/hold/${encodeURIComponent(id)}`;
});
window.addEventListener('hashchange', route);
// Views ask for a refresh after an action (a commit, a credit) instead of waiting for the loop.
window.addEventListener('tollgate:refresh', refresh);

setInterval(() => { if (current && current.tick) current.tick(); }, TICK_MS);
route();
