// The webhook dashboard: a client of the admin API, reached in-process
// through <mount>/api/. Plain JavaScript, no build step, no dependency.
//
// Rules this file keeps:
//   - Every value from the server enters the document as text: el() turns
//     strings into text nodes and nothing here assigns innerHTML.
//   - State-changing requests carry the token from the page's meta tag, in
//     a cookie scoped to the mount (Caddy's access log redacts Cookie; it
//     would log a header of our own). A read-only page has no token.
//   - Views refresh by polling every POLL_MS; a view re-renders only when
//     the data changed, so selections and open toggles survive.
'use strict';

(() => {
  const POLL_MS = 2000;
  const RATE_WINDOW_MS = 5 * 60 * 1000; // throughput: the last 5 minutes
  const SAMPLE_KEEP_MS = 15 * 60 * 1000;
  const STATUSES = ['pending', 'blocked', 'running', 'done', 'dead'];

  const meta = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content || '';
  const token = meta('webhook-dashboard-token');
  const readOnly = meta('webhook-dashboard-mode') !== 'read-write';
  if (token) {
    // The page is <mount>/ and its API <mount>/api/: the cookie goes there
    // only, never to the other sites of the host.
    const mount = location.pathname.replace(/[^/]*$/, '');
    document.cookie = 'webhook_dashboard_token=' + token + '; Path=' + mount + '; SameSite=Strict' +
      (location.protocol === 'https:' ? '; Secure' : '');
  }
  if (readOnly) document.body.classList.add('read-only');

  const main = document.getElementById('main');
  const flashBox = document.getElementById('flash');
  const liveBox = document.getElementById('live');

  // ---- DOM helpers -------------------------------------------------------

  // el builds an element. attrs: on* functions become listeners; class,
  // value, checked, disabled, hidden are properties; the rest attributes.
  // Children: nodes, or anything else as text; null and false are skipped.
  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') n.addEventListener(k.slice(2), v);
      else if (k === 'class') n.className = v;
      else if (['value', 'checked', 'disabled', 'hidden', 'selected'].includes(k)) n[k] = v;
      else n.setAttribute(k, v === true ? '' : String(v));
    }
    append(n, kids);
    return n;
  }
  function append(n, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      n.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
  }
  function replace(n, ...kids) {
    n.replaceChildren();
    append(n, kids);
  }

  const badge = (status) =>
    el('span', { class: 'badge s-' + (STATUSES.includes(status) ? status : 'other') }, status || '—');

  function fmtTime(s) {
    if (!s) return '';
    const d = new Date(s);
    if (isNaN(d) || d.getUTCFullYear() < 2) return '';
    const p = (x) => String(x).padStart(2, '0');
    return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  }
  function fmtAgo(s) {
    const d = new Date(s);
    if (!s || isNaN(d) || d.getUTCFullYear() < 2) return '';
    return fmtDur(Date.now() - d.getTime()) + ' ago';
  }
  function fmtDur(ms) {
    if (ms < 0) return 'in ' + fmtDur(-ms);
    if (ms < 1000) return fmtLatency(ms * 1e6);
    const s = ms / 1000;
    if (s < 60) return (s < 10 ? s.toFixed(1) : Math.round(s)) + ' s';
    if (s < 3600) return Math.floor(s / 60) + 'm' + String(Math.round(s % 60)).padStart(2, '0') + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h' + String(Math.floor((s % 3600) / 60)).padStart(2, '0') + 'm';
    return Math.floor(s / 86400) + 'd' + Math.floor((s % 86400) / 3600) + 'h';
  }
  // fmtLatency prints an attempt's duration, given in nanoseconds, without
  // rounding a short one away (0.4 ms, not 0ms), as the CLI's show does.
  function fmtLatency(ns) {
    const ms = ns / 1e6;
    if (!(ns > 0)) return '0 ms';
    if (ns < 1e3) return '< 0.001 ms';
    if (ns < 1e4) return ms.toFixed(3) + ' ms';
    if (ns < 1e5) return ms.toFixed(2) + ' ms';
    if (ns < 1e7) return ms.toFixed(1) + ' ms';
    if (ns < 1e9) return ms.toFixed(0) + ' ms';
    if (ns < 1e10) return (ms / 1000).toFixed(1) + ' s';
    if (ns < 6e10) return (ms / 1000).toFixed(0) + ' s';
    return fmtDur(ms);
  }
  const fullTime = (s) => el('time', { datetime: s || '', title: fmtAgo(s) }, fmtTime(s));
  // timeCell shows a time compactly (the clock alone for today) with the
  // full time and the age in its tooltip.
  function timeCell(s) {
    const full = fmtTime(s);
    const today = fmtTime(new Date().toISOString()).slice(0, 10);
    const attrs = { datetime: s || '', title: full && `${full} (${fmtAgo(s)})` };
    if (!full || full.startsWith(today)) return el('time', attrs, full.slice(11));
    // Another day's time is its date and its clock, each kept whole; the
    // line may break between them, so a table of yesterday's jobs still
    // fits a laptop's window.
    return el('time', { ...attrs, class: 'dated' }, el('span', {}, full.slice(0, 10)), ' ', el('span', {}, full.slice(11, 16)));
  }

  function flash(kind, ...text) {
    flashBox.className = 'flash ' + kind;
    replace(flashBox, ...text, el('button', { class: 'close', type: 'button', title: 'Dismiss', onclick: () => { flashBox.hidden = true; } }, '×'));
    flashBox.hidden = false;
  }

  // ---- the API -----------------------------------------------------------

  class APIError extends Error {
    constructor(status, message, path) {
      super(message);
      this.status = status;
      this.path = path;
    }
    // missing: this Caddy's admin API has no such endpoint (an older plugin).
    get missing() { return this.status === 404 && /^no webhook admin endpoint/.test(this.message); }
    // unknownParam: the endpoint exists but not this filter.
    get unknownParam() { return this.status === 400 && /is unknown here/.test(this.message); }
  }

  async function api(method, path, body) {
    const opts = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      opts.headers['Content-Type'] = 'application/json';
      opts.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(apiURL(path), opts);
    } catch (e) {
      throw new APIError(0, fetchFailure(e, method, path), path);
    }
    let data = null;
    try { data = await resp.json(); } catch (_) { /* not JSON */ }
    if (!resp.ok) throw new APIError(resp.status, (data && data.error) || resp.statusText || 'error', path);
    return data;
  }

  // apiURL is the address of an API path, without the user name and
  // password of a page opened as http://user:pass@host/…: the browser
  // refuses to fetch a URL with credentials in it, and it sends the
  // credentials it logged in with to the same origin anyway.
  function apiURL(path) {
    const u = new URL('api/' + path, location.href);
    u.username = '';
    u.password = '';
    return u.href;
  }

  // fetchFailure says why a request got no answer: fetch rejects with a
  // TypeError both when nothing answered and when the browser refused to
  // send the request, and only its message tells them apart.
  function fetchFailure(e, method, path) {
    const what = method + ' ' + path.split('?')[0];
    if (!navigator.onLine) return `${what}: the browser is offline`;
    if (/^(Failed to fetch|NetworkError|Load failed)/.test(e.message || '')) {
      return `${what}: no answer from the server (${e.message})`;
    }
    return `${what}: the browser refused the request (${e.message || e})`;
  }

  // explain turns an API error into a message for a human.
  function explain(err, what) {
    if (err.missing) {
      return `${what}: this Caddy's admin API has no /webhook/${err.path.split('?')[0]} endpoint. ` +
        'It needs a newer caddywebhook plugin.';
    }
    if (err.unknownParam) return `${what}: ${err.message}. This filter needs a newer caddywebhook plugin.`;
    if (err.status === 403) return `${what}: refused: ${err.message}`;
    return `${what}: ${err.message}`;
  }

  // act runs a state-changing request and reports it.
  async function act(label, method, path, body, done) {
    try {
      const res = await api(method, path, body);
      flash('ok', label + ': done.');
      if (done) done(res);
    } catch (err) {
      flash('error', explain(err, label));
    }
    tick(true);
  }

  // ---- live refresh ------------------------------------------------------

  let view = null; // { refresh: async () => void } of the current page
  let busy = false;
  let lastOK = 0;

  async function tick(force) {
    if (!view || !view.refresh || (busy && !force) || (document.hidden && !force)) return;
    busy = true;
    const v = view;
    try {
      await v.refresh();
      lastOK = Date.now();
      liveBox.className = 'live ok';
      liveBox.textContent = 'live · ' + fmtTime(new Date().toISOString()).slice(11);
      liveBox.title = 'The page polls the server every 2 seconds';
    } catch (err) {
      if (v === view) {
        // The nav bar shows the start of the message, the tooltip all of it.
        liveBox.className = 'live down';
        liveBox.textContent = 'offline · ' + (err.message || 'error');
        liveBox.title = liveBox.textContent;
      }
    } finally {
      busy = false;
    }
  }
  setInterval(tick, POLL_MS);
  document.addEventListener('visibilitychange', () => tick());

  // changed reports whether data differs from what a box last rendered.
  function changed(box, data) {
    const key = JSON.stringify(data);
    if (box.dataset.key === key) return false;
    box.dataset.key = key;
    return true;
  }

  // ---- throughput, from successive stats polls ---------------------------
  //
  // The page keeps the done count of every source/target from each poll of
  // /stats (in sessionStorage, so a reload keeps the history) and derives
  // deliveries per minute over the last 5 minutes. No server state, no
  // extra query: the stats are read every 2 s anyway.

  const SAMPLES_KEY = 'caddywebhook.samples';
  let samples = [];
  try { samples = JSON.parse(sessionStorage.getItem(SAMPLES_KEY) || '[]'); } catch (_) { samples = []; }

  function addSample(done) {
    const now = Date.now();
    samples.push({ t: now, done });
    samples = samples.filter((s) => s.t >= now - SAMPLE_KEEP_MS);
    try { sessionStorage.setItem(SAMPLES_KEY, JSON.stringify(samples)); } catch (_) { /* full: keep in memory */ }
  }

  // rate returns deliveries per minute of key over the last RATE_WINDOW_MS,
  // or null before the page has two samples; with less than a minute of
  // history it counts that history as one minute, so that one delivery
  // seen 2 s apart reads 1/min and not 30. buckets holds the deliveries
  // in each of BUCKETS equal slices of the window, for the sparkline.
  const BUCKETS = 30;
  function rate(key) {
    const now = Date.now();
    const win = samples.filter((s) => s.t >= now - RATE_WINDOW_MS && key in s.done);
    const buckets = new Array(BUCKETS).fill(0);
    if (win.length < 2) return { perMin: null, buckets };
    for (let i = 1; i < win.length; i++) {
      const d = Math.max(0, win[i].done[key] - win[i - 1].done[key]); // a purge lowers the count
      const b = Math.min(BUCKETS - 1, Math.floor((win[i].t - (now - RATE_WINDOW_MS)) / (RATE_WINDOW_MS / BUCKETS)));
      buckets[Math.max(0, b)] += d;
    }
    const first = win[0];
    const last = win[win.length - 1];
    const delta = Math.max(0, last.done[key] - first.done[key]);
    return { perMin: delta / Math.max(1, (last.t - first.t) / 60000), buckets };
  }

  // sparkline draws the buckets as bars, oldest on the left.
  function sparkline(buckets) {
    const NS = 'http://www.w3.org/2000/svg';
    const w = 120, h = 22, bw = w / BUCKETS;
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', `0 0 ${w} ${h}`);
    svg.setAttribute('class', 'spark');
    svg.setAttribute('aria-hidden', 'true');
    const base = document.createElementNS(NS, 'line');
    for (const [k, v] of Object.entries({ x1: 0, x2: w, y1: h - 0.5, y2: h - 0.5 })) base.setAttribute(k, v);
    svg.appendChild(base);
    const max = Math.max(1, ...buckets);
    buckets.forEach((v, i) => {
      if (!v) return;
      const bh = Math.max(2, (v / max) * (h - 2));
      const r = document.createElementNS(NS, 'rect');
      for (const [k, val] of Object.entries({ x: (i * bw + 0.5).toFixed(1), y: (h - bh).toFixed(1), width: (bw - 1).toFixed(1), height: bh.toFixed(1) })) r.setAttribute(k, val);
      svg.appendChild(r);
    });
    return svg;
  }

  // ---- routing -----------------------------------------------------------

  function parseHash() {
    const h = location.hash.replace(/^#/, '') || '/';
    const [p, q] = h.split('?');
    return { path: p.replace(/\/+$/, '') || '/', params: new URLSearchParams(q || '') };
  }
  function go(path, params) {
    const q = params ? new URLSearchParams([...params].filter(([, v]) => v !== '')).toString() : '';
    location.hash = '#' + path + (q ? '?' + q : '');
  }

  function route() {
    const { path, params } = parseHash();
    let m;
    document.querySelectorAll('nav a').forEach((a) => a.classList.remove('active'));
    const nav = (name) => { const a = document.querySelector(`nav a[data-nav="${name}"]`); if (a) a.classList.add('active'); };
    if (path === '/') { nav('overview'); view = overviewView(); }
    else if (path === '/jobs') { nav('jobs'); view = listView('jobs', params); }
    else if (path === '/events') { nav('events'); view = listView('events', params); }
    else if ((m = path.match(/^\/jobs\/(\d+)$/))) { nav('jobs'); view = jobView(m[1]); }
    else if ((m = path.match(/^\/events\/(\d+)$/))) { nav('events'); view = eventView(m[1]); }
    else if (path === '/send' && !readOnly) { nav('send'); view = sendView(params); }
    else { view = { refresh: null }; replace(main, el('p', { class: 'error' }, 'No such page.')); return; }
    tick(true);
  }
  window.addEventListener('hashchange', () => { flashBox.hidden = true; route(); });

  // ---- the stats, shared by every view -----------------------------------

  let lastStats = null;
  function knownSources() { return [...new Set(((lastStats && lastStats.counts) || []).map((c) => c.source))].sort(); }
  function knownTargets(source) {
    return [...new Set(((lastStats && lastStats.counts) || []).filter((c) => !source || c.source === source).map((c) => c.target))].sort();
  }
  async function loadStats() {
    lastStats = await api('GET', 'stats');
    return lastStats;
  }
  function datalist(id, values) { return el('datalist', { id }, values.map((v) => el('option', { value: v }))); }

  // ---- overview ----------------------------------------------------------

  // lagText is a route's recent delivery lag from the stats, p50 / p99.
  function lagText(lags, source, target) {
    const l = (lags || []).find((x) => x.source === source && x.target === target);
    return l ? fmtDur(l.p50_ns / 1e6) + ' / ' + fmtDur(l.p99_ns / 1e6) : '—';
  }

  function overviewView() {
    const cards = el('div', { class: 'cards' });
    const table = el('div', { id: 'overview-table' });
    replace(main, el('h2', {}, 'Overview'), cards, table,
      el('p', { class: 'muted small' }, 'Delivered per minute is measured by this page from the stats it reads every 2 s, over the last 5 minutes.'));

    return {
      async refresh() {
        const st = await loadStats();
        const groups = new Map(); // "source\u0000target" -> row
        const totals = { pending: 0, blocked: 0, running: 0, done: 0, dead: 0 };
        for (const c of st.counts || []) {
          const key = c.source + '\u0000' + c.target;
          if (!groups.has(key)) groups.set(key, { source: c.source, target: c.target, pending: 0, blocked: 0, running: 0, done: 0, dead: 0, flow: {} });
          const g = groups.get(key);
          if (c.status in totals) { g[c.status] += c.jobs; totals[c.status] += c.jobs; }
          for (const f of ['paused', 'circuit']) if (f in c) g.flow[f] = c[f];
        }
        // Flow-control state, where the stats carry it (a later plugin).
        for (const f of st.targets || st.flow || []) {
          const g = groups.get(f.source + '\u0000' + f.target);
          if (g) for (const k of ['paused', 'circuit']) if (k in f) g.flow[k] = f[k];
        }
        const done = {};
        let allDone = 0;
        for (const [k, g] of groups) { done[k] = g.done; allDone += g.done; }
        done['\u0000all'] = allDone;
        addSample(done);

        const total = rate('\u0000all');
        replace(cards,
          card('Pending', totals.pending, 'pending'),
          card('Running', totals.running, 'running'),
          card('Done', totals.done, 'done'),
          card('Dead', totals.dead, 'dead'),
          card('Oldest due', st.oldest_pending_ns ? fmtDur(st.oldest_pending_ns / 1e6) : '—', 'oldest'),
          card('Delivered/min', total.perMin === null ? '—' : total.perMin.toFixed(1), 'rate', sparkline(total.buckets)),
          card('Events stored', st.events === undefined ? '—' : st.events, 'events'),
          keysCard(st),
          unroutableCard(st));

        const rows = [...groups.values()].sort((a, b) => a.source.localeCompare(b.source) || a.target.localeCompare(b.target));
        const hasFlow = rows.some((g) => Object.keys(g.flow).length > 0);
        if (rows.length === 0) {
          replace(table, el('p', { class: 'muted' }, 'No jobs yet. Events a receiver accepts appear here.'));
          return;
        }
        replace(table, el('table', { class: 'grid' },
          el('thead', {}, el('tr', {},
            el('th', {}, 'Source'), el('th', {}, 'Target'),
            STATUSES.map((s) => el('th', { class: 'num' }, s[0].toUpperCase() + s.slice(1))),
            el('th', { class: 'num' }, 'Delivered / min'), el('th', {}, 'Last 5 min'),
            el('th', { class: 'num', title: 'Acceptance to delivery over the last 5 minutes, in this instance' }, 'Lag p50 / p99'),
            hasFlow && el('th', {}, 'Flow'), !readOnly && el('th', {}, ''))),
          el('tbody', {}, rows.map((g) => {
            const r = rate(g.source + '\u0000' + g.target);
            return el('tr', { 'data-source': g.source, 'data-target': g.target },
              el('td', {}, g.source), el('td', {}, g.target),
              STATUSES.map((s) => el('td', { class: 'num c-' + s + (g[s] && s === 'dead' ? ' alert' : '') },
                el('a', { href: '#/jobs?' + new URLSearchParams({ source: g.source, target: g.target, status: s }) }, g[s]))),
              el('td', { class: 'num c-rate' }, r.perMin === null ? '—' : r.perMin.toFixed(1)),
              el('td', {}, sparkline(r.buckets)),
              el('td', { class: 'num c-lag' }, lagText(st.lag, g.source, g.target)),
              hasFlow && el('td', {}, flowBadges(g.flow)),
              !readOnly && el('td', {}, el('div', { class: 'row-actions' }, g.dead > 0 && el('button', {
                type: 'button', class: 'small', 'data-action': 'replay-dead',
                onclick: () => bulkReplay(g.source, g.target, g.dead),
              }, `Replay ${g.dead} dead`),
              // Pause and resume, where the stats say the plugin has them.
              st.pauses && pauseButton(g, st.pauses.some((p) => p.source === g.source && !p.target)))));
          }))));
      },
    };
  }

  function card(label, value, cls, extra) {
    return el('div', { class: 'card ' + cls }, el('div', { class: 'label' }, label), el('div', { class: 'value' }, value), extra);
  }
  // keysCard counts the encrypted values under each key id (never a key):
  // an older key may go once it has none.
  function keysCard(st) {
    const keys = st.keys || [];
    if (keys.length === 0) return null;
    const lines = keys.map((k) => el('div', { class: 'small' + (k.listed ? '' : ' err') },
      `${k.key_id}: ${k.values}` + (k.listed ? '' : ' (not listed)')));
    if (st.plain_events) lines.push(el('div', { class: 'small muted' }, `plain: ${st.plain_events}`));
    return card('Encrypted, by key', keys.length === 1 ? keys[0].values : keys.length + ' keys', 'keys', el('div', { id: 'key-counts' }, lines));
  }
  function unroutableCard(st) {
    // Events stored without a target, where the stats count them.
    const v = st.unroutable ?? st.no_target ?? st.events_without_target;
    if (v === undefined) return null;
    const n = typeof v === 'number' ? v : Array.isArray(v) ? v.reduce((a, x) => a + (x.events || x.count || 0), 0) : '?';
    return card('Without a target', n, 'unroutable');
  }
  function flowBadges(flow) {
    const out = [];
    if (flow.paused) out.push(el('span', { class: 'badge s-paused' }, 'paused'));
    if (flow.circuit && flow.circuit !== 'closed') out.push(el('span', { class: 'badge s-circuit' }, 'circuit ' + flow.circuit));
    if (out.length === 0) out.push(el('span', { class: 'muted' }, 'running'));
    return out;
  }

  // pauseButton pauses the row's target, or resumes it: the whole source
  // when that is what is paused (a target stays paused while its source
  // is). Receiving goes on while paused.
  function pauseButton(g, wholeSource) {
    const q = new URLSearchParams({ source: g.source });
    if (g.flow.paused) {
      if (!wholeSource) q.set('target', g.target);
      const what = wholeSource ? `every target of ${g.source}` : `${g.source} → ${g.target}`;
      return el('button', {
        type: 'button', class: 'small', 'data-action': 'resume',
        onclick: () => act('Resume ' + what, 'POST', 'resume?' + q),
      }, wholeSource ? `Resume ${g.source}` : 'Resume');
    }
    q.set('target', g.target);
    return el('button', {
      type: 'button', class: 'small secondary', 'data-action': 'pause',
      onclick: () => {
        if (!confirm(`Pause deliveries to ${g.source} → ${g.target}? Events are still received and wait until you resume.`)) return;
        act(`Pause ${g.source} → ${g.target}`, 'POST', 'pause?' + q);
      },
    }, 'Pause');
  }

  // bulkReplay replays the dead jobs of a source and target (empty: all);
  // n, when known, is how many there are.
  function bulkReplay(source, target, n) {
    const count = n ? `${n} dead job${n === 1 ? '' : 's'}` : 'every dead job';
    const what = `${count} of ${source || 'every source'} → ${target || 'every target'}`;
    if (!confirm(`Replay ${what}? Each gets a fresh set of attempts.`)) return;
    const q = new URLSearchParams({ status: 'dead' });
    if (source) q.set('source', source);
    if (target) q.set('target', target);
    act('Replay ' + what, 'POST', 'replay?' + q, undefined, (res) => flash('ok', `Replayed ${res.replayed} dead job(s).`));
  }

  // ---- lists: jobs and events --------------------------------------------

  const FILTERS = {
    jobs: ['source', 'target', 'status', 'event_type', 'delivery_id', 'since', 'until'],
    events: ['source', 'event_type', 'delivery_id', 'has_target', 'since', 'until', 'where'],
  };
  const LABELS = {
    source: 'Source', target: 'Target', status: 'Status', event_type: 'Event type',
    delivery_id: 'Delivery id', has_target: 'Target', since: 'Since', until: 'Until',
    where: 'Where: a CEL expression over the stored event, as a target\'s filter (body, headers, event_type, source, delivery_id)',
  };

  function listView(kind, params) {
    const form = el('form', { class: 'filters', id: kind + '-filters' });
    for (const name of FILTERS[kind]) {
      const value = params.get(name) || '';
      let input;
      if (name === 'status') {
        input = el('select', { name }, el('option', { value: '' }, 'any'), STATUSES.map((s) => el('option', { value: s, selected: s === value }, s)));
      } else if (name === 'has_target') {
        input = el('select', { name }, el('option', { value: '' }, 'any'),
          el('option', { value: 'true', selected: value === 'true' }, 'with a target'),
          el('option', { value: 'false', selected: value === 'false' }, 'without a target'));
      } else if (name === 'where') {
        input = el('textarea', { name, rows: 2, spellcheck: 'false', value, placeholder: 'body.customer == "cus_1" && event_type == "order.paid"' });
      } else {
        input = el('input', {
          name, value, type: 'text', autocomplete: 'off',
          placeholder: name === 'since' || name === 'until' ? '1h or 2026-05-01T10:00:00Z' : '',
          list: name === 'source' ? 'dl-sources' : name === 'target' ? 'dl-targets' : null,
        });
      }
      form.appendChild(el('label', { class: name === 'where' ? 'wide' : null }, el('span', {}, LABELS[name]), input));
    }
    form.appendChild(el('div', { class: 'buttons' },
      el('button', { type: 'submit' }, 'Filter'),
      el('button', { type: 'button', class: 'secondary', onclick: () => go('/' + kind) }, 'Clear')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      go('/' + kind, new FormData(form));
    });

    const bulk = el('div', { class: 'bulk' });
    const box = el('div', { id: kind + '-table' });
    const pager = el('div', { class: 'pager' });
    // A search by content walks the store: it runs when asked, not on
    // every poll, and lists oldest first from its cursor.
    const searching = kind === 'events' && !!params.get('where');
    const summary = el('p', { class: 'muted small', id: 'search-summary' });
    replace(main, el('h2', {}, kind === 'jobs' ? 'Jobs' : 'Events'), form, datalist('dl-sources', knownSources()),
      datalist('dl-targets', knownTargets()), bulk, searching && summary, box, pager);
    let searched = false; // the search ran; it runs again after a replay
    if (searching && !readOnly) bulk.appendChild(replayPanel(params, () => { searched = false; }));

    // Paging: the cursor is in the URL; the cursors of the newer pages are
    // kept here so that "Newer" goes back one page.
    const cursors = (listView.cursors && listView.kind === kind) ? listView.cursors : [];
    listView.kind = kind;
    listView.cursors = cursors;
    const cursor = params.get('cursor') || '';
    if (!cursor) cursors.length = 0;

    if (kind === 'jobs' && !readOnly && params.get('status') === 'dead') {
      const s = params.get('source') || '', t = params.get('target') || '';
      bulk.appendChild(el('button', {
        type: 'button', class: 'small', 'data-action': 'replay-dead-filter',
        onclick: () => bulkReplay(s, t, 0),
      }, `Replay every dead job of ${s || 'every source'} → ${t || 'every target'}`));
      if (['event_type', 'delivery_id', 'since', 'until'].some((f) => params.get(f))) {
        bulk.appendChild(el('span', { class: 'muted small' }, ' (bulk replay filters by source and target only)'));
      }
    }

    return {
      async refresh() {
        if (!lastStats) loadStats().catch(() => {});
        if (searching && searched) return;
        searched = searching;
        const q = new URLSearchParams();
        for (const name of FILTERS[kind]) if (params.get(name)) q.set(name, params.get(name));
        if (cursor) q.set('cursor', cursor);
        q.set('limit', '50');
        let page;
        try {
          page = await api('GET', kind + '?' + q);
        } catch (err) {
          if (err.status === 0) throw err;
          if (changed(box, { error: err.message })) {
            replace(box, el('p', { class: 'error', id: kind + '-error' }, explain(err, kind === 'jobs' ? 'Jobs' : 'Events')));
            replace(pager);
          }
          return;
        }
        if (!changed(box, page)) return;
        const rows = page[kind] || [];
        replace(box, rows.length === 0 ? el('p', { class: 'muted', id: kind + '-empty' }, 'Nothing matches.') :
          kind === 'jobs' ? jobsTable(rows) : eventsTable(rows));
        if (searching) replace(summary, searchSummary(page));
        replace(pager,
          cursor && el('button', { type: 'button', class: 'secondary', onclick: () => {
            const prev = cursors.pop() || '';
            const p = new URLSearchParams(params); p.set('cursor', prev); go('/' + kind, p);
          } }, searching ? '← Back' : '← Newer'),
          page.next_cursor && el('button', { type: 'button', class: 'secondary', 'data-action': 'more', onclick: () => {
            cursors.push(cursor);
            const p = new URLSearchParams(params); p.set('cursor', page.next_cursor); go('/' + kind, p);
          } }, searching ? 'More →' : 'Older →'));
      },
    };
  }

  // searchSummary says what one request of a search read: the events it
  // walked, why it stopped early, the events the expression failed on, and
  // those it could not open.
  function searchSummary(page) {
    const n = page.scanned || 0;
    const parts = [`Searched ${n} event${n === 1 ? '' : 's'}, oldest first.`];
    if (page.stopped === 'time' || page.stopped === 'rows') parts.push('The search stopped for now: More → goes on from there.');
    if (page.eval_errors) parts.push(`The expression failed on ${page.eval_errors} event${page.eval_errors === 1 ? '' : 's'}, which do not match: ${page.eval_error}`);
    if (page.unread) parts.push(`Could not read ${page.unread} event${page.unread === 1 ? '' : 's'}, which ${page.unread === 1 ? 'was' : 'were'} not searched: ${page.unread_error}`);
    return parts.join(' ');
  }

  // replayPanel offers to replay what a search finds: it counts, with a
  // dry run, the jobs a replay by query would queue, and its button, which
  // asks for confirmation with that count, queues them and then calls
  // replayed. Each runs every request of the replay, from the first event
  // to the newest.
  function replayPanel(params, replayed) {
    const status = el('select', { name: 'replay-status', title: 'dead: replay the dead jobs; done: resend the delivered ones; any: both, and a new job for a target named that an event has none for' },
      ['dead', 'done', 'any'].map((v) => el('option', { value: v }, v)));
    const target = el('input', { name: 'replay-target', type: 'text', list: 'dl-targets', placeholder: 'every target', autocomplete: 'off' });
    const count = el('span', { id: 'replay-count', class: 'muted small' }, 'Counting…');
    const button = el('button', { type: 'button', class: 'small', 'data-action': 'replay-query', disabled: true }, 'Replay these 0');
    let n = 0;
    let seq = 0;
    const query = () => {
      const q = new URLSearchParams();
      for (const f of ['where', 'source', 'event_type', 'since', 'until']) if (params.get(f)) q.set(f, params.get(f));
      q.set('status', status.value);
      if (target.value.trim()) q.set('target', target.value.trim());
      return q;
    };
    // run makes the requests of a replay by query (a dry run with dry),
    // adds up their counts, and gives up when a newer count started.
    async function run(dry, mine) {
      const total = { events: 0, replayed: 0, resent: 0, added: 0, in_flight: 0, unroutable: 0, scanned: 0 };
      const q = query();
      if (dry) q.set('dry_run', 'true');
      for (;;) {
        const r = await api('POST', 'replay?' + q);
        if (mine !== undefined && mine !== seq) return null;
        for (const k of Object.keys(total)) total[k] += r[k] || 0;
        if (dry) count.textContent = `Counting… searched ${total.scanned} events`;
        if (!r.next_cursor) return total;
        q.set('cursor', r.next_cursor);
      }
    }
    const jobs = (t) => t.replayed + t.resent + t.added;
    async function recount() {
      const mine = ++seq;
      button.disabled = true;
      count.textContent = 'Counting…';
      try {
        const t = await run(true, mine);
        if (!t) return;
        n = jobs(t);
        const parts = [`${t.replayed} dead to replay`, `${t.resent} done to resend`];
        if (t.added) parts.push(`${t.added} new`);
        let text = `${n} job${n === 1 ? '' : 's'} to queue for ${t.events} matching event${t.events === 1 ? '' : 's'}: ${parts.join(', ')}.`;
        if (t.in_flight) text += ` ${t.in_flight} pending or running, left alone.`;
        if (t.unroutable) text += ` ${t.unroutable} not in the running config, left alone.`;
        count.textContent = text;
        button.textContent = `Replay these ${n}`;
        button.disabled = n === 0;
      } catch (err) {
        if (mine === seq) count.textContent = explain(err, 'Count');
      }
    }
    button.addEventListener('click', async () => {
      const what = target.value.trim() ? ` to ${target.value.trim()}` : '';
      if (!confirm(`Replay these ${n} job${n === 1 ? '' : 's'}${what}? Dead jobs get a fresh set of attempts, done jobs are delivered again.`)) return;
      button.disabled = true;
      seq++; // a count running now is out of date
      try {
        const t = await run(false);
        flash('ok', `Queued ${jobs(t)} job${jobs(t) === 1 ? '' : 's'}: ${t.replayed} replayed, ${t.resent} resent, ${t.added} new.`);
      } catch (err) {
        flash('error', explain(err, 'Replay'));
      }
      replayed();
      recount();
      tick(true);
    });
    status.addEventListener('change', recount);
    target.addEventListener('change', recount);
    recount();
    return el('div', { class: 'replay', id: 'replay-panel' }, el('span', {}, 'Replay what the search finds: '), status, target, button, count);
  }

  function rowLink(tr, href) {
    tr.classList.add('link');
    tr.addEventListener('click', (e) => { if (!e.target.closest('a,button')) location.hash = href; });
    return tr;
  }

  // jobsTable lists jobs. brief leaves out the next attempt and the last
  // error, which an event's summary of its jobs does not carry: empty
  // cells would read as "no error".
  function jobsTable(jobs, brief) {
    const heads = ['Job', 'Created', 'Source', 'Target', 'Event type', 'Delivery id', 'Status', 'Attempts'];
    if (!brief) heads.push('Next / finished', 'Last error');
    return el('table', { class: 'grid', id: 'jobs-list' },
      el('thead', {}, el('tr', {}, heads.map((h) => el('th', {}, h)))),
      el('tbody', {}, jobs.map((j) => rowLink(el('tr', { 'data-id': j.id, 'data-delivery': j.delivery_id, 'data-status': j.status },
        el('td', {}, el('a', { href: '#/jobs/' + j.id }, '#' + j.id)),
        el('td', {}, timeCell(j.created_at)),
        el('td', {}, j.source), el('td', {}, j.target), el('td', {}, j.event_type || ''),
        idCell(j.delivery_id),
        el('td', { class: 'c-status' }, badge(j.status)),
        el('td', { class: 'num' }, j.attempts),
        brief ? null : el('td', {}, j.status === 'done' || j.status === 'dead' ? timeCell(j.finished_at) : timeCell(j.run_at)),
        brief ? null : el('td', { class: 'err', title: j.last_error || '' }, clip(j.last_error, 80))), '#/jobs/' + j.id))));
  }

  function eventsTable(events) {
    return el('table', { class: 'grid', id: 'events-list' },
      el('thead', {}, el('tr', {}, ['Event', 'Created', 'Source', 'Event type', 'Delivery id', 'Jobs'].map((h) => el('th', {}, h)))),
      el('tbody', {}, events.map((ev) => rowLink(el('tr', { 'data-id': ev.id, 'data-delivery': ev.delivery_id },
        el('td', {}, el('a', { href: '#/events/' + ev.id }, '#' + ev.id)),
        el('td', {}, timeCell(ev.created_at)),
        el('td', {}, ev.source), el('td', {}, ev.event_type || ''),
        idCell(ev.delivery_id),
        el('td', {}, (ev.jobs || []).length === 0 ? el('span', { class: 'muted' }, 'no target') :
          ev.jobs.map((j) => el('a', { class: 'jobchip', href: '#/jobs/' + j.id }, j.target + ' ', badge(j.status))))),
      '#/events/' + ev.id))));
  }

  // idCell shows a delivery id in a table: cut to the cell's width by CSS
  // (a 71-character sha256: id would widen the table past the window),
  // the whole id in the tooltip, and a button that copies it.
  function idCell(id) {
    return el('td', { class: 'id' }, el('span', { class: 'id-wrap' },
      el('span', { class: 'mono clipped', title: id }, id), copyButton(id)));
  }

  // copyButton copies text to the clipboard. navigator.clipboard exists
  // only in a secure context (https, localhost); elsewhere a selected
  // textarea and the copy command do it.
  function copyButton(text) {
    const b = el('button', { type: 'button', class: 'copy', title: 'Copy', 'aria-label': 'Copy ' + text, onclick: async (e) => {
      e.stopPropagation();
      let ok = false;
      try {
        if (navigator.clipboard) { await navigator.clipboard.writeText(text); ok = true; }
      } catch (_) { /* fall back below */ }
      if (!ok) {
        const ta = el('textarea', { class: 'offscreen', readonly: true, value: text });
        document.body.appendChild(ta);
        ta.select();
        try { ok = document.execCommand('copy'); } catch (_) { ok = false; }
        ta.remove();
      }
      b.textContent = ok ? 'copied' : 'select it';
      setTimeout(() => { b.textContent = 'copy'; }, 1500);
    } }, 'copy');
    return b;
  }

  const clip = (s, n) => (!s ? '' : s.length > n ? s.slice(0, n - 1) + '…' : s);

  // ---- one job -----------------------------------------------------------

  // payloadMode survives refreshes and pages: pretty or raw.
  let payloadMode = 'pretty';

  function jobView(id) {
    const box = el('div', { id: 'job' });
    replace(main, el('p', { class: 'crumbs' }, el('a', { href: '#/jobs' }, 'Jobs'), ' / ', '#' + id), box);
    return {
      async refresh() {
        let job;
        try {
          job = await api('GET', 'jobs/' + id);
        } catch (err) {
          if (err.status === 0) throw err;
          if (changed(box, { error: err.message })) replace(box, el('p', { class: 'error' }, explain(err, 'Job ' + id)));
          return;
        }
        if (!lastStats) await loadStats().catch(() => {});
        if (!changed(box, job)) return;
        replace(box,
          el('div', { class: 'title' }, el('h2', {}, `Job #${job.id}`), el('span', { id: 'job-status' }, badge(job.status)), jobActions(job)),
          fields([
            ['Source', job.source], ['Target', job.target], ['Event type', job.event_type || '—'],
            ['Delivery id', el('span', { class: 'id-wrap' }, el('span', { class: 'mono' }, job.delivery_id), copyButton(job.delivery_id))],
            ['Event', el('a', { href: '#/events/' + job.event_id }, '#' + job.event_id)],
            ['Attempts', job.attempts],
            ['Created', fullTime(job.created_at)],
            [job.status === 'done' || job.status === 'dead' ? 'Finished' : 'Next attempt',
              job.status === 'done' || job.status === 'dead' ? fullTime(job.finished_at) : fullTime(job.run_at)],
            job.lease_owner && ['Lease', `${job.lease_owner} until ${fmtTime(job.lease_until)}`],
            // The filter of the job's target took the event (the running config's).
            job.filter && ['Taken by filter', el('span', { class: 'mono', id: 'job-filter' }, job.filter)],
            job.last_error && ['Last error', el('span', { class: 'err' }, job.last_error)],
          ]),
          sendForm(job.event_id, job.source),
          headersTable(job.headers),
          payloadBox(job),
          historyTable(job.history || []));
      },
    };
  }

  function jobActions(job) {
    if (readOnly) return null;
    const b = (action, label, cls, onclick) => el('button', { type: 'button', class: cls || '', 'data-action': action, onclick }, label);
    return el('div', { class: 'actions' },
      job.status === 'dead' && b('replay', 'Replay', '', () => act(`Replay job ${job.id}`, 'POST', `jobs/${job.id}/replay`)),
      (job.status === 'done' || job.status === 'dead') && b('resend', 'Resend', 'secondary', () => act(`Resend job ${job.id}`, 'POST', `jobs/${job.id}/resend`)),
      job.status !== 'running' && b('discard', 'Discard', 'danger', () => {
        if (!confirm(`Discard job ${job.id}? It will never be delivered.`)) return;
        act(`Discard job ${job.id}`, 'DELETE', `jobs/${job.id}`, undefined, () => go('/jobs'));
      }));
  }

  function sendForm(eventID, source) {
    if (readOnly) return null;
    const input = el('input', { name: 'target', type: 'text', list: 'dl-send-targets', placeholder: 'target name', required: true });
    const form = el('form', { class: 'inline', id: 'send-to-target' },
      el('span', {}, 'Send this event to a target: '), input, datalist('dl-send-targets', knownTargets(source)),
      el('button', { type: 'submit', class: 'secondary' }, 'Send'));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      act(`Send event ${eventID} to ${t}`, 'POST', `events/${eventID}/send?` + new URLSearchParams({ target: t }), undefined,
        (res) => { const id = res && (res.job_id || res.id); if (id) go('/jobs/' + id); });
    });
    return form;
  }

  function fields(rows) {
    return el('dl', { class: 'fields' }, rows.filter(Boolean).map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  }

  function headersTable(headers) {
    return el('section', {}, el('h3', {}, 'Stored headers'),
      (headers || []).length === 0 ? el('p', { class: 'muted' }, 'None.') :
        el('table', { class: 'grid compact', id: 'headers' }, el('tbody', {},
          headers.map((h) => el('tr', {}, el('th', {}, h.name), el('td', { class: 'mono' }, h.value))))));
  }

  function decodeBase64(b64) {
    try {
      const bin = atob(b64 || '');
      const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
      return { bytes, text: new TextDecoder('utf-8', { fatal: true }).decode(bytes) };
    } catch (_) {
      return { bytes: null, text: null };
    }
  }

  function payloadBox(obj) {
    if (obj.read_error) {
      // Sealed under a key the config does not list: the error names it.
      return el('section', {}, el('h3', {}, 'Payload'),
        el('p', { class: 'error', id: 'payload-unreadable' }, 'The event cannot be read: ' + obj.read_error));
    }
    let text = obj.payload_text;
    let size = text !== undefined ? new TextEncoder().encode(text).length : 0;
    if (text === undefined) {
      const d = decodeBase64(obj.payload);
      text = d.text;
      size = d.bytes ? d.bytes.length : 0;
    }
    const pre = el('pre', { id: 'payload', class: 'payload' });
    const section = el('section', {}, el('h3', {}, 'Payload ', el('span', { class: 'muted small' }, `${size} bytes`)));
    if (text === null) {
      // Not UTF-8: show the base64 the API returned, as text.
      section.appendChild(el('p', { class: 'muted small' }, 'Binary payload, shown as base64.'));
      pre.textContent = obj.payload || '';
      section.appendChild(pre);
      return section;
    }
    let pretty = null;
    try { pretty = JSON.stringify(JSON.parse(text), null, 2); } catch (_) { /* not JSON */ }
    const show = () => {
      pre.textContent = payloadMode === 'pretty' && pretty !== null ? pretty : text;
      prettyBtn.classList.toggle('on', payloadMode === 'pretty');
      rawBtn.classList.toggle('on', payloadMode !== 'pretty');
    };
    const prettyBtn = el('button', { type: 'button', class: 'tab', 'data-mode': 'pretty', disabled: pretty === null, onclick: () => { payloadMode = 'pretty'; show(); } }, 'Pretty JSON');
    const rawBtn = el('button', { type: 'button', class: 'tab', 'data-mode': 'raw', onclick: () => { payloadMode = 'raw'; show(); } }, 'Raw');
    section.appendChild(el('div', { class: 'tabs' }, prettyBtn, rawBtn));
    section.appendChild(pre);
    show();
    return section;
  }

  // statusCode is what the target reported of an attempt: the API's
  // status (an HTTP status, or an exec target's exit code, 0 included);
  // from an older plugin without it, the http target's "upstream answered
  // NNN".
  function statusCode(a) {
    if (typeof a.status === 'number') return a.status;
    const m = /upstream answered (\d{3})/.exec(a.error || '');
    return m ? Number(m[1]) : '';
  }
  function excerpt(a) {
    const e = a.response || a.error || '';
    return e.replace(/^upstream answered \d{3}:? ?/, '');
  }

  function historyTable(history) {
    return el('section', {}, el('h3', {}, 'Attempts'),
      history.length === 0 ? el('p', { class: 'muted' }, 'No attempt yet.') :
        el('table', { class: 'grid', id: 'history' },
          el('thead', {}, el('tr', {}, ['#', 'Started', 'Duration', 'Outcome', 'Status', 'Response / error'].map((h) => el('th', {}, h)))),
          el('tbody', {}, history.map((a) => el('tr', {},
            el('td', { class: 'num' }, a.attempt),
            el('td', {}, timeCell(a.started)),
            el('td', { class: 'num' }, a.outcome === 'handed_back' ? '' : fmtLatency(a.duration_ns)),
            el('td', {}, el('span', { class: 'badge o-' + (['delivered', 'retry', 'dead', 'handed_back'].includes(a.outcome) ? a.outcome : 'other') }, a.outcome || '')),
            el('td', { class: 'num c-code' }, statusCode(a)),
            el('td', { class: 'err' }, excerpt(a)))))));
  }

  // ---- one event ---------------------------------------------------------

  function eventView(id) {
    const box = el('div', { id: 'event' });
    replace(main, el('p', { class: 'crumbs' }, el('a', { href: '#/events' }, 'Events'), ' / ', '#' + id), box);
    return {
      async refresh() {
        let ev;
        try {
          ev = await api('GET', 'events/' + id);
        } catch (err) {
          if (err.status === 0) throw err;
          if (changed(box, { error: err.message })) replace(box, el('p', { class: 'error' }, explain(err, 'Event ' + id)));
          return;
        }
        if (!lastStats) await loadStats().catch(() => {});
        if (!changed(box, ev)) return;
        replace(box,
          el('div', { class: 'title' }, el('h2', {}, `Event #${ev.id}`)),
          fields([
            ['Source', ev.source], ['Event type', ev.event_type || '—'],
            ['Delivery id', el('span', { class: 'id-wrap' }, el('span', { class: 'mono' }, ev.delivery_id), copyButton(ev.delivery_id))],
            ['Received', fullTime(ev.created_at)],
            // Which target's filter took the event, by the running config.
            ev.filters && ['Taken by filters', el('ul', { id: 'event-filters' }, Object.keys(ev.filters).sort().map((t) =>
              el('li', {}, el('strong', {}, t), ': ', el('span', { class: 'mono' }, ev.filters[t]))))],
          ]),
          el('section', {}, el('h3', {}, 'Jobs'), (ev.jobs || []).length === 0 ? el('p', { class: 'muted' }, 'No target: the event is stored without a job.') :
            jobsTable(ev.jobs.map((j) => Object.assign({ source: ev.source, event_type: ev.event_type, delivery_id: ev.delivery_id, created_at: ev.created_at }, j)), true)),
          sendForm(ev.id, ev.source),
          headersTable(ev.headers),
          payloadBox(ev));
      },
    };
  }

  // ---- send an event -----------------------------------------------------

  function sendView(params) {
    const f = (name, attrs) => el('label', {}, el('span', {}, LABELS[name] || name), el('input', Object.assign({ name, type: 'text', autocomplete: 'off' }, attrs)));
    const headers = el('textarea', { name: 'headers', rows: 3, placeholder: 'Content-Type: application/json' });
    const body = el('textarea', { name: 'body', rows: 10, placeholder: '{"hello": "world"}' });
    const form = el('form', { class: 'send', id: 'send-form' },
      f('source', { required: true, list: 'dl-sources', value: params.get('source') || '' }),
      f('event_type', {}),
      f('delivery_id', { placeholder: 'default: injected-<random>' }),
      el('label', { class: 'wide' }, el('span', {}, 'Headers, one "Name: value" a line'), headers),
      el('label', { class: 'wide' }, el('span', {}, 'Body'), body),
      el('div', { class: 'buttons' }, el('button', { type: 'submit' }, 'Send event')));
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      const req = { source: fd.get('source').trim(), body: fd.get('body') };
      if (fd.get('event_type').trim()) req.event_type = fd.get('event_type').trim();
      if (fd.get('delivery_id').trim()) req.delivery_id = fd.get('delivery_id').trim();
      const hs = {};
      for (const line of fd.get('headers').split('\n')) {
        const i = line.indexOf(':');
        if (i > 0) hs[line.slice(0, i).trim()] = line.slice(i + 1).trim();
      }
      if (Object.keys(hs).length) req.headers = hs;
      act(`Send an event to ${req.source}`, 'POST', 'send', req, (res) => {
        const id = res && (res.event_id || res.id);
        if (id) go('/events/' + id);
      });
    });
    replace(main, el('h2', {}, 'Send an event'),
      el('p', { class: 'muted' }, 'The event is stored as if a sender had sent it and verified, marked as injected, and delivered to the source\'s targets.'),
      form, datalist('dl-sources', knownSources()));
    return { refresh: async () => { if (!lastStats) await loadStats(); } };
  }

  route();
})();
