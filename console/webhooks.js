// Webhook endpoints (GET /v1/webhook-endpoints: url, status, event filter, delivery_cursor,
// failing_since; never a secret) and, per endpoint (#/webhook/ID), its deliveries
// (GET /v1/webhook-endpoints/{id}/deliveries: status, attempts, the last answer's status code or
// error, the next attempt). Both paged by their cursor. Every event may move a cursor or make a
// delivery, so the feed refreshes these pages; a delivery's attempts are not ledger events, so they
// are also re-read every 5 s (periodicMs). The next attempt's countdown ticks in the page.
import { api, enc, duration, num, h, pager } from './api.js';

const PAGE = 50;
const PERIOD_MS = 5000;
const ADD_COMMAND = 'tollgate webhook add URL';

// What the endpoint is sent: its event types (or every type), of one account (or every account).
function filterText(e) {
  const types = e.event_types && e.event_types.length ? e.event_types.join(', ') : 'every type';
  return e.account_id ? `${types} · account ${e.account_id}` : `${types} · every account`;
}

export function mountEndpoints(ctx) {
  const body = h('tbody', { id: 'webhooks-body' });
  const pages = pager('webhooks', () => refresh());
  const empty = h('div', { id: 'webhooks-empty', class: 'empty', hidden: true },
    h('p', {}, 'No webhook endpoint is registered: tollgate sends events to none of your systems.'),
    h('p', {}, 'Register one with ', h('code', {}, ADD_COMMAND),
      ' (the CLI, with the admin key; --event-type and --account narrow what it is sent). The secret is shown only then: ' +
      'store it where the receiver verifies signatures. The endpoint and its deliveries then show here.'));
  const table = h('table', { id: 'webhooks' },
    h('thead', {}, h('tr', {}, h('th', {}, 'endpoint'), h('th', {}, 'url'), h('th', {}, 'status'), h('th', {}, 'sent'),
      h('th', { class: 'num' }, 'delivery cursor'), h('th', {}, 'failing since'))),
    body);
  ctx.container.append(
    h('h1', {}, 'Webhook endpoints'),
    empty, table, pages.element,
    h('p', { class: 'note' }, 'delivery cursor: every event the endpoint wants up to this event id was sent at least once. ' +
      'failing since: the first failed attempt since the last delivered one. Open an endpoint for its deliveries. ' +
      `Read on each change-feed event and every ${PERIOD_MS / 1000} s.`));

  async function refresh() {
    const after = pages.after();
    const r = await api(`/v1/webhook-endpoints?limit=${PAGE}${after ? `&starting_after=${enc(after)}` : ''}`);
    if (!ctx.alive()) return;
    pages.read(r.endpoints, r.has_more, (e) => e.endpoint_id);
    const none = !r.endpoints.length && !after;
    empty.hidden = !none;
    table.hidden = none;
    pages.element.hidden = none;
    body.replaceChildren(...r.endpoints.map((e) => h('tr', { dataset: { endpoint: e.endpoint_id } },
      h('td', {}, h('a', { href: `#/webhook/${enc(e.endpoint_id)}` }, e.endpoint_id)),
      h('td', { class: 'url' }, e.url),
      h('td', { class: e.status === 'enabled' ? 'status' : 'status bad' }, e.status),
      h('td', { class: 'filter' }, filterText(e)),
      h('td', { class: 'num cursor' }, String(e.delivery_cursor ?? '–')),
      h('td', { class: e.failing_since ? 'failing bad' : 'failing' }, e.failing_since || '–'))));
  }

  return { refresh, affectedBy: () => true, periodicMs: PERIOD_MS };
}

export function mountEndpoint(ctx, endpointId) {
  const facts = h('dl', { class: 'kv', id: 'webhook-facts' });
  const body = h('tbody', { id: 'deliveries-body' });
  const status = h('select', { id: 'deliveries-status', 'aria-label': 'delivery status',
    onchange: () => { pages.reset(); refresh(); } },
  ...['', 'pending', 'delivered', 'failed'].map((s) => h('option', { value: s }, s || 'every status')));
  const pages = pager('deliveries', () => refresh());
  let deliveries = [];
  let readAt = 0;       // performance.now() of the last read
  let readAtMs = 0;     // Date.now() then: next_attempt_at is counted down from it
  ctx.container.append(
    h('h1', {}, 'Webhook endpoint ', h('code', { id: 'webhook-title' }, endpointId)),
    facts,
    h('h2', {}, 'Its deliveries, newest event first'),
    h('p', { class: 'filters' }, h('label', {}, 'status ', status)),
    h('table', { id: 'deliveries' },
      h('thead', {}, h('tr', {}, h('th', {}, 'webhook id'), h('th', {}, 'event type'), h('th', {}, 'account'),
        h('th', {}, 'status'), h('th', { class: 'num' }, 'attempts'), h('th', {}, 'last answer'),
        h('th', {}, 'last attempt'), h('th', {}, 'next attempt'))),
      body),
    pages.element,
    h('p', { class: 'note' }, 'last answer: the HTTP status of the last attempt, or why no answer came. ' +
      'A failed delivery (every attempt failed) is sent again by a replay: ', h('code', {}, `tollgate webhook replay ${endpointId} --after EVENT_ID`), '.'));

  async function refresh() {
    const after = pages.after();
    const query = `limit=${PAGE}${status.value ? `&status=${enc(status.value)}` : ''}${after ? `&starting_after=${enc(after)}` : ''}`;
    const [e, r] = await Promise.all([api(`/v1/webhook-endpoints/${enc(endpointId)}`),
      api(`/v1/webhook-endpoints/${enc(endpointId)}/deliveries?${query}`)]);
    if (!ctx.alive()) return;
    const kv = (k, v, cls) => [h('dt', {}, k), h('dd', { dataset: { field: k }, class: cls }, v)];
    facts.replaceChildren(
      ...kv('url', e.url), ...kv('status', e.status, e.status === 'enabled' ? null : 'bad'), ...kv('sent', filterText(e)),
      ...kv('description', e.description || '–'), ...kv('delivery cursor', String(e.delivery_cursor ?? '–')),
      ...kv('failing since', e.failing_since || '–', e.failing_since ? 'bad' : null), ...kv('created', e.created_at));
    readAt = performance.now();
    readAtMs = Date.now();
    deliveries = r.deliveries;
    pages.read(deliveries, r.has_more, (d) => d.webhook_id);
    body.replaceChildren(...deliveries.map((d) => h('tr', { dataset: { webhook: d.webhook_id } },
      h('td', {}, d.webhook_id), h('td', {}, d.event_type), h('td', {}, d.account_id ?? '–'),
      h('td', { class: d.status === 'delivered' ? 'status' : 'status bad' }, d.status),
      h('td', { class: 'num attempts' }, num(d.attempts)),
      h('td', { class: d.status === 'delivered' ? 'answer' : 'answer bad' },
        d.last_status_code != null ? `HTTP ${d.last_status_code}${d.last_error ? ` · ${d.last_error}` : ''}` : (d.last_error ?? '–')),
      h('td', {}, d.last_attempt_at ?? '–'),
      h('td', { class: 'next', dataset: { nextAttemptAt: d.next_attempt_at ?? '' } }))));
    if (!deliveries.length) {
      body.append(h('tr', {}, h('td', { colspan: '8', class: 'note' }, status.value
        ? `no ${status.value} delivery`
        : 'no delivery yet: the events after the endpoint\'s registration that it wants show here as they are sent')));
    }
    tick();
  }

  // The next attempt: its time, and how long until then on the browser's clock.
  function tick() {
    const now = readAtMs + (performance.now() - readAt);
    for (const d of deliveries) {
      const cell = body.querySelector(`tr[data-webhook="${CSS.escape(d.webhook_id)}"] .next`);
      if (!cell) continue;
      if (!d.next_attempt_at) {
        cell.textContent = '–';
        continue;
      }
      const left = Date.parse(d.next_attempt_at) - now;
      cell.textContent = `${d.next_attempt_at} (${left > 0 ? `in ${duration(left)}` : 'due'})`;
    }
  }

  return { refresh, tick, affectedBy: () => true, periodicMs: PERIOD_MS };
}
