// Prices (#/prices): every feature's current price (GET /v1/prices: credits per unit, version, when
// it was set; by feature, paged by its cursor), and a form to set one (PUT /v1/prices/{feature}
// {credits_per_unit}, after GET /v1/prices/{feature} for the confirmation: a new version when the
// price changes, nothing when it is the same). A feature (#/price/FEATURE): its current price
// (GET /v1/prices/{feature}) and every version it had, newest first (GET
// /v1/prices/{feature}/versions, paged by version), with the same form for that feature. Setting a
// price writes no ledger event (the change feed never announces one), so these pages re-read every
// 5 s (periodicMs), as the locks' and the webhooks' do, and at once after the form's answer.
import { api, ApiError, enc, num, h, pager, confirmAction } from './api.js';

const PAGE = 50;
const PERIOD_MS = 5000;
const SET_COMMAND = 'tollgate price set FEATURE CREDITS_PER_UNIT';

// The form that sets a price: of the feature typed, or of `fixedFeature` (a feature's page). The
// confirmation says what the price is now (read first: none yet, the same, or another); the
// answer (201: a new version; 200: the same price, nothing changed), or the server's problem
// (its code and detail: a 400 for a bad value, a 403 for a key without the admin scope), shows under
// it. Built once per page, so a refresh keeps what was typed.
function priceForm(fixedFeature = null) {
  const feature = fixedFeature === null ? h('input', { id: 'price-feature', placeholder: 'feature', maxlength: '128',
    autocomplete: 'off', 'aria-label': 'the feature whose price to set' }) : null;
  const credits = h('input', { id: 'price-credits', type: 'number', min: '1', step: '1', placeholder: 'credits per unit',
    'aria-label': 'credits per unit' });
  const submit = h('button', { type: 'submit', id: 'price-submit' }, 'Set price…');
  // novalidate: the page sends what is typed and the server says what is wrong with it (its detail).
  const element = h('div', { class: 'actions write', id: 'price-actions' },
    h('form', { id: 'price-form', novalidate: true, onsubmit: (ev) => { ev.preventDefault(); send(); } },
      h('strong', {}, fixedFeature === null ? 'Set a price' : 'Set its price'), feature, credits, submit));
  const result = h('p', { id: 'price-result', role: 'status' });
  let sending = false;

  function say(text, bad = false) {
    result.textContent = text;
    result.className = bad ? 'error' : 'note';
  }

  // What the confirmation asks, from the feature's price now (null: it has none).
  function question(name, value, now) {
    if (!now) return `Set the price of ${name} to ${num(value)} credits per unit? It has none yet: this is its version 1.`;
    if (now.credits_per_unit === value) {
      return `${name} already costs ${num(value)} credits per unit (version ${now.version}): set it again? Nothing changes.`;
    }
    return `Change the price of ${name} from ${num(now.credits_per_unit)} to ${num(value)} credits per unit ` +
      `(version ${now.version + 1})? Holds already made keep the price they were reserved at.`;
  }

  async function send() {
    if (sending) return;
    const name = fixedFeature ?? feature.value.trim();
    if (!name) return say('Name the feature whose price to set (the feature a hold is reserved by).', true);
    const text = credits.value.trim();  // '' also for what is not a number: badInput tells them apart
    if (credits.validity.badInput || text === '') return say('Credits per unit must be a number: a whole number, at least 1.', true);
    const value = Number(text);
    const path = `/v1/prices/${enc(name)}`;
    sending = true;
    submit.disabled = true;
    try {
      let now = null;
      try {
        now = await api(path);
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) throw e;  // 404: no price yet
      }
      if (!(await confirmAction(question(name, value, now)))) return say('Cancelled.');
      const { status, value: price } = await api(path, { method: 'PUT', body: { credits_per_unit: value }, withStatus: true });
      say(status === 201
        ? `${price.feature} now costs ${num(price.credits_per_unit)} credits per unit (version ${price.version}, set ${price.updated_at}).`
        : `${price.feature} already costs ${num(price.credits_per_unit)} credits per unit (version ${price.version}): nothing changed.`);
      if (feature) feature.value = '';
      credits.value = '';
    } catch (e) {
      if (e instanceof ApiError) say(`${e.code || `HTTP ${e.status}`}: ${e.message}`, true);
      else say(`No answer: ${e.message} — press Set price again: the same price twice makes one version.`, true);
    } finally {
      sending = false;
      submit.disabled = false;
    }
    window.dispatchEvent(new Event('tollgate:refresh'));
  }

  return { element, result };
}

export function mountPrices(ctx) {
  const body = h('tbody', { id: 'prices-body' });
  const pages = pager('prices', () => refresh());
  const form = priceForm();
  const empty = h('div', { id: 'prices-empty', class: 'empty', hidden: true },
    h('p', {}, 'No feature has a price yet: holds are reserved by amount, and a reservation by feature is refused.'),
    h('p', {}, 'Set one with ', h('code', {}, SET_COMMAND), ' (the CLI, with the admin key)',
      h('span', { class: 'write' }, ', or with the form below'),
      '. A hold may then be reserved by feature and quantity, and the server prices it.'));
  const table = h('table', { id: 'prices' },
    h('thead', {}, h('tr', {}, h('th', {}, 'feature'), h('th', { class: 'num' }, 'credits per unit'),
      h('th', { class: 'num' }, 'version'), h('th', {}, 'updated at'))),
    body);
  ctx.container.append(
    h('h1', {}, 'Prices'),
    empty, table, pages.element,
    form.element, form.result,
    h('p', { class: 'note' }, 'version: 1 for a feature\'s first price, one more with each change; every version is kept. ' +
      'A change never touches a hold already made: it keeps the price it was reserved at. Open a feature for its versions. ' +
      `Read every ${PERIOD_MS / 1000} s (setting a price writes no ledger event).`));

  async function refresh() {
    const after = pages.after();
    const r = await api(`/v1/prices?limit=${PAGE}${after ? `&starting_after=${enc(after)}` : ''}`);
    if (!ctx.alive()) return;
    pages.read(r.prices, r.has_more, (p) => p.feature);
    const none = !r.prices.length && !after;
    empty.hidden = !none;
    table.hidden = none;
    pages.element.hidden = none;
    body.replaceChildren(...r.prices.map((p) => h('tr', { dataset: { feature: p.feature } },
      h('td', { class: 'feature' }, h('a', { href: `#/price/${enc(p.feature)}` }, p.feature)),
      h('td', { class: 'num credits' }, num(p.credits_per_unit)),
      h('td', { class: 'num version' }, String(p.version)),
      h('td', { class: 'updated' }, p.updated_at))));
  }

  return { refresh, affectedBy: () => false, periodicMs: PERIOD_MS };
}

export function mountPrice(ctx, feature) {
  const facts = h('dl', { class: 'kv', id: 'price-facts' });
  const body = h('tbody', { id: 'versions-body' });
  const pages = pager('versions', () => refresh());
  const form = priceForm(feature);
  const missing = h('div', { id: 'price-missing', class: 'empty', hidden: true },
    h('p', {}, `${feature} has no price: a reservation by this feature is refused.`),
    h('p', {}, 'Set one with ', h('code', {}, `tollgate price set ${feature} CREDITS_PER_UNIT`),
      h('span', { class: 'write' }, ', or with the form below'), '.'));
  const table = h('table', { id: 'versions' },
    h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'version'), h('th', { class: 'num' }, 'credits per unit'),
      h('th', {}, 'set at'), h('th', {}, 'in force until'))),
    body);
  const seen = new Map();  // version → its updated_at, of every page read: a version ends when the next one is set
  ctx.container.append(
    h('h1', {}, 'Price of ', h('code', { id: 'price-title' }, feature)),
    missing, facts,
    form.element, form.result,
    h('h2', { id: 'versions-title' }, 'Its versions, newest first'),
    table, pages.element,
    h('p', { class: 'note' }, 'A hold reserved by this feature keeps the version it was priced at (its page names it), ' +
      'whatever the price is now. ', h('a', { href: '#/prices' }, 'Every price')));

  async function refresh() {
    const after = pages.after();
    let current, r;
    try {
      [current, r] = await Promise.all([api(`/v1/prices/${enc(feature)}`),
        api(`/v1/prices/${enc(feature)}/versions?limit=${PAGE}${after ? `&starting_after=${enc(after)}` : ''}`)]);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 404)) throw e;
      if (!ctx.alive()) return;
      for (const el of [facts, table, pages.element]) el.hidden = true;
      missing.hidden = false;
      return;
    }
    if (!ctx.alive()) return;
    for (const el of [facts, table, pages.element]) el.hidden = false;
    missing.hidden = true;
    const kv = (k, v) => [h('dt', {}, k), h('dd', { dataset: { field: k } }, v)];
    facts.replaceChildren(...kv('credits per unit', num(current.credits_per_unit)), ...kv('version', String(current.version)),
      ...kv('set at', current.updated_at));
    pages.read(r.versions, r.has_more, (v) => String(v.version));
    for (const v of r.versions) seen.set(v.version, v.updated_at);
    // The newest version (the first row of the first page) is in force now; another one until the
    // next version was set (that version's row, on this page or on one read before).
    const until = (v, i) => (i === 0 && !after ? 'now' : seen.get(v.version + 1) ?? '–');
    body.replaceChildren(...r.versions.map((v, i) => h('tr',
      { dataset: { version: String(v.version) }, class: v.version === current.version ? 'current' : null },
      h('td', { class: 'num version' }, String(v.version)),
      h('td', { class: 'num credits' }, num(v.credits_per_unit)),
      h('td', { class: 'updated' }, v.updated_at),
      h('td', { class: 'until' }, until(v, i)))));
  }

  return { refresh, affectedBy: () => false, periodicMs: PERIOD_MS };
}
