// One hold, the whole story ("explain this credit"): the hold (GET /v1/holds/{id}) and the credit
// lots it drew from — and, for a hold reserved by feature, the feature, quantity, unit price and
// price version it was priced at (frozen on the hold; the feature links to its versions,
// #/price/FEATURE) —, every event of its account that names it (the account's log read through,
// oldest first), and the job that made it, if any, with the job's history (provider attempts and
// answers, who ended it and why). A charged hold (committed, or expired and late-charged) with
// something left to give back has a Refund form: POST /v1/holds/{id}/refund, or
// /v1/jobs/{id}/refund for a job's hold (the holds route refuses those).
import { api, ApiError, enc, num, h, confirmAction, randomRef, drawText } from './api.js';

const MAX_EVENT_PAGES = 20;  // 20 × 1000 events of the account at most

// A job's page is its hold's page, found through the job (GET /v1/jobs/{id} names its hold).
export function mountJob(ctx, jobId) { return mount(ctx, null, jobId); }

// A job's hold has the request_id "job:<client_request_id>" (the holds API refuses that prefix).
const JOB_HOLD_PREFIX = 'job:';

export function mount(ctx, holdIdGiven, jobId = null) {
  let holdId = holdIdGiven;
  const facts = h('dl', { class: 'kv', id: 'hold-facts' });
  const refund = refundForm(() => holdId);
  const eventsBody = h('tbody', { id: 'hold-events-body' });
  const job = h('div', { id: 'hold-job' });
  const note = h('p', { class: 'note', id: 'hold-note' });
  const title = h('code', { id: 'hold-title' }, holdId || '…');
  ctx.container.append(
    jobId ? h('h1', {}, 'Job ', h('code', { id: 'job-title' }, jobId), ' and its hold ', title) : h('h1', {}, 'Hold ', title), facts,
    refund.element, refund.result,
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
      ...kv('status', hold.status), ...kv('amount', num(hold.amount)),
      ...(hold.feature == null ? [] : [  // reserved by feature: the price it was reserved at, whatever it is now
        ...kv('feature', h('a', { href: `#/price/${enc(hold.feature)}` }, hold.feature)), ...kv('quantity', num(hold.quantity)),
        ...kv('unit price', num(hold.unit_price)), ...kv('price version', String(hold.price_version))]),
      ...kv('from lots', drawText(hold) || '–'),
      ...kv('committed', num(hold.committed_amount)),
      ...kv('refunded', num(hold.refunded_amount ?? 0)), ...kv('request_id', hold.request_id),
      ...kv('created', hold.created_at), ...kv('expires', hold.expires_at), ...kv('closed', hold.closed_at || '–'),
      ...kv('metadata', JSON.stringify(hold.metadata ?? null)));
    refund.show(hold, jobId || (hold.request_id.startsWith(JOB_HOLD_PREFIX) ? hold.request_id.slice(JOB_HOLD_PREFIX.length) : null));
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

// The Refund form of a hold's page: amount (empty: everything left) and reason (required). One
// request_id per refund, made when the form is shown and kept until an answer says it was used: a
// press after a lost answer (no answer, or a 5xx) sends the same id with the same body, so the
// server answers the first refund instead of making a second. Built once per page, so a refresh
// keeps what was typed and the id.
function refundForm(currentHoldId) {
  const amount = h('input', { id: 'refund-amount', type: 'number', min: '1', step: '1', placeholder: 'all left',
    'aria-label': 'amount to refund (empty: everything left)' });
  const reason = h('input', { id: 'refund-reason', placeholder: 'reason', maxlength: '1024', 'aria-label': 'reason for the refund' });
  const submit = h('button', { type: 'submit', id: 'refund-submit' }, 'Refund…');
  const left = h('span', { class: 'note', id: 'refund-left' });
  const element = h('div', { class: 'actions write', id: 'refund', hidden: true },
    h('form', { id: 'refund-form', novalidate: true, onsubmit: (ev) => { ev.preventDefault(); send(); } },
      h('strong', {}, 'Refund'), amount, reason, submit, left));
  const result = h('p', { id: 'refund-result', role: 'status' });
  let target = null;      // {jobId, left}: the hold as last read, when something is left to refund
  let requestId = null;   // this refund's id: the same on every press until an answer used it
  let sending = false;

  function say(text, bad = false) {
    result.textContent = text;
    result.className = bad ? 'error' : 'note';
  }

  function show(hold, jobId) {
    const charged = hold.status === 'committed' || (hold.status === 'expired' && hold.late_outcome === 'charged');
    const rest = hold.committed_amount - (hold.refunded_amount ?? 0);
    target = charged && rest > 0 ? { jobId, left: rest } : null;
    element.hidden = target === null;
    if (!target) return;
    if (requestId === null) requestId = randomRef('console-refund');
    amount.placeholder = `all ${rest}`;
    left.textContent = `${num(rest)} of ${num(hold.committed_amount)} charged left to give back` +
      (jobId ? ` · through job ${jobId}` : '');
    element.dataset.requestId = requestId;
  }

  async function send() {
    if (!target || sending) return;
    const text = amount.value.trim();  // '' also for what is not a number: badInput tells them apart
    const value = text === '' ? undefined : Number(text);
    if (amount.validity.badInput || (value !== undefined && (!Number.isSafeInteger(value) || value < 1))) {
      return say('The amount must be a whole number of credits, at least 1 (empty: everything left).', true);
    }
    const why = reason.value.trim();
    if (!why) return say('Say why the credits are given back: the reason is kept on the refunded event.', true);
    const id = requestId;
    const body = { reason: why, request_id: id };
    if (value !== undefined) body.amount = value;
    const { jobId } = target;
    const path = jobId ? `/v1/jobs/${enc(jobId)}/refund` : `/v1/holds/${enc(currentHoldId())}/refund`;
    const what = value === undefined ? `everything left (${num(target.left)})` : num(value);
    if (!(await confirmAction(`Give back ${what} of the charge of ${jobId ? `job ${jobId}` : `hold ${currentHoldId()}`} ` +
      `to available? (request ${id})`))) return say('Cancelled.');
    sending = true;
    submit.disabled = true;
    try {
      const r = await api(path, { method: 'POST', body });
      say(`Refund ${id}: ${num(r.refunded_amount)} of the charge given back in all.`);
      requestId = randomRef('console-refund');  // that id is used: the next refund is another one
      amount.value = '';
      reason.value = '';
    } catch (e) {
      if (e instanceof ApiError && e.status < 500) {
        // Refused: nothing was refunded under this id, and it may be sent again; except a mismatch,
        // which says the id did refund (another amount, in an attempt whose answer was lost).
        if (e.code === 'idempotency_mismatch') requestId = randomRef('console-refund');
        say(`${e.code || `HTTP ${e.status}`}: ${e.message}`, true);
      } else {  // no answer, or a 5xx: the outcome is unknown
        const what = e instanceof ApiError ? `${e.code || `HTTP ${e.status}`}: ${e.message}` : `No answer: ${e.message}`;
        say(`${what} — it may or may not have been refunded. Press Refund again: it sends the same request id ${id}, ` +
          'which cannot refund twice.', true);
      }
    } finally {
      sending = false;
      submit.disabled = false;
      if (target) element.dataset.requestId = requestId;
    }
    window.dispatchEvent(new Event('tollgate:refresh'));
  }

  return { element, result, show };
}
