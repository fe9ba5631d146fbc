// The formatters and the query string of lib.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { color, fmtBytes, fmtDur, fmtNum, fmtTime, parseExact, query } from '../static/js/lib.js';

// Local time is the machine's: the tests pin it.
process.env.TZ = 'UTC';

test('fmtDur picks the unit and three significant digits', () => {
  const cases = [
    [0, '0ns'], [0.4, '0ns'], [950, '950ns'], [1000, '1.00µs'], [12345, '12.3µs'], [123456, '123µs'],
    [4.56e6, '4.56ms'], [1.23e9, '1.23s'], [59.4e9, '59.4s'], [123e9, '2m03s'], [3599e9, '59m59s'],
    [7200e9, '2h00m'], [-5e6, '-5.00ms'],
  ];
  for (const [ns, want] of cases) assert.equal(fmtDur(ns), want, `fmtDur(${ns})`);
});

test('fmtDur of nothing is empty', () => {
  assert.equal(fmtDur(null), '');
  assert.equal(fmtDur(undefined), '');
  assert.equal(fmtDur(NaN), '');
});

test('fmtBytes uses binary units with one decimal', () => {
  const cases = [[0, '0 B'], [1023, '1023 B'], [1024, '1.0 KiB'], [1536, '1.5 KiB'], [5 * 2 ** 30, '5.0 GiB'], [3 * 2 ** 50, '3072.0 TiB']];
  for (const [n, want] of cases) assert.equal(fmtBytes(n), want, `fmtBytes(${n})`);
  assert.equal(fmtBytes(null), '');
});

test('fmtNum groups thousands and keeps two decimals', () => {
  assert.equal(fmtNum(1234567.891), '1,234,567.89');
  assert.equal(fmtNum(0), '0');
  assert.equal(fmtNum('42'), '42');
  assert.equal(fmtNum(null), '');
});

test('fmtTime reads RFC 3339, ms and ns since the epoch alike', () => {
  const want = '2024-01-02 03:04:05.678';
  assert.equal(fmtTime('2024-01-02T03:04:05.678Z'), want);
  const ms = Date.UTC(2024, 0, 2, 3, 4, 5, 678);
  assert.equal(fmtTime(ms), want);
  assert.equal(fmtTime(ms * 1e6), want);
});

test('fmtTime keeps what it cannot read', () => {
  assert.equal(fmtTime(''), '');
  assert.equal(fmtTime(null), '');
  assert.equal(fmtTime('not a time'), 'not a time');
});

test('query leaves out empty values and repeats arrays', () => {
  assert.equal(query({ a: 1, b: '', c: [1, '', null, 2], d: false, e: null, f: true, g: undefined }), '?a=1&c=1&c=2&f=true');
  assert.equal(query({ q: 'a b&c' }), '?q=a+b%26c');
  assert.equal(query({}), '');
  assert.equal(query(null), '');
  assert.equal(query(undefined), '');
});

test('color is stable per name and tone', () => {
  assert.equal(color('svc'), color('svc'));
  assert.match(color('svc'), /^hsl\(\d+, 55%, 62%\)$/);
  assert.match(color('svc', true), /^hsl\(\d+, 55%, 85%\)$/);
  assert.equal(color('svc').split(',')[0], color('svc', true).split(',')[0], 'light and full share the hue');
  assert.notEqual(color('cart'), color('checkout'));
  const warm = color('frame', 'warm');
  const m = /^hsl\((\d+), (\d+)%, (\d+)%\)$/.exec(warm);
  assert.ok(m, warm);
  assert.ok(Number(m[1]) < 50, 'reds to yellows');
  assert.ok(Number(m[2]) >= 70 && Number(m[2]) < 90);
  assert.ok(Number(m[3]) >= 58 && Number(m[3]) < 70);
});

test('parseExact keeps every integer beyond 2^53 exact, as its digits', () => {
  // JSON.parse rounds them: a Kieker traceId, Go's int64 extremes, 2^53 + 1.
  const big = ['4658150164341456896', '9223372036854775807', '-9223372036854775808', '9007199254740993', '-9007199254740993', '12345678901234567890123'];
  for (const n of big) {
    assert.notEqual(String(JSON.parse(n)), n, `JSON.parse(${n}) would be exact: not a case`);
    assert.equal(parseExact(n), n);
    const m = parseExact(`{"kind":"records","records":[{"time":1795514400105100123,"record":{"fields":{"traceId":${n},"orderIndex":3}}}]}`);
    assert.equal(m.records[0].record.fields.traceId, n, `traceId ${n}`);
    assert.equal(m.records[0].record.fields.orderIndex, 3);
    // A link made of it names the same trace.
    assert.equal('/trace/' + encodeURIComponent(m.records[0].record.fields.traceId), '/trace/' + n);
  }
});

test('parseExact leaves safe numbers numbers and strings strings', () => {
  const safe = ['0', '-1', '9007199254740991', '-9007199254740991', '1.5', '-2.5e3', '1e300', '123456789012345.5', '1234567890123456e2'];
  for (const n of safe) assert.deepEqual(parseExact(`[${n}]`), JSON.parse(`[${n}]`), n);
  const text = '{"a":"4658150164341456896","b":"x\\"4658150164341456896","c":["\\\\",4658150164341456896],"d":true,"e":null}';
  assert.deepEqual(parseExact(text), { a: '4658150164341456896', b: 'x"4658150164341456896', c: ['\\', '4658150164341456896'], d: true, e: null });
  assert.throws(() => parseExact('{"a":4658150164341456896'), SyntaxError);
});
