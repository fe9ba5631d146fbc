// The pure helpers of the views: addresses, durations, sizes and the
// analysis graph's nodes and edges.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { parseExpansions } from '../static/js/trace.js';
import { summary } from '../static/js/live.js';
import { parseExact } from '../static/js/lib.js';
import { apiParams, seconds } from '../static/js/search.js';
import { ageText, rate, sizeText } from '../static/js/hosts.js';
import { edgeView, nodeView, shortClass, shortOp, statsText } from '../static/js/analysis.js';

test('parseExpansions reads ROOT.MAX pairs and drops the rest', () => {
  assert.deepEqual(parseExpansions('3.100,bad,5.0,-1.4,7.999999,8.2.5'), [[3, 100], [7, 200000], [8, 2]]);
  assert.deepEqual(parseExpansions('2.1.5'), [[2, 1]]);
  assert.deepEqual(parseExpansions('1.0'), [], 'MAX 0 is dropped');
  assert.deepEqual(parseExpansions(''), []);
  assert.deepEqual(parseExpansions(null), []);
  const many = Array.from({ length: 60 }, (_, i) => `${i}.10`).join(',');
  assert.equal(parseExpansions(many).length, 50);
});

test('apiParams keeps the search\'s parameters and a limit', () => {
  assert.deepEqual(apiParams(new URLSearchParams('host=a&host=&host=b&since=1h&sort=x&attr=&limit=&cursor=c')),
    { host: ['a', 'b'], since: '1h', limit: '100' });
  assert.deepEqual(apiParams(new URLSearchParams('limit=5&q=~err&attr=k%3Dv')), { attr: ['k=v'], q: '~err', limit: '5' });
});

test('seconds reads Go durations in ms, s and m', () => {
  assert.equal(seconds('500ms'), 0.5);
  assert.equal(seconds('5s'), 5);
  assert.equal(seconds('1.5s'), 1.5);
  assert.equal(seconds('1m'), 60);
  assert.ok(Number.isNaN(seconds('1h')));
  assert.ok(Number.isNaN(seconds('')));
});

test('sizeText and ageText write what the API reads back', () => {
  assert.equal(sizeText(0), '');
  assert.equal(sizeText(2 * 2 ** 30), '2GiB');
  assert.equal(sizeText(500 * 2 ** 20), '500MiB');
  assert.equal(sizeText(2 ** 40), '1TiB');
  assert.equal(sizeText(1000), '1000');
  assert.equal(ageText(7 * 86400e9), '7d');
  assert.equal(ageText(12 * 3600e9), '12h');
  assert.equal(ageText(90e9), '90s');
  assert.equal(ageText(1.5e9), '1.50s');
});

test('rate: two decimals below 100', () => {
  assert.equal(rate(1.234), '1.23');
  assert.equal(rate(123.4), '123');
  assert.equal(rate(12345.6), '12,346');
});

test('shortClass and shortOp drop what the other line says', () => {
  assert.equal(shortClass('com.shop.Cart'), 'Cart');
  assert.equal(shortClass('Cart.'), 'Cart.');
  assert.equal(shortClass('a b.c'), 'a b.c', 'not a class name');
  assert.equal(shortClass(''), '');
  assert.equal(shortOp('public void com.shop.Cart.add(int)', 'com.shop.Cart'), 'add(int)');
  assert.equal(shortOp('GET /cart', 'svc'), 'GET /cart');
  assert.equal(shortOp('', 'x'), '');
});

test('statsText', () => {
  assert.equal(statsText({ count: 1200, avgNs: 2e6, maxNs: 5e6 }), '1,200× ⌀2.00ms max 5.00ms');
  assert.equal(statsText({ count: 0 }), '');
  assert.equal(statsText(null), '');
});

test('nodeView: the entry, an operation, a component, a container', () => {
  const entry = nodeView({ id: 'entry' }, 'assembly-operation');
  assert.equal(entry.entry, true);
  assert.deepEqual(entry.lines, ['Entry']);
  const op = nodeView({ id: 'n1', component: 'com.shop.Cart', container: 'h1', operation: 'public void com.shop.Cart.add(int)',
    stats: { count: 3, avgNs: 1e6, maxNs: 2e6, minNs: 1, totalNs: 3e6 } }, 'deployment-operation');
  assert.deepEqual(op.lines, ['add(int)', 'Cart @ h1', '3× ⌀1.00ms max 2.00ms']);
  assert.equal(op.statsLast, true);
  assert.match(op.title, /^public void com\.shop\.Cart\.add\(int\)\ncom\.shop\.Cart\non h1\n3 calls in, min 1ns/);
  const comp = nodeView({ id: 'n2', component: 'com.shop.Cart', container: 'h1' }, 'deployment-component');
  assert.deepEqual(comp.lines, ['Cart', 'com.shop @ h1']);
  assert.equal(comp.fill, op.fill, 'coloured by component');
  const host = nodeView({ id: 'n3', container: 'h1' }, 'container');
  assert.deepEqual(host.lines, ['h1']);
  const long = nodeView({ id: 'n4', component: 'C', operation: 'x'.repeat(80) }, 'assembly-operation');
  assert.equal(long.lines[0].length, 60);
  assert.ok(long.lines[0].endsWith('…'));
});

test('edgeView labels calls and times', () => {
  const byId = new Map([['a', { lines: ['A'] }]]);
  const e = edgeView({ from: 'a', to: 'b', calls: 3, stats: { count: 3, avgNs: 1e6, maxNs: 2e6, minNs: 5e5 } }, byId);
  assert.deepEqual(e.label, ['3×', '⌀1.00ms · max 2.00ms']);
  assert.equal(e.title, 'A → b: 3 calls, min 500µs, mean 1.00ms, max 2.00ms');
  assert.deepEqual(e.data, { calls: 3 });
  const bare = edgeView({ from: 'a', to: 'b' }, byId);
  assert.deepEqual(bare.label, ['0×']);
  assert.equal(bare.title, 'A → b: 0 calls');
});

test('the live view shows a record\'s Kieker traceId above 2^53 exactly', () => {
  const msg = '{"kind":"records","records":[{"host":"web-1","seq":1,"time":1795312704163886691,"record":{"type":"kieker.common.record.flow.trace.operation.BeforeOperationEvent",' +
    '"fields":{"timestamp":1795312704163886691,"traceId":4658150164341456896,"orderIndex":0,"operationSignature":"public void a.B.c()","classSignature":"a.B"}}}]}';
  const text = summary(parseExact(msg).records[0].record);
  assert.match(text, /traceId=4658150164341456896(\s|$)/);
  assert.doesNotMatch(summary(JSON.parse(msg).records[0].record), /traceId=4658150164341456896(\s|$)/, 'JSON.parse would be exact: not a case');
});
