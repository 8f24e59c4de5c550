// The console's shell: sign-in, the routes (#/, #/account/ID, #/hold/ID, #/job/ID), and the live loop — the
// current view re-reads what it shows every REFRESH_MS while the tab is visible (one request at a
// time; never overlapping) and re-draws its clocks (ages, countdowns) every TICK_MS without asking.
import { api, ApiError, key, hooks } from './api.js';
import * as overview from './overview.js';
import * as account from './account.js';
import * as hold from './hold.js';

const REFRESH_MS = 2000;
const TICK_MS = 500;
const $ = (id) => document.getElementById(id);

let current = null;     // {refresh, tick} of the view on screen
let generation = 0;     // bumped on every navigation: a late answer of an old view is dropped
let refreshing = false;

function showError(message) { $('error').textContent = message || ''; }

function showSignIn(message) {
  current = null;
  generation++;
  $('nav').hidden = true;
  $('view').hidden = true;
  $('view').replaceChildren();
  $('sign-in').hidden = false;
  $('sign-in-error').textContent = message || '';
  $('key').value = '';
  $('key').focus();
}

// The key must be an admin key: GET /v1/accounts is an admin call (401 wrong key, 403 account key).
async function checkKey(candidate) {
  try {
    await api('/v1/accounts?limit=1', { keyOverride: candidate });
    return null;
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return 'Wrong key: the server does not know this key (or it was revoked).';
    if (e instanceof ApiError && e.status === 403) {
      return 'This is an account key: the console shows every account and needs the admin key.';
    }
    return `Could not check the key: ${e.message}`;
  }
}

function signOut(message) {
  key.clear();
  showSignIn(message);
}

hooks.unauthorized = (detail) => signOut(`Signed out: the server refused the key (${detail || '401'}).`);

async function route() {
  showError('');
  if (!key.get()) return showSignIn();
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
  else current = overview.mount(ctx);
  await refresh();
}

async function refresh() {
  if (!current || refreshing) return;
  refreshing = true;
  const gen = generation;
  try {
    await current.refresh();
    if (gen === generation) {
      showError('');
      $('live').className = 'live';
      $('live').title = `refreshed ${new Date().toLocaleTimeString()}`;
    }
  } catch (e) {
    if (gen === generation && !(e instanceof ApiError && e.status === 401)) {
      $('live').className = 'live stale';
      showError(e.message);
    }
  } finally {
    refreshing = false;
  }
}

$('sign-in-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const candidate = $('key').value.trim();
  if (!candidate) return;
  $('sign-in-button').disabled = true;
  const problem = await checkKey(candidate);
  $('sign-in-button').disabled = false;
  if (problem) {
    $('sign-in-error').textContent = problem;
    $('key').select();
    return;
  }
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

setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
setInterval(() => { if (current && current.tick) current.tick(); }, TICK_MS);
route();
