// cluster.js: the console's cluster panel: GET /api/v1/cluster as the
// node serving the page sees it — the nodes and whether they are alive,
// the ingest stream's and the shared store's health, who owns which
// partition and its lag, and what is degraded. A bridge that runs alone
// answers 404 and the panel stays hidden.

import { api, h, fill, errorBox, fmtNum, fmtBytes, fmtTime } from './lib.js';

/**
 * @typedef {{name: string, url: string, alive: boolean, last_seen: string}} ClusterNode
 * @typedef {{id: number, owner: string, lag: number, checkpoint: number}} ClusterPartition
 * @typedef {{name: string, replicas: number, leader: string, messages: number, bytes: number, max_bytes?: number, full?: boolean, healthy: boolean, error?: string}} ClusterStream
 * @typedef {{backend: string, healthy: boolean, error?: string}} ClusterStore
 * @typedef {{node: string, nodes: ClusterNode[], partitions: ClusterPartition[], stream: ClusterStream, store: ClusterStore, degraded: string[]}} ClusterStatus
 */

/**
 * clusterSummary is the panel's first line: nodes alive, partitions
 * owned and their lag in all.
 * @param {ClusterStatus} s
 * @returns {string}
 */
export function clusterSummary(s) {
  const nodes = s.nodes || [], parts = s.partitions || [];
  const alive = nodes.filter((n) => n.alive).length;
  const owned = parts.filter((p) => p.owner).length;
  const lag = parts.reduce((sum, p) => sum + (p.lag || 0), 0);
  return `as ${s.node} sees it: ${nodes.length} node${nodes.length === 1 ? '' : 's'} (${alive} alive) · ` +
    `${parts.length} partition${parts.length === 1 ? '' : 's'} (${owned} owned) · lag ${fmtNum(lag)} message${lag === 1 ? '' : 's'}`;
}

/**
 * healthText says a part's health for people.
 * @param {boolean} ok
 * @param {string} [err]
 */
export function healthText(ok, err) {
  if (ok) return 'healthy';
  return err ? `unhealthy: ${err}` : 'unhealthy';
}

/**
 * clusterPanel returns the panel (hidden until a cluster answers) and
 * its refresh, called with the console's other figures.
 * @param {AbortSignal} signal
 */
export function clusterPanel(signal) {
  const summary = h('div', { class: 'cluster-summary' });
  const degraded = h('div', { class: 'cluster-degraded' });
  const parts = h('div', { class: 'kv cluster-parts' });
  const nodes = h('div', { class: 'table-box' });
  const partitions = h('div', { class: 'table-box' });
  const error = h('div');
  const el = h('section', { class: 'panel cluster', hidden: true },
    h('h3', null, 'Cluster'), error, summary, degraded, parts,
    h('h4', null, 'Nodes'), nodes, h('h4', null, 'Partitions'), partitions);

  const table = (cls, heads, rows) => h('table', { class: 'grid ' + cls },
    h('thead', null, h('tr', null, heads.map(([label, c]) => h('th', { class: c }, label)))),
    h('tbody', null, rows.length ? rows : h('tr', null, h('td', { colspan: heads.length, class: 'muted' }, 'none'))));

  /** @param {ClusterStatus} s */
  const show = (s) => {
    summary.textContent = clusterSummary(s);
    el.dataset.node = s.node;
    el.dataset.degraded = String((s.degraded || []).length);
    fill(degraded, (s.degraded || []).length
      ? h('div', { class: 'notice err' }, h('strong', null, 'Degraded'), h('ul', null, s.degraded.map((d) => h('li', null, d))))
      : h('div', { class: 'notice ok' }, 'nothing degraded'));
    const st = s.stream || /** @type {ClusterStream} */ ({}), so = s.store || /** @type {ClusterStore} */ ({});
    fill(parts,
      h('span', null, 'stream'), h('span', null, `${st.name || '?'} · ${st.replicas || 0} replicas · leader ${st.leader || '(none)'} · ${fmtNum(st.messages)} messages · ${fmtBytes(st.bytes || 0)}${st.max_bytes ? ' of ' + fmtBytes(st.max_bytes) : ''}${st.full ? ' · FULL' : ''} · `,
        h('span', { class: 'badge ' + (st.healthy ? 'ok' : 'err'), title: st.error || '' }, healthText(st.healthy, st.error))),
      h('span', null, 'store'), h('span', null, `${so.backend || '?'} · `,
        h('span', { class: 'badge ' + (so.healthy ? 'ok' : 'err'), title: so.error || '' }, healthText(so.healthy, so.error))));
    fill(nodes, table('cluster-nodes', [['Node'], ['Alive'], ['Last seen'], ['API']],
      (s.nodes || []).map((n) => h('tr', { dataset: { name: n.name } },
        h('td', null, n.name + (n.name === s.node ? ' (this node)' : '')),
        h('td', null, h('span', { class: 'badge ' + (n.alive ? 'ok' : 'err') }, n.alive ? 'alive' : 'gone')),
        h('td', null, n.last_seen ? fmtTime(n.last_seen) : ''),
        h('td', null, n.url ? h('a', { href: n.url + '/console' }, n.url) : '')))));
    fill(partitions, table('cluster-partitions', [['Partition', 'num'], ['Owner'], ['Lag', 'num'], ['Checkpoint', 'num']],
      (s.partitions || []).map((p) => h('tr', { dataset: { id: String(p.id) } },
        h('td', { class: 'num' }, String(p.id)),
        h('td', { class: p.owner ? '' : 'err' }, p.owner || '(none)'),
        h('td', { class: 'num' }, fmtNum(p.lag)),
        h('td', { class: 'num' }, fmtNum(p.checkpoint))))));
  };

  const refresh = async () => {
    try {
      const s = await api('/api/v1/cluster', null, { signal });
      el.hidden = false;
      fill(error);
      show(s);
    } catch (e) {
      if (e.name === 'AbortError') return;
      if (e.status === 404) { el.hidden = true; return; } // a bridge that runs alone
      el.hidden = false;
      fill(error, errorBox(e));
    }
  };
  return { el, refresh };
}
