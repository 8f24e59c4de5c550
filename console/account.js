// One account: its balances as one stacked bar (available / reserved / used / expired = purchased),
// its credit lots in spending order (GET /v1/accounts/{id}/lots: amounts, status and a live
// countdown to each lot's expires_at), its active holds with live ages and expiry countdowns and
// the lots each drew from (commit, release), credit and debit, and its event log (GET /v1/accounts/{id}/events: oldest first, paged by `after`; filtered here by type
// and hold, as the API has no such filter). A frozen account says why (frozen_reason); a credit or
// debit a payment provider's webhook made (reference stripe:… or payment:…) carries a "payment"
// label naming the provider; an account_updated event shows its reason (a freeze, a repaid debt).
import { api, enc, duration, num, h, confirmAction, randomRef, drawText } from './api.js';

const EVENTS_PAGE = 50;
// Why an account is frozen (Account.frozen_reason); null: an admin froze it.
const FROZEN_WHY = {
  'refund shortfall': 'a payment was refunded after its credits were spent: the account is in debt, and opens ' +
    'again once credits bring available back to 0',
  'payment disputed': 'the customer disputed a payment at the provider: only an admin unfreezes it',
};
// The provider of a credit or debit made by a payment provider's webhook (api.md "Payments"), from
// its reference: stripe:{session} or stripe:{charge}:refunded:{n} (Stripe), payment:{id} or
// payment:{id}:refund:{webhook-id} (any other provider, through Standard Webhooks); null otherwise.
function paymentProvider(e) {
  if (e.type !== 'credited' && e.type !== 'debited') return null;
  if ((e.reference || '').startsWith('stripe:')) return 'stripe';
  if ((e.reference || '').startsWith('payment:')) return 'webhook';
  return null;
}
const TYPES = ['credited', 'debited', 'reserved', 'committed', 'released', 'expired', 'late_charged',
  'late_forgiven', 'refunded', 'extended', 'account_updated', 'lot_expired'];
const LOTS_PAGE = 1000;  // the API's largest page: an account with more says so under the table

// A lot's expiry for people, counted down from `now`: "expires in 3d 4h", "expired", "never".
export function lotExpiry(lot, now) {
  if (!lot.expires_at) return 'never';
  const left = Date.parse(lot.expires_at) - now;
  return left > 0 ? `expires in ${duration(left)}` : 'expired';
}

export function mount(ctx, accountId) {
  const path = `/v1/accounts/${enc(accountId)}`;
  const seg = (cls) => h('div', { class: cls, id: `bar-${cls}` });
  const bar = h('div', { class: 'bar', id: 'bar', role: 'img' }, seg('available'), seg('reserved'), seg('used'), seg('expired'));
  const legend = h('div', { class: 'legend', id: 'legend' });
  const settings = h('p', { class: 'note', id: 'settings' });
  const frozen = h('p', { class: 'frozen', id: 'frozen', role: 'status', hidden: true });
  const holdsBody = h('tbody', { id: 'holds-body' });
  const lotsBody = h('tbody', { id: 'lots-body' });
  const lotsNote = h('p', { class: 'note', id: 'lots-note' });
  const eventsBody = h('tbody', { id: 'events-body' });
  const typeFilter = h('select', { id: 'filter-type', onchange: () => drawEvents() },
    h('option', { value: '' }, 'every type'), ...TYPES.map((t) => h('option', { value: t }, t)));
  const holdFilter = h('input', { id: 'filter-hold', placeholder: 'hold id', oninput: () => drawEvents() });
  const pageInfo = h('span', { class: 'note', id: 'events-page' });
  const message = h('p', { id: 'action-result', role: 'status' });
  const afters = [0];  // `after` of each page seen
  let page = 0;
  let events = [];
  let nextAfter = 0;
  let holds = [];
  let lots = [];

  const amountInput = (id) => h('input', { id, type: 'number', min: '1', step: '1', required: true, placeholder: 'amount' });
  const creditAmount = amountInput('credit-amount');
  const debitAmount = amountInput('debit-amount');
  // The credit's lot (api.md "Credit lots"); empty: the server's defaults (no expiry, priority 50, paid).
  const creditDays = h('input', { id: 'credit-expires-days', type: 'number', min: '1', step: '1', placeholder: 'expires in days',
    'aria-label': 'the lot expires in this many days (empty: never)' });
  const creditPriority = h('input', { id: 'credit-priority', type: 'number', min: '0', max: '100', step: '1',
    placeholder: 'priority 50', 'aria-label': 'the lot\'s priority, 0-100, lower spent first' });
  const creditCategory = h('select', { id: 'credit-category', 'aria-label': 'the lot\'s category' },
    h('option', { value: 'paid' }, 'paid'), h('option', { value: 'promotional' }, 'promotional'));
  const debitReason = h('input', { id: 'debit-reason', placeholder: 'reason', required: true });

  ctx.container.append(
    h('h1', {}, 'Account ', h('code', { id: 'account-id' }, accountId)),
    bar, legend, settings, frozen,
    h('div', { class: 'actions write', id: 'account-actions' },
      // novalidate: the page checks the fields itself and says in its message line what is wrong.
      h('form', { id: 'credit-form', novalidate: true, onsubmit: (ev) => { ev.preventDefault(); transfer('credits', creditAmount); } },
        h('strong', {}, 'Credit'), creditAmount, creditDays, creditPriority, creditCategory,
        h('button', { type: 'submit', id: 'credit-submit' }, 'Credit…')),
      h('form', { id: 'debit-form', onsubmit: (ev) => { ev.preventDefault(); transfer('debits', debitAmount); } },
        h('strong', {}, 'Debit'), debitAmount, debitReason, h('button', { type: 'submit', id: 'debit-submit' }, 'Debit…'))),
    message,
    h('h2', {}, 'Credit lots'),
    h('table', { id: 'lots' },
      h('thead', {}, h('tr', {}, h('th', {}, 'lot'), h('th', {}, 'status'), h('th', {}, 'category'),
        h('th', { class: 'num' }, 'priority'), ...['amount', 'available', 'reserved', 'used', 'expired']
          .map((t) => h('th', { class: 'num' }, t)), h('th', {}, 'expires'), h('th', {}, 'reference'))),
      lotsBody),
    lotsNote,
    h('h2', {}, 'Active holds'),
    h('table', { id: 'holds' },
      h('thead', {}, h('tr', {}, h('th', {}, 'hold'), h('th', {}, 'request'), h('th', { class: 'num' }, 'amount'),
        h('th', {}, 'from lots'), h('th', { class: 'num' }, 'age'), h('th', { class: 'num' }, 'expires in'),
        h('th', { class: 'write' }, ''))),
      holdsBody),
    h('h2', {}, 'Events'),
    h('div', { class: 'filters' }, typeFilter, holdFilter),
    h('table', { id: 'events' },
      h('thead', {}, h('tr', {}, ...['event', 'at', 'type', 'amount', 'hold', 'job', 'reference / reason',
        'available after', 'reserved after', 'used after', 'expired after', 'lot'].map((t) => h('th', {}, t)))),
      eventsBody),
    h('div', { class: 'pager' },
      h('button', { type: 'button', id: 'events-prev', onclick: () => { if (page > 0) { page--; refresh(); } } }, '← Earlier'),
      h('button', { type: 'button', id: 'events-next', onclick: () => { if (events.length === EVENTS_PAGE) { afters[page + 1] = nextAfter; page++; refresh(); } } }, 'Later →'),
      pageInfo));

  function say(text, bad = false) {
    message.textContent = text;
    message.className = bad ? 'error' : 'note';
  }

  async function act(question, call, done) {
    if (!(await confirmAction(question))) return say('Cancelled.');
    try {
      const r = await call();
      say(done(r));
    } catch (e) {
      say(`${e.code || 'error'}: ${e.message}`, true);
    }
    window.dispatchEvent(new Event('tollgate:refresh'));
  }

  // The lot fields of a credit from the form: {lot} to add to the body, or {bad} naming what is wrong.
  function lotFields() {
    const lot = {};
    const days = creditDays.value.trim(), priority = creditPriority.value.trim();
    if (creditDays.validity.badInput || days !== '') {
      const n = Number(days);
      if (creditDays.validity.badInput || !Number.isSafeInteger(n) || n < 1 || n > 36_500) {
        return { bad: 'Expires in days must be a whole number from 1 to 36500 (empty: never).' };
      }
      lot.expires_at = new Date(Date.now() + n * 86_400_000).toISOString();
    }
    if (creditPriority.validity.badInput || priority !== '') {
      const n = Number(priority);
      if (creditPriority.validity.badInput || !Number.isSafeInteger(n) || n < 0 || n > 100) {
        return { bad: 'The priority must be a whole number from 0 to 100 (empty: 50).' };
      }
      lot.priority = n;
    }
    if (creditCategory.value !== 'paid') lot.category = creditCategory.value;
    return { lot };
  }

  function transfer(kind, input) {
    const amount = Number(input.value);
    if (!Number.isSafeInteger(amount) || amount < 1) return say('The amount must be a whole number of credits, at least 1.', true);
    const { lot, bad } = kind === 'credits' ? lotFields() : { lot: {} };
    if (bad) return say(bad, true);
    const reference = randomRef(`console-${kind === 'credits' ? 'credit' : 'debit'}`);
    const body = { amount, reference, ...lot };
    if (kind === 'debits') body.reason = debitReason.value.trim() || 'console';
    const verb = kind === 'credits' ? 'Add' : 'Remove';
    const lotText = [lot.category, lot.priority !== undefined && `priority ${lot.priority}`,
      lot.expires_at && `expiring ${lot.expires_at}`].filter(Boolean).join(', ');
    act(`${verb} ${num(amount)} credits ${kind === 'credits' ? 'to' : 'from'} ${accountId}` +
      `${lotText ? ` as a lot (${lotText})` : ''}? (reference ${reference})`,
      () => api(`${path}/${kind}`, { method: 'POST', body }),
      (r) => `${r.event.type} ${num(r.event.amount)} (event ${r.event.event_id}, reference ${reference}` +
        `${r.event.lot_id ? `, lot ${r.event.lot_id}` : ''}).`);
    input.value = '';
    if (kind === 'credits') { creditDays.value = ''; creditPriority.value = ''; creditCategory.value = 'paid'; }
  }

  // Commit all of the hold, or the amount typed beside the button (the rest returns to available).
  function commit(hold, amountInput) {
    const text = amountInput.value.trim();
    const amount = text === '' ? hold.amount : Number(text);
    if (!Number.isSafeInteger(amount) || amount < 1 || amount > hold.amount) {
      return say(`The amount to commit must be a whole number from 1 to ${hold.amount}.`, true);
    }
    const rest = hold.amount - amount;
    act(`Commit hold ${hold.hold_id}: move ${num(amount)} of its ${num(hold.amount)} reserved credits to used` +
      (rest ? ` and return ${num(rest)} to available?` : '?'),
      () => api(`/v1/holds/${enc(hold.hold_id)}/commit`, { method: 'POST', body: text === '' ? {} : { amount } }),
      (r) => `Hold ${r.hold_id}: ${r.status} (${num(r.committed_amount)} used).`);
  }

  function release(hold) {
    act(`Release hold ${hold.hold_id}: return its ${num(hold.amount)} credits to available?`,
      () => api(`/v1/holds/${enc(hold.hold_id)}/release`, { method: 'POST', body: { reason: 'released in the console' } }),
      (r) => `Hold ${r.hold_id}: ${r.status}.`);
  }

  function drawBar(a) {
    const expired = a.expired ?? 0;
    const total = Math.max(1, Math.max(0, a.available) + a.reserved + a.used + expired);
    for (const k of ['available', 'reserved', 'used', 'expired']) {
      const el = document.getElementById(`bar-${k}`);
      el.style.width = `${(100 * Math.max(0, a[k])) / total}%`;
      el.dataset.value = String(a[k]);
      el.title = `${k}: ${num(a[k])}`;
    }
    bar.setAttribute('aria-label', `available ${a.available}, reserved ${a.reserved}, used ${a.used}, ` +
      `expired ${expired}, purchased ${a.purchased}`);
    legend.replaceChildren(
      h('span', { class: 'available', id: 'legend-available' }, `available ${num(a.available)}`),
      h('span', { class: 'reserved', id: 'legend-reserved' }, `reserved ${num(a.reserved)}`),
      h('span', { class: 'used', id: 'legend-used' }, `used ${num(a.used)}`),
      h('span', { class: 'expired', id: 'legend-expired' }, `expired ${num(expired)}`),
      h('strong', { id: 'legend-purchased' }, `= purchased ${num(a.purchased)}`));
    settings.textContent = `overdraft limit ${num(a.overdraft_limit)} · max active holds ${a.max_active_holds ?? 'none'}` +
      ` · ${a.frozen ? 'FROZEN' : 'not frozen'} · created ${a.created_at}`;
    frozen.hidden = !a.frozen;
    frozen.dataset.reason = a.frozen_reason ?? '';
    frozen.replaceChildren(...(!a.frozen ? [] : a.frozen_reason
      ? [h('strong', {}, `Frozen: ${a.frozen_reason}`), FROZEN_WHY[a.frozen_reason] ? ` — ${FROZEN_WHY[a.frozen_reason]}.` : '']
      : [h('strong', {}, 'Frozen'), ' by an admin: new holds, jobs and debits are refused.']));
  }

  // Rows are kept across refreshes (a typed amount survives); only holds that came or went change.
  function drawHolds() {
    const keep = new Set(holds.map((x) => x.hold_id));
    for (const row of [...holdsBody.children]) if (!keep.has(row.dataset.hold)) row.remove();
    for (const x of holds) {
      if (document.getElementById(`hold-${x.hold_id}`)) continue;
      const amountInput = h('input', { type: 'number', class: 'commit-amount', min: '1', max: String(x.amount),
        placeholder: `all ${x.amount}`, 'aria-label': 'amount to commit' });
      holdsBody.append(h('tr', { id: `hold-${x.hold_id}`, dataset: { hold: x.hold_id } },
        h('td', {}, h('a', { href: `#/hold/${enc(x.hold_id)}` }, x.hold_id)),
        h('td', {}, x.request_id),
        h('td', { class: 'num' }, num(x.amount)),
        h('td', { class: 'draw' }, drawText(x)),
        h('td', { class: 'num age' }), h('td', { class: 'num expires' }),
        h('td', { class: 'write' }, amountInput, ' ',
          h('button', { type: 'button', class: 'commit', onclick: () => commit(x, amountInput) }, 'Commit…'), ' ',
          h('button', { type: 'button', class: 'release', onclick: () => release(x) }, 'Release…'))));
    }
    if (!holds.length) holdsBody.append(h('tr', { dataset: { hold: '' } }, h('td', { colspan: '7', class: 'note' }, 'no active holds')));
    tick();
  }

  // The lots in spending order; the expires cell counts down (tick), and a lot whose expires_at
  // passes shows expired at once, as the API's reads do.
  function drawLots(page) {
    lots = page.lots;
    lotsBody.replaceChildren(...lots.map((l) => h('tr', { id: `lot-${l.lot_id}`, dataset: { lot: l.lot_id, status: l.status } },
      h('td', {}, l.lot_id), h('td', { class: 'status' }, l.status), h('td', {}, l.category),
      h('td', { class: 'num' }, String(l.priority)),
      ...['amount', 'available', 'reserved', 'used', 'expired'].map((k) => h('td', { class: `num ${k}` }, num(l[k]))),
      h('td', { class: 'lot-expires' }), h('td', {}, l.reference ?? '–'))));
    if (!lots.length) lotsBody.append(h('tr', {}, h('td', { colspan: '11', class: 'note' }, 'no lots')));
    lotsNote.textContent = page.has_more ? `The first ${LOTS_PAGE} lots, in spending order.` : '';
    tick();
  }

  function tick() {
    const now = Date.now();
    for (const l of lots) {
      const row = document.getElementById(`lot-${l.lot_id}`);
      if (!row) continue;
      const text = lotExpiry(l, now);
      row.querySelector('.lot-expires').textContent = text;
      if (text === 'expired' && l.status !== 'expired') {
        row.dataset.status = 'expired';
        row.querySelector('.status').textContent = 'expired';
      }
    }
    for (const x of holds) {
      const row = document.getElementById(`hold-${x.hold_id}`);
      if (!row) continue;
      const expiresIn = Date.parse(x.expires_at) - now;
      row.querySelector('.age').textContent = duration(now - Date.parse(x.created_at));
      const cell = row.querySelector('.expires');
      cell.textContent = expiresIn > 0 ? duration(expiresIn) : 'expired';
      cell.classList.toggle('bad', expiresIn < 30_000);
    }
  }

  // The reference / reason cell: a payment provider's label first, then the reference and the reason.
  function what(e) {
    const provider = paymentProvider(e);
    const parts = [];
    if (provider) parts.push(h('span', { class: 'tag payment', dataset: { provider } }, `payment · ${provider}`), ' ');
    if (e.reference) parts.push(h('span', { class: 'reference' }, e.reference));
    if (e.reference && e.reason) parts.push(' · ');
    if (e.reason) parts.push(h('span', { class: 'reason' }, e.reason));
    return parts;
  }

  function drawEvents() {
    const type = typeFilter.value;
    const hold = holdFilter.value.trim();
    const shown = events.filter((e) => (!type || e.type === type) && (!hold || (e.hold_id || '').includes(hold)));
    eventsBody.replaceChildren(...shown.map((e) => h('tr', { dataset: { event: String(e.event_id) } },
      h('td', {}, String(e.event_id)), h('td', {}, e.at), h('td', {}, e.type), h('td', { class: 'num' }, num(e.amount)),
      h('td', {}, e.hold_id ? h('a', { href: `#/hold/${enc(e.hold_id)}` }, e.hold_id) : ''),
      h('td', {}, e.job_id ? h('a', { href: `#/job/${enc(e.job_id)}` }, e.job_id) : ''),
      h('td', { class: 'what' }, what(e)),
      h('td', { class: 'num' }, num(e.available_after)), h('td', { class: 'num' }, num(e.reserved_after)),
      h('td', { class: 'num' }, num(e.used_after)), h('td', { class: 'num' }, num(e.expired_after ?? 0)),
      h('td', { class: 'lot' }, e.lot_id || ''))));
    pageInfo.textContent = `page ${page + 1} (oldest first, ${EVENTS_PAGE} a page)` +
      (shown.length !== events.length ? ` · ${shown.length} of ${events.length} shown` : '');
  }

  async function refresh() {
    const [a, hs, ev, ls] = await Promise.all([
      api(path),
      api(`/v1/holds?account_id=${enc(accountId)}&status=active&limit=1000`),
      api(`${path}/events?after=${afters[page]}&limit=${EVENTS_PAGE}`),
      api(`${path}/lots?limit=${LOTS_PAGE}`),
    ]);
    if (!ctx.alive()) return;
    drawBar(a);
    drawLots(ls);
    holds = hs.holds;
    drawHolds();
    events = ev.events;
    nextAfter = ev.next_after;
    drawEvents();
  }

  // Only this account's events change what the page shows (holds and lots expiring included: the
  // reaper writes an event); ages and countdowns tick on their own.
  const affectedBy = (evs) => evs.some((e) => e.account_id === accountId);
  return { refresh, tick, affectedBy, periodicMs: null };
}
