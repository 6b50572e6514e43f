// server/dashboard/dashboard.js — tram's engine dashboard: reads the snapshot
// stream GET /dashboard/events (fields: docs/api.md, "Dashboard stream") and
// draws the KV block map, the step timeline, the queues, the sparklines and
// the request table. The stream is read with fetch() rather than EventSource
// so the API key (when the server has keys) goes in an Authorization header,
// never in the URL.
'use strict';

const $ = (id) => document.getElementById(id);
const KEY = 'tram-dashboard-key';
const STEPS_KEPT = 240;     // steps on the timeline
const SPARK_MS = 60000;     // sparkline window

const state = {
  prev: null,               // the previous snapshot
  steps: [],                // the last STEPS_KEPT steps
  spark: [],                // {t, tps, ttft50, ttft99, itl50, itl99}
  cells: [],                // the block map's divs
  owners: [],               // per cell: [id, index] or null
  refs: new Map(),          // cell -> references (shared cells)
  used: null,               // per cell: held blocks (aggregated maps)
  perCell: 1,
};

// ---- the stream ---------------------------------------------------------------

function setConn(on, why) {
  const c = $('conn');
  c.className = 'conn ' + (on ? 'on' : 'off');
  c.textContent = on ? 'live' : 'offline' + (why ? ' (' + why + ')' : '');
}

function showAuth(message) {
  setConn(false, message || 'API key needed');
  $('auth').classList.remove('hidden');
  $('auth-key').focus();
}

function retry() { setTimeout(connect, 2000); }

async function connect() {
  const key = sessionStorage.getItem(KEY);
  const headers = { Accept: 'text/event-stream' };
  if (key) headers.Authorization = 'Bearer ' + key;
  let res;
  try {
    res = await fetch('/dashboard/events', { headers, cache: 'no-store' });
  } catch (e) {
    setConn(false, 'unreachable');
    retry();
    return;
  }
  if (res.status === 401) {
    sessionStorage.removeItem(KEY);
    showAuth(key ? 'the key was refused' : 'API key needed');
    return;
  }
  if (!res.ok) {
    setConn(false, 'HTTP ' + res.status);
    retry();
    return;
  }
  $('auth').classList.add('hidden');
  setConn(true);
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = event.split('\n').filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).replace(/^ /, '')).join('\n');
        if (data) onSnapshot(JSON.parse(data));
      }
    }
  } catch (e) { /* the connection broke: reconnect */ }
  setConn(false, 'disconnected');
  retry();
}

$('auth').addEventListener('submit', (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(KEY, $('auth-key').value);
  $('auth-key').value = '';
  $('auth').classList.add('hidden');
  connect();
});

// ---- helpers ------------------------------------------------------------------

const fmt = (v, d = 0) => (v === null || v === undefined ? '–' : Number(v).toFixed(d));

function mib(bytes) { return bytes >= 1 << 30 ? (bytes / (1 << 30)).toFixed(1) + ' GiB' : (bytes / (1 << 20)).toFixed(0) + ' MiB'; }

function duration(s) {
  s = Math.floor(s);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + (s % 60) + 's';
}

function canvas(id) {
  const c = $(id), r = window.devicePixelRatio || 1;
  const w = c.clientWidth, h = c.clientHeight || c.height;
  if (c.width !== Math.round(w * r)) { c.width = Math.round(w * r); c.height = Math.round(h * r); }
  const g = c.getContext('2d');
  g.setTransform(r, 0, 0, r, 0, 0);
  g.clearRect(0, 0, w, h);
  return { g, w, h };
}

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

// ---- the block map ------------------------------------------------------------

function drawBlocks(s) {
  const kv = s.kv, map = $('kv-map');
  if (state.cells.length !== kv.cells.length) {
    map.textContent = '';
    state.cells = [];
    const frag = document.createDocumentFragment();
    for (let i = 0; i < kv.cells.length; i++) {
      const d = document.createElement('div');
      d.className = 'cell s0';
      d.dataset.i = i;
      frag.appendChild(d);
      state.cells.push(d);
    }
    map.appendChild(frag);
    map.classList.toggle('dense', kv.cells.length > 2048);
  }
  const owners = new Array(kv.cells.length).fill(null);
  for (const [first, n, id, index] of kv.owners) for (let i = first; i < first + n; i++) owners[i] = [id, index];
  // preempted sequences: their cells flash as they are freed
  const preempted = new Set(s.requests.filter((r) => r.state === 'preempted').map((r) => r.id + '.' + r.seq));
  const prevCells = state.prev ? state.prev.kv.cells : null;
  const same = prevCells && prevCells.length === kv.cells.length;
  for (let i = 0; i < kv.cells.length; i++) {
    const st = kv.cells[i], d = state.cells[i], was = same ? prevCells[i] : null;
    const cls = 'cell s' + st;
    let flash = '';
    // a prefix hit: a cached block taken back, or a held block now shared
    if ((was === '1' && (st === '2' || st === '3')) || (was === '2' && st === '3')) flash = 'flash-hit';
    const o = state.owners[i];
    if ((was === '2' || was === '3') && (st === '0' || st === '1') && o && preempted.has(o[0] + '.' + o[1])) flash = 'flash-pre';
    if (flash) {
      d.className = cls;
      void d.offsetWidth; // restart the animation
      d.className = cls + ' ' + flash;
    } else if (was !== st) {
      d.className = cls;
    }
  }
  state.owners = owners;
  state.refs = new Map(kv.refs.map(([c, r]) => [c, r]));
  state.used = kv.used || null;
  state.perCell = kv.per_cell;
  $('kv-free').textContent = kv.free;
  $('kv-cached').textContent = kv.cached;
  $('kv-owned').textContent = kv.owned;
  $('kv-shared').textContent = kv.shared;
  const used = kv.owned + kv.shared;
  $('kv-summary').textContent = `${kv.blocks} blocks of ${s.info.block_size} tokens · ${(100 * used / kv.blocks).toFixed(1)}% held` +
    (kv.per_cell > 1 ? ` · ${kv.per_cell} blocks per cell` : '');
}

const STATE_NAMES = ['free', 'free, cached prefix', 'owned', 'shared'];

$('kv-map').addEventListener('mousemove', (ev) => {
  const tip = $('kv-tip'), i = ev.target.dataset ? ev.target.dataset.i : undefined;
  if (i === undefined || !state.prev) { tip.classList.add('hidden'); return; }
  const cell = Number(i), per = state.perCell, st = state.prev.kv.cells[cell];
  const first = cell * per;
  let text = per > 1 ? `blocks ${first}–${first + per - 1}` : `block ${first}`;
  text += `\n${STATE_NAMES[st]}`;
  if (state.used) text += ` (${state.used[cell]} of ${per} held)`;
  const o = state.owners[cell];
  if (o) text += `\nowner: request ${o[0]}` + (o[1] ? ` (sequence ${o[1]})` : '');
  if (state.refs.has(cell)) text += `\nreferences: ${state.refs.get(cell)}`;
  tip.textContent = text;
  tip.style.left = ev.clientX + 14 + 'px';
  tip.style.top = ev.clientY + 10 + 'px';
  tip.classList.remove('hidden');
});
$('kv-map').addEventListener('mouseleave', () => $('kv-tip').classList.add('hidden'));

// ---- the step timeline --------------------------------------------------------

function drawTimeline(s) {
  for (const st of s.steps) state.steps.push(st);
  if (state.steps.length > STEPS_KEPT) state.steps.splice(0, state.steps.length - STEPS_KEPT);
  const { g, w, h } = canvas('timeline');
  const budget = s.info.max_batch_tokens, top = 8, bottom = h - 14, span = bottom - top;
  const maxTok = Math.max(budget, ...state.steps.map((x) => x.prefill + x.decode));
  const maxMs = Math.max(1, ...state.steps.map((x) => x.ms));
  const bw = w / STEPS_KEPT, x00 = w - state.steps.length * bw; // the newest step at the right
  const y = (tok) => bottom - (Math.log1p(tok) / Math.log1p(maxTok)) * span; // log scale: decodes stay visible
  state.steps.forEach((x, i) => {
    const x0 = x00 + i * bw;
    g.fillStyle = css('--decode');
    g.fillRect(x0, y(x.decode), Math.max(1, bw - 1), bottom - y(x.decode));
    g.fillStyle = css('--prefill');
    g.fillRect(x0, y(x.decode + x.prefill), Math.max(1, bw - 1), y(x.decode) - y(x.decode + x.prefill)); // stacked on the log scale
    g.fillStyle = x.path === 'decode' ? css('--decode') : css('--prefill');
    g.fillRect(x0, h - 8, Math.max(1, bw - 1), 6);
  });
  g.strokeStyle = css('--dim');
  g.setLineDash([4, 4]);
  g.beginPath(); g.moveTo(0, y(budget)); g.lineTo(w, y(budget)); g.stroke();
  g.setLineDash([]);
  g.fillStyle = css('--dim');
  g.fillText(`budget ${budget}`, 4, y(budget) - 3);
  g.strokeStyle = '#e6e6e6';
  g.beginPath();
  state.steps.forEach((x, i) => {
    const yy = bottom - (x.ms / maxMs) * span;
    if (i) g.lineTo(x00 + i * bw + bw / 2, yy); else g.moveTo(x00 + bw / 2, yy);
  });
  g.stroke();
  g.fillStyle = '#e6e6e6';
  g.fillText(`${maxMs.toFixed(1)} ms`, w - 60, top + 8);
  const last = state.steps[state.steps.length - 1];
  if (last) {
    $('last-step').textContent = `step ${last.step}: ${last.prefill} prefill + ${last.decode} decode tokens, ` +
      `${last.seqs} sequences, ${last.path} path, ${last.ms.toFixed(2)} ms` +
      (s.steps_dropped ? ` · ${s.steps_dropped} steps not drawn` : '');
  }
}

// ---- sparklines ---------------------------------------------------------------

function spark(id, series, colours, unit) {
  const { g, w, h } = canvas(id);
  const now = state.spark.length ? state.spark[state.spark.length - 1].t : 0;
  const max = Math.max(1e-9, ...state.spark.flatMap((p) => series.map((k) => p[k])));
  series.forEach((k, j) => {
    g.strokeStyle = colours[j];
    g.beginPath();
    state.spark.forEach((p, i) => {
      const x = w - ((now - p.t) / SPARK_MS) * w, yy = h - 4 - (p[k] / max) * (h - 14);
      if (i) g.lineTo(x, yy); else g.moveTo(x, yy);
    });
    g.stroke();
  });
  g.fillStyle = css('--dim');
  g.fillText(`${max.toFixed(max < 10 ? 1 : 0)} ${unit}`, 4, 10);
}

function drawSparks(s, tps) {
  const lat = s.latency || {};
  state.spark.push({ t: s.time_ms, tps, ttft50: lat.ttft_p50_ms || 0, ttft99: lat.ttft_p99_ms || 0,
    itl50: lat.itl_p50_ms || 0, itl99: lat.itl_p99_ms || 0 });
  while (state.spark.length && state.spark[0].t < s.time_ms - SPARK_MS) state.spark.shift();
  spark('sp-tps', ['tps'], [css('--decode')], 'tok/s');
  spark('sp-ttft', ['ttft50', 'ttft99'], [css('--hit'), css('--prefill')], 'ms');
  spark('sp-itl', ['itl50', 'itl99'], [css('--hit'), css('--prefill')], 'ms');
  $('tps-now').textContent = fmt(tps, 1);
  $('ttft-now').textContent = `${fmt(lat.ttft_p50_ms, 0)} · ${fmt(lat.ttft_p99_ms, 0)} ms (${lat.ttft_n || 0} in the last minute)`;
  $('itl-now').textContent = `${fmt(lat.itl_p50_ms, 1)} · ${fmt(lat.itl_p99_ms, 1)} ms`;
}

// ---- requests -----------------------------------------------------------------

function drawRequests(s) {
  const body = $('requests').tBodies[0];
  const rows = s.requests.map((r) => {
    const tr = document.createElement('tr');
    const cells = [r.id + (r.seq ? '.' + r.seq : ''), r.state, r.prompt, r.cached, r.generated, r.blocks,
      fmt(r.ttft_ms, 0), fmt(r.tokens_per_s, 1), fmt(r.age_ms / 1000, 1)];
    cells.forEach((v, i) => {
      const td = document.createElement('td');
      td.textContent = v;
      if (i === 1) td.className = 'st-' + r.state;
      tr.appendChild(td);
    });
    return tr;
  });
  body.replaceChildren(...rows);
  $('req-count').textContent = `${s.requests_total} live` + (s.requests_total > s.requests.length ? ` (first ${s.requests.length} shown)` : '');
}

// ---- one snapshot -------------------------------------------------------------

function onSnapshot(s) {
  const i = s.info, prev = state.prev;
  $('info').textContent = `${i.model} · ${i.device} · ${i.threads} threads · KV cache ${mib(i.kv_cache_bytes)} ` +
    `(${i.kv_blocks} blocks × ${i.block_size} tokens) · ` +
    (i.state_slots > 0 ? `recurrent state ${mib(i.state_bytes)} (${i.state_slots_used} of ${i.state_slots} slots, ` +
      `${i.state_snapshots_used} of ${i.state_snapshots} prefix snapshots) · ` : '') +
    `budget ${i.max_batch_tokens} tokens, ${i.max_seqs} sequences · ` +
    `up ${duration(i.uptime_s)} · tram ${i.version} · weights read at ${i.weight_gbps.toFixed(1)} GB/s` +
    (i.memory_read_gbps > 0 ? ` (${Math.round(100 * i.weight_gbps / i.memory_read_gbps)} % of ${i.memory_read_gbps.toFixed(1)})` : '') +
    ` · step target ${i.step_target_ms.toFixed(0)} ms, ${i.prefill_budget} prompt tokens a step`;
  $('q-running').textContent = s.queues.running;
  $('q-waiting').textContent = s.queues.waiting;
  $('q-preempted').textContent = s.queues.preempted;
  $('steps').textContent = s.totals.steps;
  $('events').textContent = `${s.totals.preemptions} · ${s.totals.prefix_hit_blocks}`;
  let tps = 0;
  if (prev && s.time_ms > prev.time_ms) tps = (s.totals.generation_tokens - prev.totals.generation_tokens) * 1000 / (s.time_ms - prev.time_ms);
  $('tps').textContent = fmt(tps, 1);
  drawBlocks(s);
  drawTimeline(s);
  drawSparks(s, tps);
  drawRequests(s);
  state.prev = s;
  document.body.dataset.seq = s.seq;
  document.body.dataset.time = s.time_ms;
}

connect();
