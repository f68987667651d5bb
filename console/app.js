// app.js: the txhub console's only script (served from the binary, no
// framework, no build step). It refreshes the Overview without a reload
// and helps select rows on Stuck. Everything a producer wrote reaches the
// page through textContent or a property, never innerHTML: keys, errors
// and owners are text here as on the server's pages.
'use strict';

(function () {
  const REFRESH_MS = 5000;

  // "4m 12s", as the server's duration_format() writes ages.
  function age(s) {
    if (typeof s !== 'number' || !(s >= 0)) return null;
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600);
    const m = Math.floor(s % 3600 / 60), sec = Math.floor(s % 60);
    if (d > 0) return d + 'd ' + h + 'h';
    if (h > 0) return h + 'h ' + m + 'm';
    if (m > 0) return m + 'm ' + sec + 's';
    return sec + 's';
  }

  function get(doc, path) {
    return path.split('.').reduce((o, k) => (o == null ? undefined : o[k]), doc);
  }

  function show(v) {
    if (v === null || v === undefined) return '-';
    if (typeof v === 'boolean') return v ? 'yes' : 'no';
    return String(v);
  }

  // A cell as the server's pages write them (console_view.c, view_cell):
  // cut to its column by the style sheet, one line ('line') or three
  // ('prose'), and whole in its title.
  function cell(tr, content, fit, cls) {
    const td = document.createElement('td');
    td.className = (fit || 'line') + (cls ? ' ' + cls : '');
    td.title = content instanceof Node ? content.textContent : show(content);
    if (content instanceof Node) {
      td.appendChild(content);
    } else if (fit === 'prose') {
      const clamp = document.createElement('div');
      clamp.className = 'clamp';
      clamp.textContent = show(content);
      td.appendChild(clamp);
    } else {
      td.textContent = show(content);
    }
    tr.appendChild(td);
    return td;
  }

  function messageLink(biz, key) {
    const a = document.createElement('a');
    a.className = 'key';
    a.href = '/message?' + new URLSearchParams({ biz: biz, key: key }).toString();
    a.textContent = key;
    return a;
  }

  function fillBody(table, rows, fill) {
    const body = table.tBodies[0];
    const fresh = document.createElement('tbody');
    for (const row of rows || []) {
      const tr = document.createElement('tr');
      fill(tr, row);
      fresh.appendChild(tr);
    }
    table.replaceChild(fresh, body);
  }

  function renderPartitions(doc) {
    const table = document.getElementById('partitions');
    if (!table) return;
    fillBody(table, doc.partitions, (tr, p) => {
      for (const k of ['topic', 'partition', 'owner', 'group', 'epoch', 'next_offset', 'lag']) {
        cell(tr, p[k]);
      }
      const hb = age(p.heartbeat_age_s);
      cell(tr, hb === null ? '-' : hb + ' ago');
    });
    const note = document.getElementById('lag-note');
    if (note) note.textContent = doc.lag_note ? 'Lag unknown: ' + doc.lag_note : '';
  }

  function renderParked(doc) {
    const table = document.getElementById('parked');
    if (!table) return;
    fillBody(table, doc.parked_rows, (tr, r) => {
      cell(tr, r.biz_id);
      cell(tr, messageLink(r.biz_id, r.message_key));
      cell(tr, r.status, 'line', 'status');
      cell(tr, r.send_status);
      cell(tr, show(r.check_attempts) + ' / ' + show(r.send_attempts));
      const a = age(r.updated_age_s);
      cell(tr, a === null ? '-' : a + ' ago');
      cell(tr, r.last_error, 'prose', 'error-text');
    });
  }

  function render(doc) {
    for (const el of document.querySelectorAll('[data-field]')) {
      el.textContent = show(get(doc, el.dataset.field));
    }
    for (const el of document.querySelectorAll('[data-age]')) {
      const a = age(get(doc, el.dataset.age));
      el.textContent = a === null ? 'none' : a;
    }
    renderPartitions(doc);
    renderParked(doc);
    const at = document.getElementById('read-at');
    if (at) at.textContent = show(doc.read_at);
  }

  async function refresh() {
    const problem = document.getElementById('refresh-error');
    try {
      const r = await fetch('/api/overview', {
        credentials: 'same-origin', headers: { Accept: 'application/json' },
      });
      if (r.status === 401) {
        window.location.assign('/login?next=%2Foverview');
        return;
      }
      if (!r.ok) throw new Error('HTTP ' + r.status + ': ' + (await r.text()).trim());
      render(await r.json());
      if (problem) problem.textContent = '';
    } catch (e) {
      if (problem) problem.textContent = 'Refresh failed: ' + e.message;
    }
    window.setTimeout(refresh, REFRESH_MS);
  }

  // Stuck: "select all", and the action buttons only with a selection.
  function setupSelection() {
    const form = document.getElementById('act');
    const boxes = form ? Array.from(form.querySelectorAll('input.sel')) : [];
    if (boxes.length === 0) return;
    const all = document.getElementById('select-all');
    const count = document.getElementById('selected');
    const buttons = Array.from(form.querySelectorAll('button[name=action]'));
    const update = () => {
      const n = boxes.filter((b) => b.checked).length;
      for (const b of buttons) b.disabled = n === 0;
      if (count) count.textContent = n + ' selected';
      if (all) all.checked = n === boxes.length;
    };
    for (const b of boxes) b.addEventListener('change', update);
    if (all) {
      all.addEventListener('change', () => {
        for (const b of boxes) b.checked = all.checked;
        update();
      });
    }
    update();
  }

  if (document.body.dataset.page === 'overview') {
    window.setTimeout(refresh, REFRESH_MS);
  }
  setupSelection();
}());
