// One hold, the whole story ("explain this credit"): the hold, every event of its account that
// names it (the account's log read through, oldest first), and the job that made it, if any, with
// the job's history (provider attempts and answers, who ended it and why).
import { api, enc, num, h } from './api.js';

const MAX_EVENT_PAGES = 20;  // 20 × 1000 events of the account at most

// A job's page is its hold's page, found through the job (GET /v1/jobs/{id} names its hold).
export function mountJob(ctx, jobId) { return mount(ctx, null, jobId); }

export function mount(ctx, holdIdGiven, jobId = null) {
  let holdId = holdIdGiven;
  const facts = h('dl', { class: 'kv', id: 'hold-facts' });
  const eventsBody = h('tbody', { id: 'hold-events-body' });
  const job = h('div', { id: 'hold-job' });
  const note = h('p', { class: 'note', id: 'hold-note' });
  const title = h('code', { id: 'hold-title' }, holdId || '…');
  ctx.container.append(
    jobId ? h('h1', {}, 'Job ', h('code', { id: 'job-title' }, jobId), ' and its hold ', title) : h('h1', {}, 'Hold ', title), facts,
    h('h2', {}, 'Its events'),
    h('table', { id: 'hold-events' },
      h('thead', {}, h('tr', {}, ...['event', 'at', 'type', 'amount', 'reason', 'available after', 'reserved after', 'used after']
        .map((t) => h('th', {}, t)))), eventsBody),
    note,
    h('h2', {}, 'The job that made it'), job);

  async function refresh() {
    if (!holdId) {
      holdId = (await api(`/v1/jobs/${enc(jobId)}`)).hold_id;
      title.textContent = holdId;
    }
    const hold = await api(`/v1/holds/${enc(holdId)}`);
    if (!ctx.alive()) return;
    const kv = (k, v) => [h('dt', {}, k), h('dd', { dataset: { field: k } }, v)];
    facts.replaceChildren(
      ...kv('account', h('a', { href: `#/account/${enc(hold.account_id)}` }, hold.account_id)),
      ...kv('status', hold.status), ...kv('amount', num(hold.amount)), ...kv('committed', num(hold.committed_amount)),
      ...kv('request_id', hold.request_id), ...kv('created', hold.created_at), ...kv('expires', hold.expires_at),
      ...kv('closed', hold.closed_at || '–'), ...kv('metadata', JSON.stringify(hold.metadata ?? null)));
    const mine = [];
    let after = 0, pages = 0, more = true;
    while (more && pages < MAX_EVENT_PAGES) {
      const page = await api(`/v1/accounts/${enc(hold.account_id)}/events?after=${after}&limit=1000`);
      mine.push(...page.events.filter((e) => e.hold_id === holdId));
      more = page.events.length === 1000;
      after = page.next_after;
      pages++;
    }
    if (!ctx.alive()) return;
    note.textContent = more ? `Only the account's first ${MAX_EVENT_PAGES * 1000} events were searched.` : '';
    eventsBody.replaceChildren(...mine.map((e) => h('tr', { dataset: { event: String(e.event_id) } },
      h('td', {}, String(e.event_id)), h('td', {}, e.at), h('td', {}, e.type), h('td', { class: 'num' }, num(e.amount)),
      h('td', {}, e.reason || ''), h('td', { class: 'num' }, num(e.available_after)),
      h('td', { class: 'num' }, num(e.reserved_after)), h('td', { class: 'num' }, num(e.used_after)))));
    const found = jobId ? await api(`/v1/jobs/${enc(jobId)}`)
      : ((await api(`/v1/jobs?account_id=${enc(hold.account_id)}&limit=1000`)).jobs || []).find((j) => j.hold_id === holdId);
    if (!found) {
      job.replaceChildren(h('p', { class: 'note' }, 'None: the hold was reserved directly through the API (POST /v1/holds).'));
      return;
    }
    const history = await api(`/v1/jobs/${enc(found.client_request_id)}/history`);
    if (!ctx.alive()) return;
    job.replaceChildren(
      h('p', { id: 'job-summary', dataset: { status: found.status } }, `Job ${found.client_request_id} · provider ${found.provider} · ${found.status} · ${found.attempts} attempt(s)` +
        (found.error ? ` · error: ${JSON.stringify(found.error)}` : '')),
      h('table', { id: 'job-history' },
        h('thead', {}, h('tr', {}, h('th', {}, 'at'), h('th', {}, 'kind'), h('th', {}, 'attempt'), h('th', {}, 'detail'))),
        h('tbody', { id: 'job-history-body' }, ...history.entries.map((x) => h('tr', {}, h('td', {}, x.at), h('td', {}, x.kind),
          h('td', {}, x.attempt ?? ''), h('td', {}, typeof x.detail === 'string' ? x.detail : JSON.stringify(x.detail)))))));
  }

  // The hold's (or its job's) events; a job's provider attempts are not events: every 15 s.
  const affectedBy = (evs) => evs.some((e) => (holdId && e.hold_id === holdId) || (jobId && e.job_id === jobId));
  return { refresh, affectedBy, periodicMs: 15_000 };
}
