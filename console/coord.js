// Locks (GET /v1/locks: key, owner, fence, lease left; paged by key, held only or every key ever
// used) and rate-limit policies (GET /v1/ratelimits: parameters and this instance's decisions).
// Neither writes ledger events, so these pages re-read every 5 s (periodicMs) rather than on the
// change feed; a lease's countdown ticks in the page between reads.
import { api, enc, duration, num, h } from './api.js';

const LOCKS_PAGE = 50;
const PERIOD_MS = 5000;

export function mountLocks(ctx) {
  const body = h('tbody', { id: 'locks-body' });
  const heldOnly = h('input', { type: 'checkbox', id: 'locks-held', checked: true, onchange: () => { page = 0; refresh(); } });
  const pageInfo = h('span', { class: 'note', id: 'locks-page' });
  const cursors = [''];
  let page = 0;
  let hasMore = false;
  let locks = [];
  let readAt = 0;  // performance.now() of the last read: lease_left_ms counts down from it

  ctx.container.append(
    h('h1', {}, 'Locks'),
    h('p', { class: 'filters' }, h('label', {}, heldOnly, ' held only (a lock\'s row is kept after release: without this, every key ever used)')),
    h('table', { id: 'locks' },
      h('thead', {}, h('tr', {}, h('th', {}, 'key'), h('th', {}, 'owner'), h('th', { class: 'num' }, 'fence'),
        h('th', { class: 'num' }, 'lease left'), h('th', {}, 'expires at'), h('th', {}, 'state'))),
      body),
    h('div', { class: 'pager' },
      h('button', { type: 'button', id: 'locks-prev', onclick: () => { if (page > 0) { page--; refresh(); } } }, '← Previous'),
      h('button', { type: 'button', id: 'locks-next', onclick: () => { if (hasMore) { page++; refresh(); } } }, 'Next →'),
      pageInfo),
    h('p', { class: 'note' }, `Read every ${PERIOD_MS / 1000} s (locks write no ledger events); lease left on the store's clock at the read, counted down here.`));

  async function refresh() {
    const after = cursors[page];
    const r = await api(`/v1/locks?limit=${LOCKS_PAGE}${heldOnly.checked ? '&held=true' : ''}${after ? `&starting_after=${enc(after)}` : ''}`);
    if (!ctx.alive()) return;
    readAt = performance.now();
    locks = r.locks;
    hasMore = r.has_more;
    if (locks.length) cursors[page + 1] = locks[locks.length - 1].key;
    body.replaceChildren(...locks.map((l) => h('tr', { dataset: { lock: l.key } },
      h('td', {}, l.key), h('td', { class: 'owner' }, l.owner ?? '–'), h('td', { class: 'num fence' }, String(l.fence)),
      h('td', { class: 'num lease' }), h('td', {}, l.expires_at ?? '–'),
      h('td', { class: 'state' }, l.held ? (l.cancelled ? 'held, cancel asked' : 'held') : (l.owner ? 'lease ran out' : 'free')))));
    if (!locks.length) body.append(h('tr', {}, h('td', { colspan: '6', class: 'note' }, heldOnly.checked ? 'no lock is held' : 'no locks')));
    pageInfo.textContent = `page ${page + 1}${hasMore ? '' : ' (last)'}`;
    tick();
  }

  function tick() {
    const since = performance.now() - readAt;
    for (const l of locks) {
      const cell = body.querySelector(`tr[data-lock="${CSS.escape(l.key)}"] .lease`);
      if (!cell) continue;
      const left = l.lease_left_ms == null ? null : l.lease_left_ms - since;
      cell.textContent = left == null ? '–' : left > 0 ? duration(left) : 'ran out';
      cell.dataset.leaseLeftMs = l.lease_left_ms == null ? '' : String(l.lease_left_ms);
      cell.classList.toggle('bad', left != null && left < 5000);
    }
  }

  return { refresh, tick, affectedBy: () => false, periodicMs: PERIOD_MS };
}

export function mountRateLimits(ctx) {
  const body = h('tbody', { id: 'policies-body' });
  ctx.container.append(
    h('h1', {}, 'Rate-limit policies'),
    h('table', { id: 'policies' },
      h('thead', {}, h('tr', {}, h('th', {}, 'policy'), h('th', {}, 'store'), h('th', { class: 'num' }, 'limit'),
        h('th', { class: 'num' }, 'period'), h('th', { class: 'num' }, 'admitted'), h('th', { class: 'num' }, 'refused'),
        h('th', { class: 'num' }, 'refused share'), h('th', { class: 'num' }, 'keys in memory'))),
      body),
    h('p', { class: 'note' }, 'GCRA: a burst of up to limit, refilled at limit per period. Decisions are this instance\'s since it started ' +
      `(behind a load balancer, each read may be another instance's). Read every ${PERIOD_MS / 1000} s.`));

  async function refresh() {
    const r = await api('/v1/ratelimits');
    if (!ctx.alive()) return;
    body.replaceChildren(...r.policies.map((p) => {
      const total = p.allowed + p.limited;
      return h('tr', { dataset: { policy: p.policy } },
        h('td', {}, p.policy), h('td', {}, p.store), h('td', { class: 'num limit' }, num(p.limit)),
        h('td', { class: 'num period' }, duration(p.period_ms)), h('td', { class: 'num allowed' }, num(p.allowed)),
        h('td', { class: 'num limited' }, num(p.limited)),
        h('td', { class: 'num' }, total ? `${((100 * p.limited) / total).toFixed(1)} %` : '–'),
        h('td', { class: 'num' }, p.local_keys == null ? '–' : num(p.local_keys)));
    }));
    if (!r.policies.length) body.append(h('tr', {}, h('td', { colspan: '8', class: 'note' }, 'no policy is configured ([ratelimits.NAME] in the configuration)')));
  }

  return { refresh, affectedBy: () => false, periodicMs: PERIOD_MS };
}
