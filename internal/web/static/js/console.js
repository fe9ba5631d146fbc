// console.js: the console page (/console), what KDB's Eclipse plugin was:
// the bridge's status, its receivers (live figures every 2 s, start and
// stop), a form that adds a receiver (built from /component-types), its
// sinks, the KDB mapping editor of a tcp-server receiver and the
// effective configuration as YAML, and on a cluster node the cluster
// panel (cluster.js). Writes need the API token (the
// header's Token button); the token travels in a header, never in a URL.

import { api, h, fill, errorBox, fmtNum, fmtDur, fmtBytes, fmtTime, setQuery } from './lib.js';
import { clusterPanel } from './cluster.js';

const REFRESH = 2000;

export function mount(el, ctx) {
  const state = { mapping: ctx.query.get('mapping') || '' };
  let timer = null, closed = false;
  let types = null; // /component-types
  const abort = new AbortController();
  const signal = abort.signal;

  const statusBox = h('div', { class: 'kv console-status' }, h('span', { class: 'loading' }, 'loading…'));
  const tokenHint = h('div', { class: 'notice', hidden: true }, 'Read-only: starting, stopping and adding receivers, saving mappings and downloading the configuration need an API token (the Token button, top right; `tracebridge token` makes one).');
  const recError = h('div'), recPollError = h('div');
  const recTable = keyedTable('receivers', [
    ['Name'], ['Type'], ['Where'], ['State'], ['Since'], ['Connections', 'num'], ['Records', 'num'], ['Records/s', 'num'],
    ['Bytes/s', 'num'], ['Decode errors', 'num'], ['Rejected', 'num'], ['']]);
  const sinkError = h('div');
  const sinkTable = keyedTable('sinks', [
    ['Name'], ['Type'], ['Where'], ['Policy'], ['Records', 'num'], ['Records/s', 'num'], ['Errors', 'num'], ['Dropped', 'num'],
    ['Overflow', 'num'], ['Queue', 'num', 'batches waiting in the sink\'s queue']]);
  const addBox = h('div', null, h('div', { class: 'loading' }, 'loading the receiver types…'));
  const mappingBox = h('section', { class: 'panel mapping-editor', hidden: true });
  const configBox = configPanel(signal);
  const cluster = clusterPanel(signal);

  el.append(h('h2', null, 'Console'), tokenHint,
    h('section', { class: 'panel' }, h('h3', null, 'Bridge'), statusBox),
    cluster.el,
    h('section', { class: 'panel' }, h('h3', null, 'Receivers'), recError, recPollError, recTable.el),
    mappingBox,
    h('section', { class: 'panel' }, h('h3', null, 'Add a receiver'), addBox),
    h('section', { class: 'panel' }, h('h3', null, 'Sinks'), sinkError, sinkTable.el),
    configBox);

  // Receivers: a row per receiver, its figures updated in place (a
  // rebuilt row would swallow a click on its button).
  const control = async (name, action, btn) => {
    btn.disabled = true;
    fill(recError);
    try {
      await api(`/api/v1/receivers/${encodeURIComponent(name)}/${action}`, null, { method: 'POST', signal });
    } catch (e) {
      if (e.name !== 'AbortError') fill(recError, errorBox(e));
    }
    btn.disabled = false;
    refresh();
  };
  const mappable = (type) => !!(types && (types.receivers.find((t) => t.type === type || (t.aliases || []).includes(type))?.keys || []).some((k) => k.name === 'mapping'));
  const receiverRow = (r, cells, tr) => {
    const running = r.state === 'running';
    tr.dataset.state = r.state || '';
    cells[0].textContent = r.name;
    cells[1].textContent = r.type;
    // A stopped or failed receiver no longer listens where it did.
    const down = r.state === 'stopped' || r.state === 'failed';
    cells[2].textContent = down && r.where ? `was ${r.where}` : r.where;
    cells[2].classList.toggle('muted', down);
    fill(cells[3], h('span', { class: 'badge state ' + (running ? 'ok' : r.state === 'failed' ? 'err' : ''), title: r.error || '' }, r.state || '?'),
      r.error ? h('div', { class: 'err small' }, r.error) : null);
    cells[4].textContent = r.since ? fmtTime(r.since) : '';
    cells[5].textContent = `${fmtNum(r.connections)} (${fmtNum(r.connectionsTotal)} in all)`;
    cells[6].textContent = fmtNum(r.records);
    cells[7].textContent = fmtNum(Math.round(r.recordsPerSecond * 10) / 10);
    cells[8].textContent = fmtBytes(Math.round(r.bytesPerSecond)) + '/s';
    cells[9].textContent = fmtNum(r.decodeErrors);
    cells[10].textContent = fmtNum(r.rejected);
    // Buttons are made once per row; only their state changes.
    if (!cells[11].firstChild) {
      const stop = h('button', { type: 'button', class: 'stop', onclick: () => control(r.name, 'stop', stop) }, 'Stop');
      const start = h('button', { type: 'button', class: 'start', onclick: () => control(r.name, 'start', start) }, 'Start');
      const map = h('button', { type: 'button', class: 'mapping', title: 'edit the KDB mapping: record ids and their types', onclick: () => openMapping(r.name) }, 'Mapping');
      cells[11].append(stop, ' ', start, ' ', map);
    }
    const [stop, start, map] = cells[11].querySelectorAll('button');
    stop.hidden = !running;
    start.hidden = running;
    map.hidden = !mappable(r.type);
  };
  const sinkRow = (s, cells) => {
    cells[0].textContent = s.name; cells[1].textContent = s.type; cells[2].textContent = s.where; cells[3].textContent = s.policy || '';
    cells[4].textContent = fmtNum(s.records); cells[5].textContent = fmtNum(Math.round(s.recordsPerSecond * 10) / 10);
    cells[6].textContent = fmtNum(s.errors); cells[7].textContent = fmtNum(s.dropped); cells[8].textContent = fmtNum(s.overflow);
    cells[9].textContent = fmtNum(s.queueBatches);
    cells[6].classList.toggle('err', s.errors > 0); cells[7].classList.toggle('err', s.dropped > 0);
  };

  const showStatus = (s) => {
    const kv = [];
    const add = (k, v) => kv.push(h('span', null, k), h('span', null, v));
    add('version', s.version);
    add('up', `${fmtDur(s.uptimeNs)} (since ${fmtTime(s.started)})`);
    add('records', `${fmtNum(s.records)} · ${fmtNum(Math.round(s.recordsPerSecond * 10) / 10)}/s`);
    add('queue', `${fmtNum(s.queueBatches)} batches`);
    const t = s.traces || {};
    add('traces', `${fmtNum(t.traces)} assembled, ${fmtNum(t.spans)} spans, ${fmtNum(t.open)} open, ${fmtNum(t.broken)} broken, ${fmtNum(t.evicted)} evicted`);
    add('store', s.store ? `${s.storeDir} · ${fmtBytes(s.storeSize)}` : 'none');
    add('live view', s.live ? 'on' : 'off (no stream)');
    add('JFR profiles', s.profiles ? 'on' : 'off');
    add('writes', s.writes ? (s.canWrite ? 'allowed (token given)' : 'need a token') : 'off (no API tokens configured)');
    fill(statusBox, kv);
    statusBox.dataset.version = s.version;
    tokenHint.hidden = !(s.writes && !s.canWrite);
  };

  // refresh reads the status, receivers and sinks; a failure shows in its
  // panel and the next round tries again.
  let busy = false, again = false;
  async function refresh() {
    if (closed) return;
    // One round at a time; a change asked for meanwhile gets another.
    if (busy) { again = true; return; }
    busy = true;
    const [st, rs, ss] = await Promise.allSettled([api('/api/v1/status', null, { signal }), api('/api/v1/receivers', null, { signal }), api('/api/v1/sinks', null, { signal }), cluster.refresh()]);
    busy = false;
    if (closed) return;
    if (st.status === 'fulfilled') showStatus(st.value); else fill(statusBox, errorBox(st.reason));
    if (rs.status === 'fulfilled') { fill(recPollError); recTable.update(rs.value.receivers, (r) => r.name, receiverRow); } else if (rs.reason.name !== 'AbortError') fill(recPollError, errorBox(rs.reason));
    if (ss.status === 'fulfilled') { fill(sinkError); sinkTable.update(ss.value.sinks, (s) => s.name, sinkRow); } else if (ss.reason.name !== 'AbortError') fill(sinkError, errorBox(ss.reason));
    if (again) { again = false; refresh(); }
  }

  // The mapping editor of one receiver (?mapping=NAME).
  const openMapping = (name) => {
    state.mapping = name;
    setQuery({ mapping: name });
    mappingEditor(mappingBox, name, signal, () => { state.mapping = ''; setQuery({}); mappingBox.hidden = true; fill(mappingBox); }, refresh);
    mappingBox.scrollIntoView({ block: 'nearest' });
  };

  (async () => {
    try {
      types = await api('/api/v1/component-types', null, { signal });
      fill(addBox, addForm(types, signal, refresh));
    } catch (e) {
      if (e.name !== 'AbortError') fill(addBox, errorBox(e));
    }
    refresh();
  })();
  if (state.mapping) openMapping(state.mapping);
  refresh();
  timer = setInterval(refresh, REFRESH);
  return () => { closed = true; clearInterval(timer); abort.abort(); };
}

// keyedTable is a table whose rows are updated in place by key.
function keyedTable(name, cols) {
  const body = h('tbody');
  const tbl = h('table', { class: 'grid console-' + name },
    h('thead', null, h('tr', null, cols.map(([label, cls, title]) => h('th', { class: cls, title }, label)))), body);
  const rows = new Map();
  const update = (items, keyOf, paint) => {
    const seen = new Set();
    for (const tr of [...body.children]) if (!tr.dataset.name) tr.remove(); // the 'none' row
    for (const it of items) {
      const k = keyOf(it);
      seen.add(k);
      let r = rows.get(k);
      if (!r) {
        const cells = cols.map(([, cls]) => h('td', { class: cls }));
        r = { tr: h('tr', { dataset: { name: k } }, cells), cells };
        rows.set(k, r);
      }
      body.append(r.tr); // keeps the API's order
      paint(it, r.cells, r.tr);
    }
    for (const [k, r] of rows) if (!seen.has(k)) { r.tr.remove(); rows.delete(k); }
    if (!items.length) fill(body, h('tr', null, h('td', { colspan: cols.length, class: 'muted' }, 'none')));
  };
  return { el: h('div', { class: 'table-box' }, tbl), update };
}

// Adding a receiver -----------------------------------------------------

// addForm builds a form for the chosen receiver type from its keys.
function addForm(types, signal, done) {
  const recv = types.receivers || [];
  const typeSel = h('select', { name: 'type', required: true },
    h('option', { value: '' }, 'choose a type…'),
    recv.map((t) => h('option', { value: t.type, title: (t.aliases || []).length ? 'also: ' + t.aliases.join(', ') : null }, t.type)));
  const name = h('input', { name: 'name', placeholder: 'default: the type', size: 20, autocomplete: 'off' });
  const fields = h('div', { class: 'config-fields' });
  const msg = h('div', { class: 'form-msg' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Add and start');
  let readers = [];
  typeSel.addEventListener('change', () => {
    fill(msg);
    const t = recv.find((x) => x.type === typeSel.value);
    readers = [];
    fill(fields, t ? keyFields(t.keys, readers, '') : null);
  });
  const form = h('form', { class: 'add-receiver', onsubmit: async (e) => {
    e.preventDefault();
    fill(msg);
    if (!typeSel.value) { fill(msg, errorBox('Choose a receiver type.')); return; }
    let config;
    try { config = collect(readers); } catch (err) { fill(msg, errorBox(err)); return; }
    submit.disabled = true;
    try {
      const r = await api('/api/v1/receivers', null, { method: 'POST', body: { type: typeSel.value, name: name.value.trim(), config }, signal });
      fill(msg, h('div', { class: 'notice ok' }, `Added ${r.name} (${r.type}): ${r.state || ''}${r.where ? ', ' + r.where : ''}.`));
      name.value = '';
      done();
    } catch (err) {
      if (err.name !== 'AbortError') fill(msg, errorBox(err));
    } finally {
      submit.disabled = false;
    }
  } },
  h('div', { class: 'row' }, h('label', null, 'type', typeSel), h('label', null, 'name', name)),
  fields, h('div', { class: 'row' }, submit), msg);
  return form;
}

// keyFields makes an input per configuration key (objects nest);
// readers collects [path, read()] to build the config object from.
function keyFields(keys, readers, prefix) {
  return keys.map((k) => {
    const path = prefix ? prefix + '.' + k.name : k.name;
    if (k.type === 'object' && k.keys && k.keys.length) {
      return h('fieldset', { class: 'nested' }, h('legend', null, k.name), keyFields(k.keys, readers, path));
    }
    const def = k.default !== undefined && k.default !== null ? String(k.default) : '';
    let input, read;
    switch (k.type) {
      case 'boolean':
        input = h('select', { name: path }, h('option', { value: '' }, def ? `default (${def})` : 'default'), h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
        read = () => (input.value === '' ? undefined : input.value === 'true');
        break;
      case 'integer':
      case 'number':
        input = h('input', { name: path, type: 'number', step: k.type === 'number' ? 'any' : '1', placeholder: def, size: 10 });
        read = () => (input.value === '' ? undefined : Number(input.value));
        break;
      case 'list':
        input = h('input', { name: path, placeholder: def || 'comma-separated', size: 30 });
        read = () => {
          const v = input.value.trim();
          if (!v) return undefined;
          const items = v.split(',').map((x) => x.trim()).filter(Boolean);
          return k.items === 'integer' || k.items === 'number' ? items.map(Number) : items;
        };
        break;
      default: {
        const hint = { duration: '250ms, 5s', size: '64MiB' }[k.type];
        input = h('input', { name: path, placeholder: def || hint || '', size: k.name === 'listen' || k.name === 'mapping' || k.name === 'url' ? 30 : 16, autocomplete: 'off' });
        read = () => (input.value.trim() === '' ? undefined : input.value.trim());
      }
    }
    readers.push([path, read, input]);
    return h('label', { title: `${k.name}: ${k.type}${k.items ? ' of ' + k.items : ''}${def ? ', default ' + def : ''}` }, `${k.name} (${k.type})`, input);
  });
}

// collect builds the config object of the filled-in keys.
function collect(readers) {
  const out = {};
  for (const [path, read, input] of readers) {
    const v = read();
    if (v === undefined) continue;
    if (typeof v === 'number' && isNaN(v)) throw new Error(`${path}: not a number`);
    if (Array.isArray(v) && v.some((x) => typeof x === 'number' && isNaN(x))) throw new Error(`${path}: not a list of numbers`);
    const parts = path.split('.');
    let o = out;
    for (const p of parts.slice(0, -1)) o = o[p] = o[p] || {};
    o[parts[parts.length - 1]] = v;
    input.classList.remove('invalid');
  }
  return out;
}

// The mapping editor ----------------------------------------------------

let recordTypes = null; // /record-types, read once per page load

async function mappingEditor(box, name, signal, close, changed) {
  box.hidden = false;
  fill(box, h('h3', null, `KDB mapping of ${name}`), h('div', { class: 'loading' }, 'loading…'));
  let m;
  try {
    [m, recordTypes] = await Promise.all([api(`/api/v1/receivers/${encodeURIComponent(name)}/mapping`, null, { signal }), recordTypes || api('/api/v1/record-types', null, { signal })]);
  } catch (e) {
    if (e.name !== 'AbortError') fill(box, h('h3', null, `KDB mapping of ${name}`), errorBox(e), h('button', { type: 'button', onclick: close }, 'Close'));
    return;
  }
  const listId = 'mapping-types';
  const names = recordTypes.types.map((t) => t.name).concat(Object.keys(recordTypes.aliases || {}));
  const datalist = h('datalist', { id: listId }, names.map((n) => h('option', { value: n })));
  const body = h('tbody');
  const addRow = (id, type) => {
    const idIn = h('input', { type: 'number', class: 'map-id', min: 0, step: 1, value: id === '' ? '' : String(id), 'aria-label': 'record id', size: 6 });
    const typeIn = h('input', { class: 'map-type', list: listId, value: type || '', placeholder: 'record type', 'aria-label': 'record type', size: 60, autocomplete: 'off' });
    const tr = h('tr', null, h('td', null, idIn), h('td', null, typeIn),
      h('td', null, h('button', { type: 'button', class: 'remove', title: 'remove this row', onclick: () => tr.remove() }, '×')));
    body.append(tr);
    return typeIn;
  };
  for (const e of m.entries) addRow(e.id, e.type);
  const restart = h('input', { type: 'checkbox', name: 'restart', checked: true });
  const msg = h('div', { class: 'form-msg' });
  const save = h('button', { type: 'submit', class: 'primary' }, 'Save');
  const read = () => {
    const entries = [], seen = new Set();
    for (const tr of body.children) {
      const idIn = tr.querySelector('.map-id'), typeIn = tr.querySelector('.map-type');
      const id = Number(idIn.value), type = typeIn.value.trim();
      idIn.classList.toggle('invalid', idIn.value === '' || !Number.isInteger(id) || seen.has(id));
      typeIn.classList.toggle('invalid', !type);
      if (idIn.value === '' || !Number.isInteger(id)) throw new Error('Each row needs a whole number as its id.');
      if (seen.has(id)) throw new Error(`The id ${id} is there twice.`);
      if (!type) throw new Error(`The id ${id} needs a record type.`);
      seen.add(id);
      entries.push({ id, type });
    }
    if (!entries.length) throw new Error('A mapping needs at least one row.');
    return entries;
  };
  const form = h('form', { class: 'mapping-form', onsubmit: async (e) => {
    e.preventDefault();
    fill(msg);
    let entries;
    try { entries = read(); } catch (err) { fill(msg, errorBox(err)); return; }
    save.disabled = true;
    try {
      const r = await api(`/api/v1/receivers/${encodeURIComponent(name)}/mapping`, { restart: restart.checked ? 'true' : '' }, { method: 'PUT', body: { entries }, signal });
      fill(where, where0(r));
      fill(msg, h('div', { class: 'notice ok' }, `Saved ${r.entries.length} ids to ${r.path}. ` +
        (r.restarted ? `${name} was restarted with it.` : `It applies when ${name} starts again.`)));
      changed();
    } catch (err) {
      if (err.name !== 'AbortError') fill(msg, errorBox(err));
    } finally {
      save.disabled = false;
    }
  } },
  h('table', { class: 'grid mapping-table' }, h('thead', null, h('tr', null, h('th', null, 'id'), h('th', null, 'record type'), h('th'))), body),
  h('div', { class: 'row' },
    h('button', { type: 'button', class: 'add-row', onclick: () => {
      let max = 0;
      for (const x of body.querySelectorAll('.map-id')) max = Math.max(max, Number(x.value) || 0);
      addRow(max + 1, '').focus();
    } }, 'Add a row'),
    h('label', { class: 'check' }, restart, 'restart the receiver now if it runs'),
    save, h('button', { type: 'button', onclick: close }, 'Close')),
  msg, datalist);
  const where0 = (x) => (x.default ? 'the default mapping (common Kieker types); saving writes a file of its own' : `file ${x.path}`);
  const where = h('span', { class: 'muted' }, where0(m));
  fill(box, h('h3', null, `KDB mapping of ${name} `, where), form);
  box.dataset.receiver = name;
}

// The configuration -----------------------------------------------------

// configPanel downloads the effective YAML: fetched with the token in a
// header, then saved from a Blob (a link with the token would leak it
// into history and logs).
function configPanel(signal) {
  const msg = h('div');
  const pre = h('pre', { class: 'config-yaml', hidden: true });
  const get = async (download) => {
    fill(msg);
    try {
      const text = await api('/api/v1/config', null, { signal });
      pre.textContent = text;
      pre.hidden = false;
      if (download) {
        const url = URL.createObjectURL(new Blob([text], { type: 'application/yaml' }));
        const a = h('a', { href: url, download: 'tracebridge.yaml', hidden: true });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      }
    } catch (e) {
      if (e.name !== 'AbortError') fill(msg, errorBox(e));
    }
  };
  return h('section', { class: 'panel' }, h('h3', null, 'Configuration'),
    h('div', { class: 'row' },
      h('button', { type: 'button', class: 'primary download-config', onclick: () => get(true) }, 'Download the effective YAML'),
      h('button', { type: 'button', class: 'show-config', onclick: () => get(false) }, 'Show it'),
      h('span', { class: 'muted' }, 'the configuration the bridge runs, receivers added here included')),
    msg, pre);
}
