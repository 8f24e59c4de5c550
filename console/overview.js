// Overview: the figures of GET /metrics (this instance's Prometheus text, parsed here), rates from
// the difference between two reads, the audit on demand (GET /v1/audit), and the accounts (paged).
import { api, enc, parseProm, metric, duration, num, h } from './api.js';

const ACCOUNTS_PAGE = 50;

function card(id, label, note) {
  return h('div', { class: 'card', id: `card-${id}` },
    h('div', { class: 'label' }, label), h('div', { class: 'value', id: `fig-${id}` }, '–'),
    note ? h('div', { class: 'note', id: `note-${id}` }, note) : null);
}

function set(id, value, { bad = false, ok = false, title } = {}) {
  const el = document.getElementById(`fig-${id}`);
  if (!el) return;
  el.textContent = value;
  if (title) el.title = title;
  el.parentElement.classList.toggle('bad', bad);
  el.parentElement.classList.toggle('ok', ok && !bad);
}

export function mount(ctx) {
  const auditResult = h('span', { id: 'audit-result', class: 'note' }, 'not run from here yet');
  const auditButton = h('button', { id: 'audit-now', type: 'button', onclick: runAudit }, 'Audit now');
  const jobsBody = h('tbody', { id: 'jobs-body' });
  const accountsBody = h('tbody', { id: 'accounts-body' });
  const pageInfo = h('span', { class: 'note', id: 'accounts-page' });
  const cursors = [''];  // starting_after of each page seen (a stack, for Previous)
  let page = 0;
  let hasMore = false;
  let previous = null;  // the last metrics read: {at, requests, errors, conflicts}
  const WINDOW_MS = 5 * 60_000;
  const history = [];   // {at, committed, released, expired, late}: the reads of the last WINDOW_MS

  ctx.container.append(
    h('h1', {}, 'Overview'),
    h('div', { class: 'cards' },
      card('accounts', 'Accounts'),
      card('active-holds', 'Active holds'),
      card('oldest-hold', 'Oldest active hold', 'red past the hold TTL'),
      card('reaper', 'Reaper last ran'),
      card('violations', 'Invariant violations found'),
      card('conflicts', 'insufficient_credits answers'),
      card('req-rate', 'Requests / s'),
      card('err-rate', 'Errors / s (5xx)'),
      card('provider-latency', 'Provider latency (mean)')),
    h('h2', {}, 'Holds ended, by outcome'),
    h('div', { class: 'cards' },
      card('ended-committed', 'Committed'), card('ended-released', 'Released'),
      card('ended-expired', 'Expired'), card('ended-late', 'Late (charged + forgiven)'),
      card('ended-share', 'Expired + released share', 'of holds ended; high: time-outs shorter than the work')),
    h('p', { id: 'ended-window' }),
    h('p', { class: 'note' }, 'Counters are this instance\'s since it started (GET /metrics); re-read on every change the feed announces and every 15 s; rates are over the last re-read.'),
    h('h2', {}, 'Invariant'),
    h('p', {}, auditButton, ' ', auditResult),
    h('h2', {}, 'Jobs'),
    h('table', {}, h('thead', {}, h('tr', {}, h('th', {}, 'status'), h('th', { class: 'num' }, 'jobs'))), jobsBody),
    h('h2', {}, 'Accounts'),
    h('table', { id: 'accounts' },
      h('thead', {}, h('tr', {}, h('th', {}, 'account'), h('th', { class: 'num' }, 'available'), h('th', { class: 'num' }, 'reserved'),
        h('th', { class: 'num' }, 'used'), h('th', { class: 'num' }, 'active holds'), h('th', {}, 'oldest hold'))),
      accountsBody),
    h('div', { class: 'pager' },
      h('button', { type: 'button', id: 'accounts-prev', onclick: () => { if (page > 0) { page--; loadAccounts(); } } }, '← Previous'),
      h('button', { type: 'button', id: 'accounts-next', onclick: () => { if (hasMore) { page++; loadAccounts(); } } }, 'Next →'),
      pageInfo));

  async function runAudit() {
    auditButton.disabled = true;
    auditResult.textContent = 'auditing…';
    try {
      const r = await api('/v1/audit');
      const n = r.violations.length;
      auditResult.textContent = `${num(r.accounts_checked)} accounts checked, ${n} violation${n === 1 ? '' : 's'} (${new Date().toLocaleTimeString()})`;
      auditResult.className = n ? 'bad' : 'note';
      auditResult.dataset.violations = String(n);
      auditResult.dataset.checked = String(r.accounts_checked);
    } catch (e) {
      auditResult.textContent = `audit failed: ${e.message}`;
      auditResult.className = 'bad';
    } finally {
      auditButton.disabled = false;
    }
  }

  async function loadAccounts() {
    const after = cursors[page];
    const r = await api(`/v1/accounts?limit=${ACCOUNTS_PAGE}${after ? `&starting_after=${enc(after)}` : ''}`);
    if (!ctx.alive()) return;
    hasMore = r.has_more;
    if (r.accounts.length) cursors[page + 1] = r.accounts[r.accounts.length - 1].account_id;
    accountsBody.replaceChildren(...r.accounts.map((a) => h('tr', { dataset: { account: a.account_id } },
      h('td', {}, h('a', { href: `#/account/${enc(a.account_id)}` }, a.account_id)),
      h('td', { class: 'num' }, num(a.available)), h('td', { class: 'num' }, num(a.reserved)), h('td', { class: 'num' }, num(a.used)),
      h('td', { class: 'num' }, num(a.active_holds)),
      h('td', {}, a.oldest_active_hold_age_ms == null ? '–' : duration(a.oldest_active_hold_age_ms)))));
    pageInfo.textContent = `page ${page + 1}${hasMore ? '' : ' (last)'}`;
  }

  async function refresh() {
    const text = await api('/metrics', { text: true });
    if (!ctx.alive()) return;
    const at = performance.now();
    const s = parseProm(text);
    const has = (name) => s.some((x) => x.name === name);
    set('accounts', num(metric(s, 'tollgate_accounts')));
    set('active-holds', num(metric(s, 'tollgate_active_holds')));
    const oldest = metric(s, 'tollgate_oldest_active_hold_age_seconds');
    const ttl = has('tollgate_hold_ttl_seconds') ? metric(s, 'tollgate_hold_ttl_seconds') : null;
    set('oldest-hold', metric(s, 'tollgate_active_holds') ? duration(oldest * 1000) : 'none',
      { bad: ttl != null && oldest > ttl, title: ttl != null ? `hold TTL ${duration(ttl * 1000)}` : undefined });
    const reaper = metric(s, 'tollgate_reaper_last_run_age_seconds');
    set('reaper', reaper < 0 ? 'never' : `${duration(reaper * 1000)} ago`, { bad: reaper < 0 || reaper > 60 });
    const violations = metric(s, 'tollgate_invariant_violations_total');
    set('violations', num(violations), { bad: violations > 0, ok: true });
    const conflicts = metric(s, 'tollgate_reservation_conflicts_total');
    const ended = (o) => metric(s, 'tollgate_holds_ended_total', { outcome: o });
    const committed = ended('committed'), released = ended('released'), expired = ended('expired');
    const late = ended('late_charged') + ended('late_forgiven');
    set('ended-committed', num(committed)); set('ended-released', num(released));
    set('ended-expired', num(expired)); set('ended-late', num(late));
    const total = committed + released + expired + late;
    set('ended-share', total ? `${((100 * (expired + released)) / total).toFixed(1)} %` : '–');
    // The same over the last minutes this page has watched: what changed lately, not since start.
    history.push({ at, committed, released, expired, late });
    while (history.length > 2 && at - history[0].at > WINDOW_MS) history.shift();
    const first = history[0];
    const d = (k) => Math.max(0, history[history.length - 1][k] - first[k]);
    const lately = d('committed') + d('released') + d('expired') + d('late');
    document.getElementById('ended-window').textContent = history.length < 2 ? '' :
      `In the last ${duration(at - first.at)} watched: committed +${num(d('committed'))}, released +${num(d('released'))}, ` +
      `expired +${num(d('expired'))}, late +${num(d('late'))}` +
      (lately ? ` — expired + released ${((100 * (d('expired') + d('released'))) / lately).toFixed(1)} %` : '');
    const requests = metric(s, 'tollgate_http_requests_total');
    const errors = metric(s, 'tollgate_http_requests_total', { status: (v) => v >= '500' });
    const pc = metric(s, 'tollgate_provider_request_duration_seconds_count');
    const ps = metric(s, 'tollgate_provider_request_duration_seconds_sum');
    set('provider-latency', pc ? duration((1000 * ps) / pc) : 'no calls');
    if (previous) {
      const dt = (at - previous.at) / 1000;
      const rate = (x, y) => (dt > 0 ? Math.max(0, (x - y) / dt) : 0);
      set('req-rate', rate(requests, previous.requests).toFixed(1));
      const er = rate(errors, previous.errors);
      set('err-rate', er.toFixed(2), { bad: er > 0 });
      set('conflicts', `${num(conflicts)} (${(rate(conflicts, previous.conflicts) * 60).toFixed(1)}/min)`);
    } else {
      set('req-rate', '…'); set('err-rate', '…'); set('conflicts', num(conflicts));
    }
    document.getElementById('fig-conflicts').dataset.total = String(conflicts);
    previous = { at, requests, errors, conflicts };
    const jobs = s.filter((x) => x.name === 'tollgate_jobs' || x.name === 'tollgate_jobs_ended_total');
    jobsBody.replaceChildren(...jobs.map((x) => h('tr', { dataset: { status: x.labels.status } },
      h('td', {}, x.labels.status + (x.name === 'tollgate_jobs_ended_total' ? ' (ended here)' : '')),
      h('td', { class: 'num' }, num(x.value)))));
    await loadAccounts();
  }

  // Every event moves a figure here (counts, balances); the rates, the reaper's age and the
  // provider's latency have no event: read again every 15 s.
  return { refresh, affectedBy: () => true, periodicMs: 15_000 };
}
