// spandetail.js: one span in full (/spans/{index}) for the side panel:
// its identity and timing, Kieker's positions, attributes, OpenTelemetry
// resource and scope, events (an exception with its stack) and links.

import { fmtDur, fmtTime, h, link } from './lib.js';

// renderSpan answers the panel's content for a SpanDetail d of the trace
// traceId (offsetNs: the span's start less the trace's, from the view:
// exact, where d.start as a double is not).
export function renderSpan(d, traceId, offsetNs) {
  const kv = (pairs) => h('div', { class: 'kv' }, pairs.filter((p) => p[1] !== undefined && p[1] !== '' && p[1] !== null)
    .flatMap(([k, v]) => [h('span', null, k), h('span', null, v)]));
  const out = [
    h('h3', { class: 'sd-title' }, d.operation),
    d.error ? h('div', { class: 'error sd-status' }, 'Error' + (d.statusMessage ? ': ' + d.statusMessage : '')) : null,
    kv([
      ['index', String(d.index)], ['span id', d.spanId], ['parent span', d.parentSpanId], ['component', d.component],
      ['service', d.service], ['host', d.host], ['process', d.process], ['thread', d.thread], ['session', d.session],
      ['kind', d.kind], ['status', d.status + (d.statusMessage && !d.error ? ': ' + d.statusMessage : '')],
      ['start', fmtTime(d.start) + ` (+${fmtDur(offsetNs)})`], ['duration', fmtDur(d.durationNs)],
      ['self', fmtDur(d.selfNs)], ['children', String(d.children.length)], ['source', d.source],
    ]),
  ];
  if (d.kieker) {
    out.push(h('h4', null, 'Kieker record'), kv([
      ['traceId', String(d.kieker.traceId)], ['orderIndex', String(d.kieker.orderIndex)],
      ['eoi', String(d.kieker.eoi)], ['ess', String(d.kieker.ess)],
    ]));
  }
  out.push(h('h4', null, `Attributes (${d.attributes.length})`));
  out.push(d.attributes.length ? h('div', { class: 'kv sd-attrs' }, d.attributes.flatMap((a) => [
    h('span', { title: a.type }, a.key), h('span', null, attrText(a.value)),
  ])) : h('div', { class: 'muted' }, 'none'));
  // The OpenTelemetry resource and instrumentation scope the span came
  // from (absent for Kieker's and zorka's spans).
  if (d.resource) {
    out.push(h('h4', null, `Resource (${d.resource.attributes.length})`), attrTable(d.resource.attributes));
  }
  if (d.scope) {
    out.push(h('h4', null, 'Scope'), kv([['name', d.scope.name], ['version', d.scope.version]]));
    if (d.scope.attributes.length) out.push(attrTable(d.scope.attributes));
  }
  if (d.events.length) {
    out.push(h('h4', null, `Events (${d.events.length})`));
    for (const e of d.events) out.push(renderEvent(e, d.start));
  }
  if (d.links.length) {
    out.push(h('h4', null, `Links (${d.links.length})`));
    for (const l of d.links) {
      out.push(h('div', { class: 'sd-link mono' }, l.traceId === traceId ? 'this trace' : link('/trace/' + encodeURIComponent(l.traceId), l.traceId),
        ' · span ', l.spanId, l.kind ? ' · ' + l.kind : ''));
    }
  }
  return out;
}

function attrText(v) { return typeof v === 'string' ? v : JSON.stringify(v); }

// attrTable shows attributes ({key, type, value}) as key-value rows.
function attrTable(attrs) {
  return h('div', { class: 'kv sd-attrs' }, attrs.flatMap((a) => [h('span', { title: a.type }, a.key), h('span', null, attrText(a.value))]));
}

// renderEvent shows an event (at offsetNs from the span's start: exact,
// where e.time - spanStart of doubles is not); an exception (OpenTelemetry's semantic
// conventions, or a Kieker AfterOperationFailedEvent's cause) with its
// type, message and stack trace.
function renderEvent(e, spanStart) {
  const attrs = Object.fromEntries(e.attributes.map((a) => [a.key, a.value]));
  const stack = attrs['exception.stacktrace'];
  const isExc = e.name === 'exception' || attrs['exception.type'] !== undefined;
  const rest = e.attributes.filter((a) => !['exception.type', 'exception.message', 'exception.stacktrace'].includes(a.key));
  return h('div', { class: 'sd-event' + (isExc ? ' sd-exception' : '') },
    h('div', null, h('b', null, e.name), h('span', { class: 'muted' }, ` +${fmtDur(e.offsetNs ?? e.time - spanStart)}`)),
    isExc ? h('div', { class: 'err' }, [attrs['exception.type'], attrs['exception.message']].filter(Boolean).map(attrText).join(': ')) : null,
    stack ? h('pre', { class: 'sd-stack' }, attrText(stack)) : null,
    rest.length ? h('div', { class: 'kv' }, rest.flatMap((a) => [h('span', null, a.key), h('span', null, attrText(a.value))])) : null);
}
