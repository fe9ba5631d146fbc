// The formatters and the query string of lib.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { color, fmtBytes, fmtDur, fmtNum, fmtTime, query } from '../static/js/lib.js';

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
