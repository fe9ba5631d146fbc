// hosts.js: the monitored hosts (zico's host view): a table grouped by
// group, refreshed every few seconds, with forms to add a host, change
// one (PATCH with only the fields changed), switch it on or off and
// delete it. Writes need a token; their errors are shown where they
// were asked for.

import { api, errorBox, fill, fmtBytes, fmtDur, fmtNum, fmtTime, h, link, setQuery, token } from './lib.js';

const REFRESH_MS = 5000;
const NO_GROUP = '(none)';

export function mount(el, ctx) {
  const v = new HostsView(el, ctx.query);
  return () => v.destroy();
}

class HostsView {
  constructor(el, q) {
    this.el = el;
    this.group = q.get('group') || '';
    this.filter = q.get('filter') || '';
    this.list = null;
    this.build();
    this.refresh();
    this.timer = setInterval(() => this.refresh(), REFRESH_MS);
  }

  destroy() {
    clearInterval(this.timer);
    const dlg = document.getElementById('token-dialog');
    if (dlg) dlg.removeEventListener('close', this.onToken);
    if (this.ctl) this.ctl.abort();
    this.editDialog.remove();
    this.deleteDialog.remove();
  }

  build() {
    this.groupPicker = h('select', { id: 'hosts-group', onchange: () => { this.group = this.groupPicker.value; this.remember(); this.render(); } });
    this.filterInput = h('input', { id: 'hosts-filter', type: 'search', placeholder: 'name, address, comment', value: this.filter, size: 22,
      oninput: () => { this.filter = this.filterInput.value.trim(); this.remember(); this.render(); } });
    this.addForm = new HostForm({ id: 'host-add', onDone: (name) => { this.say(`Host ${name} added.`); this.refresh(); } });
    const addButton = h('button', { type: 'button', id: 'hosts-add-toggle', class: 'primary', onclick: () => {
      this.addForm.el.hidden = !this.addForm.el.hidden;
      if (!this.addForm.el.hidden) this.addForm.focus();
    } }, 'Add host');
    this.status = h('span', { class: 'muted', id: 'hosts-status' });
    // The hint goes once the header's Token dialog has given a token.
    this.hint = h('span', { class: 'muted', id: 'hosts-token-hint', hidden: !!token() }, 'Changing hosts needs a token (the Token button).');
    this.onToken = () => { this.hint.hidden = !!token(); };
    const dlg = document.getElementById('token-dialog');
    if (dlg) dlg.addEventListener('close', this.onToken);
    this.message = h('div', { id: 'hosts-message' });
    this.body = h('tbody');
    this.table = h('table', { class: 'grid hosts', id: 'hosts-table' }, h('thead', null, h('tr', null,
      ['Host', 'Group', 'Address', 'Last contact', 'Stored', 'Traces/s', 'Enabled', 'Max size', 'Max age', 'Secret', 'Comment', '']
        .map((x, i) => h('th', { class: [4, 5].includes(i) ? 'num' : '' }, x)))), this.body);
    this.body.addEventListener('change', (e) => {
      if (e.target.matches('input.h-enabled')) this.setEnabled(e.target.closest('tr').dataset.host, e.target);
    });
    this.body.addEventListener('click', (e) => {
      const b = e.target.closest('button[data-act]');
      if (!b) return;
      const name = b.closest('tr').dataset.host;
      if (b.dataset.act === 'edit') this.edit(name);
      if (b.dataset.act === 'delete') this.confirmDelete(name);
    });
    this.editDialog = h('dialog', { class: 'host-dialog', id: 'host-edit' });
    this.deleteDialog = h('dialog', { class: 'host-dialog', id: 'host-delete' });
    fill(this.el,
      h('div', { class: 'hosts-bar' }, h('h2', null, 'Hosts'),
        h('label', null, 'group', this.groupPicker), h('label', null, 'filter', this.filterInput),
        h('span', { class: 'spacer' }), this.hint, addButton),
      this.addForm.el, this.message, h('div', { class: 'row' }, this.status), this.table);
    document.body.append(this.editDialog, this.deleteDialog);
  }

  // remember keeps the group and the filter in the address.
  remember() { setQuery({ group: this.group, filter: this.filter }); }

  // say shows the outcome of a change: a message or an error.
  say(msg, err) {
    fill(this.message, err ? errorBox(err) : h('div', { class: 'notice', role: 'status' }, msg));
  }

  // refresh reads the list again; a refresh under way is dropped for
  // the newer one.
  async refresh() {
    if (this.ctl) this.ctl.abort();
    const ctl = this.ctl = new AbortController();
    try {
      this.list = await api('/api/v1/hosts', null, { signal: ctl.signal });
      this.status.textContent = `${this.list.hosts.length} host${this.list.hosts.length === 1 ? '' : 's'} · updated ${fmtTime(Date.now()).slice(11, 19)} · every ${REFRESH_MS / 1000} s`;
      this.status.classList.remove('err');
      this.render();
    } catch (e) {
      if (e.name === 'AbortError') return;
      // The last list stays; the line says it is stale.
      this.status.textContent = `Refreshing failed: ${e.message}`;
      this.status.classList.add('err');
      if (!this.list) fill(this.body, h('tr', null, h('td', { colspan: 12 }, errorBox(e))));
    }
  }

  render() {
    if (!this.list) return;
    const groups = this.list.groups.slice().sort();
    const hasUngrouped = this.list.hosts.some((x) => !x.group);
    fill(this.groupPicker, h('option', { value: '' }, 'all groups'),
      groups.map((g) => h('option', { value: g }, g)), hasUngrouped ? h('option', { value: NO_GROUP }, '(no group)') : null);
    this.groupPicker.value = this.group;
    this.addForm.groups(groups);
    const f = this.filter.toLowerCase();
    const shown = this.list.hosts.filter((x) =>
      (!this.group || (this.group === NO_GROUP ? !x.group : x.group === this.group)) &&
      (!f || [x.name, x.addr, x.comment].some((s) => s.toLowerCase().includes(f))));
    // By group, the hosts without one last.
    const by = new Map();
    for (const x of shown) {
      const g = x.group || '';
      if (!by.has(g)) by.set(g, []);
      by.get(g).push(x);
    }
    const keys = [...by.keys()].sort((a, b) => Number(a === '') - Number(b === '') || a.localeCompare(b));
    const rows = [];
    for (const g of keys) {
      const hs = by.get(g).sort((a, b) => a.name.localeCompare(b.name));
      const size = hs.reduce((a, x) => a + x.size, 0);
      const sum = hs.reduce((a, x) => a + x.tracesPerSecond, 0);
      rows.push(h('tr', { class: 'group-row', dataset: { group: g } }, h('th', { colspan: 12 }, g || '(no group)',
        h('span', { class: 'muted' }, `${hs.length} host${hs.length === 1 ? '' : 's'} · ${fmtBytes(size)} · ${rate(sum)} traces/s`))));
      for (const x of hs) rows.push(this.row(x));
    }
    if (!rows.length) rows.push(h('tr', null, h('td', { colspan: 12, class: 'muted' }, this.list.hosts.length ? 'No host matches the filter.' : 'No hosts yet: add one, or let an agent connect.')));
    fill(this.body, rows);
  }

  row(x) {
    const lc = x.lastContact ? new Date(x.lastContact) : null;
    return h('tr', { class: x.enabled ? '' : 'disabled', dataset: { host: x.name } },
      h('td', { class: 'h-name' }, link('/search?host=' + encodeURIComponent(x.name), x.name)),
      h('td', { class: 'h-group' }, x.group),
      h('td', { class: 'h-addr mono' }, x.addr),
      h('td', { class: 'h-contact', title: lc ? fmtTime(lc.getTime()) : '' }, lc ? ago(lc) : h('span', { class: 'muted', title: 'no contact yet: neither a connection that names the host (a zorka HELLO, an OTLP token) nor a stored trace of it' }, '—')),
      h('td', { class: 'h-size num' }, fmtBytes(x.size)),
      h('td', { class: 'h-rate num' }, rate(x.tracesPerSecond)),
      h('td', { class: 'h-enabled-cell' }, h('label', { class: 'switch' },
        h('input', { type: 'checkbox', class: 'h-enabled', checked: x.enabled, 'aria-label': 'enabled' }), x.enabled ? 'on' : 'off')),
      h('td', { class: 'h-maxsize' }, x.maxSize ? fmtBytes(x.maxSize) : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'h-maxage' }, x.maxAgeNs ? ageText(x.maxAgeNs) : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'h-secret' }, x.secret ? 'set' : h('span', { class: 'muted' }, 'none')),
      h('td', { class: 'h-comment', title: x.comment }, x.comment),
      h('td', { class: 'h-actions' },
        h('button', { type: 'button', dataset: { act: 'edit' } }, 'Edit'),
        h('button', { type: 'button', dataset: { act: 'delete' } }, 'Delete')));
  }

  host(name) { return this.list && this.list.hosts.find((x) => x.name === name); }

  async setEnabled(name, box) {
    const on = box.checked;
    box.disabled = true;
    try {
      await api('/api/v1/hosts/' + encodeURIComponent(name), null, { method: 'PATCH', body: { enabled: on } });
      this.say(`Host ${name} ${on ? 'enabled' : 'disabled'}.`);
      await this.refresh();
    } catch (e) {
      box.checked = !on;
      this.say('', e);
    } finally {
      box.disabled = false;
    }
  }

  edit(name) {
    const x = this.host(name);
    if (!x) return;
    const form = new HostForm({ id: 'host-edit-form', host: x, groups: this.list.groups, onDone: () => {
      this.editDialog.close();
      this.say(`Host ${name} changed.`);
      this.refresh();
    }, onCancel: () => this.editDialog.close() });
    fill(this.editDialog, form.el);
    this.editDialog.showModal();
    form.focus();
  }

  confirmDelete(name) {
    const err = h('div', { class: 'form-error' });
    const yes = h('button', { type: 'button', class: 'danger', id: 'host-delete-yes', onclick: async () => {
      yes.disabled = true;
      try {
        await api('/api/v1/hosts/' + encodeURIComponent(name), null, { method: 'DELETE' });
        this.deleteDialog.close();
        this.say(`Host ${name} deleted.`);
        this.refresh();
      } catch (e) {
        fill(err, errorBox(e));
        yes.disabled = false;
      }
    } }, 'Delete');
    fill(this.deleteDialog, h('form', { method: 'dialog' },
      h('h3', null, `Delete host ${name}?`),
      h('p', null, 'Every trace stored for this host is deleted with it. This cannot be undone.'),
      err,
      h('div', { class: 'row' }, yes, h('button', { type: 'button', id: 'host-delete-no', onclick: () => this.deleteDialog.close() }, 'Cancel'))));
    this.deleteDialog.showModal();
  }
}

// HostForm adds a host (no opts.host) or changes opts.host, sending
// only the fields that differ from it.
class HostForm {
  constructor(opts) {
    this.opts = opts;
    const x = opts.host;
    this.initial = x ? { addr: x.addr, group: x.group, comment: x.comment, maxSize: sizeText(x.maxSize), maxAge: x.maxAgeNs ? ageText(x.maxAgeNs) : '', enabled: x.enabled } : null;
    const init = this.initial || { addr: '', group: '', comment: '', maxSize: '', maxAge: '', enabled: true };
    const input = (name, attrs = {}) => h('input', Object.assign({ name, class: 'hf-' + name, value: init[name] ?? '', autocomplete: 'off' }, attrs));
    this.f = {
      name: input('name', { placeholder: 'host name', size: 18 }),
      addr: input('addr', { placeholder: 'IP address (optional)', size: 16 }),
      secret: h('input', { name: 'secret', class: 'hf-secret', type: 'password', autocomplete: 'new-password', size: 14, placeholder: x ? (x.secret ? 'unchanged' : 'none') : 'optional' }),
      group: input('group', { list: opts.id + '-groups', size: 14 }),
      comment: input('comment', { size: 30 }),
      maxSize: input('maxSize', { placeholder: 'unbounded, or 2GiB', size: 12 }),
      maxAge: input('maxAge', { placeholder: 'unbounded, or 7d', size: 10 }),
      enabled: h('input', { type: 'checkbox', name: 'enabled', class: 'hf-enabled', checked: init.enabled }),
    };
    this.removeSecret = x && x.secret ? h('input', { type: 'checkbox', class: 'hf-remove-secret' }) : null;
    this.groupList = h('datalist', { id: opts.id + '-groups' });
    if (opts.groups) this.groups(opts.groups);
    this.error = h('div', { class: 'form-error', role: 'alert' });
    this.submit = h('button', { type: 'submit', class: 'primary' }, x ? 'Save' : 'Add');
    this.el = x ? this.dialogLayout(x) : this.panelLayout();
    this.el.id = opts.id;
    this.el.addEventListener('submit', (e) => { e.preventDefault(); this.send(); });
  }

  panelLayout() {
    const f = this.f;
    return h('form', { class: 'panel host-form', hidden: true },
      h('h3', null, 'Add a host'),
      h('div', { class: 'row' },
        h('label', null, 'name', f.name), h('label', null, 'address', f.addr), h('label', null, 'secret', f.secret),
        h('label', null, 'group', f.group), h('label', null, 'comment', f.comment),
        h('label', null, 'max size', f.maxSize), h('label', null, 'max age', f.maxAge),
        h('label', { class: 'check' }, f.enabled, 'enabled'), this.submit),
      this.error, this.groupList);
  }

  dialogLayout(x) {
    const f = this.f;
    return h('form', { class: 'host-edit' },
      h('h3', null, `Change host ${x.name}`),
      h('div', { class: 'grid2' },
        h('span', null, 'address'), f.addr,
        h('span', null, 'secret'), h('span', null, f.secret, this.removeSecret ? h('label', { class: 'check' }, this.removeSecret, 'remove the secret') : null),
        h('span', null, 'group'), f.group,
        h('span', null, 'comment'), f.comment,
        h('span', null, 'max size'), f.maxSize,
        h('span', null, 'max age'), f.maxAge,
        h('span', null, 'enabled'), h('span', null, f.enabled)),
      this.error, this.groupList,
      h('div', { class: 'row' }, this.submit, h('button', { type: 'button', class: 'cancel', onclick: () => this.opts.onCancel() }, 'Cancel')));
  }

  groups(gs) { fill(this.groupList, gs.map((g) => h('option', { value: g }))); }

  focus() { (this.opts.host ? this.f.addr : this.f.name).focus(); }

  // body answers the JSON to send: every field given for a new host,
  // the changed ones for an existing host.
  body() {
    const f = this.f, init = this.initial;
    const b = {};
    if (!init) {
      b.name = f.name.value.trim();
      if (!b.name) throw new Error('name: required');
    }
    for (const k of ['addr', 'group', 'comment']) {
      const v = f[k].value.trim();
      if (init ? v !== init[k] : v) b[k] = v;
    }
    for (const k of ['maxSize', 'maxAge']) {
      const v = f[k].value.trim();
      if (init ? v !== init[k] : v) b[k] = v === '' ? 0 : /^\d+$/.test(v) ? Number(v) : v;
    }
    if (this.removeSecret && this.removeSecret.checked) b.secret = '';
    else if (f.secret.value) b.secret = f.secret.value;
    if (!init ? !f.enabled.checked : f.enabled.checked !== init.enabled) b.enabled = f.enabled.checked;
    return b;
  }

  async send() {
    let body;
    try {
      body = this.body();
    } catch (e) {
      fill(this.error, errorBox(e));
      return;
    }
    const x = this.opts.host;
    if (x && !Object.keys(body).length) { this.opts.onCancel(); return; }
    this.submit.disabled = true;
    try {
      if (x) await api('/api/v1/hosts/' + encodeURIComponent(x.name), null, { method: 'PATCH', body });
      else await api('/api/v1/hosts', null, { method: 'POST', body });
      this.error.replaceChildren();
      if (!x) {
        this.el.reset();
        this.f.enabled.checked = true;
        this.el.hidden = true;
      }
      this.opts.onDone(x ? x.name : body.name);
    } catch (e) {
      fill(this.error, errorBox(e));
    } finally {
      this.submit.disabled = false;
    }
  }
}

// rate formats traces per second: two decimals while small.
export function rate(r) {
  return r >= 100 ? fmtNum(Math.round(r)) : r.toFixed(2);
}

// ago formats how long ago a time was.
export function ago(d) {
  const s = Math.max(0, Math.round((Date.now() - d.getTime()) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86400)} d ago`;
}

// sizeText writes bytes as the API reads them back: 2GiB, 500MiB, or
// bytes ("" for unbounded).
export function sizeText(n) {
  if (!n) return '';
  /** @type {[string, number][]} */
  const units = [['TiB', 2 ** 40], ['GiB', 2 ** 30], ['MiB', 2 ** 20], ['KiB', 2 ** 10]];
  for (const [u, m] of units) if (n % m === 0) return n / m + u;
  return String(n);
}

// ageText writes ns as 7d, 12h, 30m, 45s, or in Go's form.
export function ageText(ns) {
  const s = ns / 1e9;
  /** @type {[string, number][]} */
  const units = [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]];
  for (const [u, m] of units) if (Number.isInteger(s / m)) return s / m + u;
  return fmtDur(ns);
}
