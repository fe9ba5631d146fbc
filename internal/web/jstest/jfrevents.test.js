// The event browser's pure helpers: filters, the API's parameters, the
// columns of a type and its values by unit.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { eventColumns, eventsParams, fmtValue, parseFilters, typeLabel } from '../static/js/jfrevents.js';

test('parseFilters splits on ; and new lines and drops empty ones', () => {
  assert.deepEqual(parseFilters('duration>1000; monitorClass~Lock\n\n ;x=1'), ['duration>1000', 'monitorClass~Lock', 'x=1']);
  assert.deepEqual(parseFilters(''), []);
  assert.deepEqual(parseFilters(undefined), []);
});

test('eventsParams carries only what is set', () => {
  assert.deepEqual(eventsParams('h', { etype: 'jdk.ThreadSleep' }), { host: 'h', type: 'jdk.ThreadSleep', limit: '100' });
  assert.deepEqual(eventsParams('h', { etype: 't', ethread: 'main', efilter: 'a=1;b>2', esort: 'duration', easc: '1', since: '1h' }, '100'),
    { host: 'h', type: 't', limit: '100', since: '1h', thread: 'main', filter: ['a=1', 'b>2'], sort: 'duration', order: 'asc', cursor: '100' });
});

test('eventColumns leaves out thread ids and the truncated flag', () => {
  const type = { name: 't', fields: [{ name: 'startTime', kind: 'long' }, { name: 'eventThread', kind: 'string' },
    { name: 'eventThread.javaThreadId', kind: 'long' }, { name: 'eventThread.osThreadId', kind: 'long' },
    { name: 'stackTrace', kind: 'string[]' }, { name: 'stackTrace.truncated', kind: 'boolean' }, { name: 'duration', kind: 'long' }] };
  assert.deepEqual(eventColumns(type), [0, 1, 4, 6]);
});

test('fmtValue renders by unit, arrays by their first item', () => {
  assert.equal(fmtValue({ name: 'd', kind: 'long', unit: 'ns' }, 1500000), '1.50ms');
  assert.equal(fmtValue({ name: 'b', kind: 'long', unit: 'bytes' }, 2048), '2.0 KiB');
  assert.equal(fmtValue({ name: 'p', kind: 'float', unit: 'percent' }, 0.256), '25.6 %');
  assert.equal(fmtValue({ name: 'a', kind: 'long', unit: 'address' }, 255), '0xff');
  assert.equal(fmtValue({ name: 's', kind: 'string[]' }, ['a() line: 1', 'b() line: 2', 'c']), 'a() line: 1 (+2)');
  assert.equal(fmtValue({ name: 's', kind: 'string[]' }, ['a', 'b'], true), 'a\nb');
  assert.equal(fmtValue({ name: 's', kind: 'string[]' }, []), '');
  assert.equal(fmtValue({ name: 'x', kind: 'string' }, null), '');
  assert.equal(fmtValue({ name: 'n', kind: 'long' }, 12345), '12,345');
  assert.equal(fmtValue({ name: 'ok', kind: 'boolean' }, true), 'true');
});

test('typeLabel names the label, the type and the count', () => {
  assert.equal(typeLabel({ name: 'jdk.ExecutionSample', label: 'Method Profiling Sample', fields: [], count: 1234 }), 'Method Profiling Sample (jdk.ExecutionSample): 1,234');
  assert.equal(typeLabel({ name: 'shop.Order', fields: [], count: 3 }), 'shop.Order (shop.Order): 3');
});
