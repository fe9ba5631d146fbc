// stats.js: Jaeger's trace statistics of one trace: per service and
// operation (or per service, or per operation) the spans' count, total,
// average, minimum and maximum duration, and the same of their self time
// (a span's duration less the union of its children's intervals, each
// clipped to the span), with the self time's share of the trace's
// duration. Pure: the trace page renders what traceStats answers.

/**
 * A span as GET /api/v1/traces/{id} gives it (start and end in unix ns:
 * numbers, or strings of their digits as parseExact leaves them, so that
 * nothing is rounded).
 * @typedef {{spanId: string, parentSpanId: string | null, operation: string, service?: string, host?: string,
 *   start: number | string, end: number | string}} StatSpan
 */

/**
 * One row: a group's figures in ns; selfShare is selfTotalNs over the
 * trace's duration (0 to 1).
 * @typedef {{service: string, operation: string, count: number, totalNs: number, avgNs: number, minNs: number,
 *   maxNs: number, selfTotalNs: number, selfAvgNs: number, selfMinNs: number, selfMaxNs: number, selfShare: number}} StatRow
 */

/** The groupings, as Jaeger's "Group By" offers them. */
export const groupings = ['service-operation', 'service', 'operation'];

/**
 * serviceName is the service a span's row is under: its service, else
 * its host (Kieker's calls name hosts), else unknown_service, as the
 * Jaeger API names them.
 * @param {StatSpan} s
 * @returns {string}
 */
export function serviceName(s) { return s.service || s.host || 'unknown_service'; }

/**
 * offsets answers the spans' start and end as ns from the trace's start,
 * exactly (BigInt while the times are unix ns).
 * @param {StatSpan[]} spans
 * @returns {{start: number[], end: number[]}}
 */
export function offsets(spans) {
  const ns = (/** @type {number | string} */ x) => BigInt(typeof x === 'number' ? Math.round(x) : x);
  let base = null;
  for (const s of spans) { const v = ns(s.start); if (base === null || v < base) base = v; }
  const start = [], end = [];
  for (const s of spans) { start.push(Number(ns(s.start) - base)); end.push(Number(ns(s.end) - base)); }
  return { start, end };
}

/**
 * selfTimes answers each span's self time: its duration less the union
 * of its children's intervals clipped to it (overlapping children count
 * once; time a child spends outside its parent counts for neither); never
 * below 0.
 * @param {StatSpan[]} spans
 * @param {{start: number[], end: number[]}} [at] offsets(spans)
 * @returns {number[]}
 */
export function selfTimes(spans, at = offsets(spans)) {
  /** @type {Map<string, number>} */
  const byId = new Map();
  spans.forEach((s, i) => byId.set(s.spanId, i));
  /** @type {number[][]} */
  const kids = spans.map(() => []);
  spans.forEach((s, i) => {
    const p = s.parentSpanId != null ? byId.get(s.parentSpanId) : undefined;
    if (p !== undefined && p !== i) kids[p].push(i);
  });
  return spans.map((_, i) => {
    const s = at.start[i], e = at.end[i];
    /** @type {[number, number][]} */
    const iv = [];
    for (const k of kids[i]) {
      const lo = Math.max(s, at.start[k]), hi = Math.min(e, at.end[k]);
      if (hi > lo) iv.push([lo, hi]);
    }
    iv.sort((a, b) => a[0] - b[0]);
    let covered = 0, curLo = 0, curHi = -Infinity;
    for (const [lo, hi] of iv) {
      if (lo > curHi) {
        if (curHi > curLo) covered += curHi - curLo;
        curLo = lo; curHi = hi;
      } else if (hi > curHi) curHi = hi;
    }
    if (curHi > curLo) covered += curHi - curLo;
    return Math.max(0, e - s - covered);
  });
}

/**
 * traceStats groups the spans of a trace (groupBy: 'service-operation',
 * 'service' or 'operation') and answers the rows, largest total first,
 * and the trace's duration.
 * @param {StatSpan[]} spans
 * @param {string} [groupBy]
 * @returns {{rows: StatRow[], durationNs: number, spans: number}}
 */
export function traceStats(spans, groupBy = 'service-operation') {
  if (!spans.length) return { rows: [], durationNs: 0, spans: 0 };
  const at = offsets(spans);
  const self = selfTimes(spans, at);
  // (A loop: spreading a million offsets into Math.max overflows the
  // stack.)
  let first = Infinity, last = -Infinity;
  for (let i = 0; i < spans.length; i++) { first = Math.min(first, at.start[i]); last = Math.max(last, at.end[i]); }
  const durationNs = last - first;
  /** @type {Map<string, StatRow>} */
  const groups = new Map();
  spans.forEach((s, i) => {
    const service = groupBy === 'operation' ? '' : serviceName(s);
    const operation = groupBy === 'service' ? '' : s.operation;
    const key = service + '\u0000' + operation;
    let r = groups.get(key);
    if (!r) {
      r = { service, operation, count: 0, totalNs: 0, avgNs: 0, minNs: Infinity, maxNs: -Infinity,
        selfTotalNs: 0, selfAvgNs: 0, selfMinNs: Infinity, selfMaxNs: -Infinity, selfShare: 0 };
      groups.set(key, r);
    }
    const d = at.end[i] - at.start[i];
    r.count++;
    r.totalNs += d;
    r.minNs = Math.min(r.minNs, d);
    r.maxNs = Math.max(r.maxNs, d);
    r.selfTotalNs += self[i];
    r.selfMinNs = Math.min(r.selfMinNs, self[i]);
    r.selfMaxNs = Math.max(r.selfMaxNs, self[i]);
  });
  const rows = [...groups.values()];
  for (const r of rows) {
    r.avgNs = r.totalNs / r.count;
    r.selfAvgNs = r.selfTotalNs / r.count;
    r.selfShare = durationNs > 0 ? r.selfTotalNs / durationNs : 0;
  }
  rows.sort((a, b) => b.totalNs - a.totalNs || a.service.localeCompare(b.service) || a.operation.localeCompare(b.operation));
  return { rows, durationNs, spans: spans.length };
}
