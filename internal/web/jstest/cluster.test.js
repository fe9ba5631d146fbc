// The cluster panel's pure helpers.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { clusterSummary, healthText } from '../static/js/cluster.js';

test('clusterSummary counts nodes alive, partitions owned and their lag', () => {
  const s = {
    node: 'n1', degraded: [],
    nodes: [{ name: 'n1', alive: true }, { name: 'n2', alive: true }, { name: 'n3', alive: false }],
    partitions: [{ id: 0, owner: 'n1', lag: 1200 }, { id: 1, owner: '', lag: 3 }, { id: 2, owner: 'n2', lag: 0 }],
    stream: {}, store: {},
  };
  assert.equal(clusterSummary(s), 'as n1 sees it: 3 nodes (2 alive) · 3 partitions (2 owned) · lag 1,203 messages');
  assert.equal(clusterSummary({ node: 'n', nodes: [{ name: 'n', alive: true }], partitions: [{ id: 0, owner: 'n', lag: 1 }] }),
    'as n sees it: 1 node (1 alive) · 1 partition (1 owned) · lag 1 message');
  assert.equal(clusterSummary({ node: 'n', nodes: null, partitions: null }), 'as n sees it: 0 nodes (0 alive) · 0 partitions (0 owned) · lag 0 messages');
});

test('healthText says why a part is unhealthy', () => {
  assert.equal(healthText(true, ''), 'healthy');
  assert.equal(healthText(false, 'no quorum'), 'unhealthy: no quorum');
  assert.equal(healthText(false), 'unhealthy');
});
