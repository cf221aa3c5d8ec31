// brasa dashboard: chat, model picker, sampling settings, live telemetry. Talks to this server
// only (the page's Content-Security-Policy forbids anything else). Plots are drawn on canvas.
'use strict';

const STRINGS = {
  en: {
    subtitle: 'local inference dashboard', model: 'Model', load: 'Load', unload: 'Unload',
    apiKey: 'API key', apiKeyHint: 'This server needs an API key.',
    chat: 'Chat', newChat: 'New chat', emptyChat: 'Send a message to start.',
    placeholder: 'Type a message…', send: 'Send', stop: 'Stop',
    sampling: 'Sampling', temperature: 'Temperature', topP: 'Top-p', topK: 'Top-k', minP: 'Min-p',
    maxTokens: 'Max tokens', seed: 'Seed', random: 'random', presence: 'Presence penalty',
    frequency: 'Frequency penalty', stopStrings: 'Stop strings (comma-separated)', system: 'System prompt',
    tokPerSec: 'tokens/s', msPerTok: 'ms/token', promptTokPerSec: 'prompt tok/s', ttft: 'time to first token',
    queue: 'queue', plotTokS: 'Tokens per second', plotMsTok: 'Milliseconds per token', memory: 'Memory',
    lastGen: 'Last generation', promptTokens: 'Prompt tokens', genTokens: 'Generated tokens', finish: 'Finish',
    timeline: 'Model lifecycle', you: 'you', assistant: 'assistant', error: 'error',
    connected: 'live', reconnecting: 'reconnecting…', idle: 'idle', generating: 'generating',
    waiting: 'waiting in queue', noData: 'no data yet', now: 'now', used: 'used', of: 'of',
    memResident: 'resident memory (CPU)', memDevice: 'device memory', noModel: 'no model',
    st_loading: 'loading', st_ready: 'ready', st_unloading: 'unloading', st_error: 'error', st_unloaded: 'unloaded',
    fin_stop: 'stop', fin_length: 'length', fin_cancelled: 'cancelled',
  },
  pt: {
    subtitle: 'painel de inferência local', model: 'Modelo', load: 'Carregar', unload: 'Descarregar',
    apiKey: 'Chave da API', apiKeyHint: 'Este servidor exige uma chave da API.',
    chat: 'Conversa', newChat: 'Nova conversa', emptyChat: 'Envie uma mensagem para começar.',
    placeholder: 'Escreva uma mensagem…', send: 'Enviar', stop: 'Parar',
    sampling: 'Amostragem', temperature: 'Temperatura', topP: 'Top-p', topK: 'Top-k', minP: 'Min-p',
    maxTokens: 'Máx. de tokens', seed: 'Semente', random: 'aleatória', presence: 'Penalidade de presença',
    frequency: 'Penalidade de frequência', stopStrings: 'Sequências de parada (separadas por vírgula)',
    system: 'Prompt de sistema',
    tokPerSec: 'tokens/s', msPerTok: 'ms/token', promptTokPerSec: 'tok/s do prompt', ttft: 'tempo até o 1º token',
    queue: 'fila', plotTokS: 'Tokens por segundo', plotMsTok: 'Milissegundos por token', memory: 'Memória',
    lastGen: 'Última geração', promptTokens: 'Tokens do prompt', genTokens: 'Tokens gerados', finish: 'Término',
    timeline: 'Ciclo de vida do modelo', you: 'você', assistant: 'assistente', error: 'erro',
    connected: 'ao vivo', reconnecting: 'reconectando…', idle: 'ocioso', generating: 'gerando',
    waiting: 'aguardando na fila', noData: 'sem dados ainda', now: 'agora', used: 'em uso', of: 'de',
    memResident: 'memória residente (CPU)', memDevice: 'memória do dispositivo', noModel: 'nenhum modelo',
    st_loading: 'carregando', st_ready: 'pronto', st_unloading: 'descarregando', st_error: 'erro',
    st_unloaded: 'descarregado',
    fin_stop: 'parada', fin_length: 'limite', fin_cancelled: 'cancelada',
  },
};

const $ = (id) => document.getElementById(id);
const state = {
  lang: 'en',
  tele: null,
  history: [],
  abort: null,
  models: [],
  connOk: false,
};

// ---- language ----

function t(key) {
  return (STRINGS[state.lang] && STRINGS[state.lang][key]) || STRINGS.en[key] || key;
}

function applyLang() {
  document.documentElement.lang = state.lang === 'pt' ? 'pt-BR' : 'en';
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const b of document.querySelectorAll('.lang button')) b.setAttribute('aria-pressed', String(b.dataset.lang === state.lang));
  for (const el of document.querySelectorAll('.msg .who')) el.textContent = t(el.dataset.role);
  render();
}

function setLang(lang) {
  state.lang = lang;
  try { localStorage.setItem('brasa.lang', lang); } catch (e) { /* private mode */ }
  applyLang();
}

function initialLang() {
  let saved = null;
  try { saved = localStorage.getItem('brasa.lang'); } catch (e) { /* ignore */ }
  if (saved === 'en' || saved === 'pt') return saved;
  return (navigator.language || '').toLowerCase().startsWith('pt') ? 'pt' : 'en';
}

// ---- HTTP ----

function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = $('api-key').value || sessionStorage.getItem('brasa.key') || '';
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

async function api(path, body) {
  const r = await fetch(path, body === undefined ? { headers: headers() } : { method: 'POST', headers: headers(), body: JSON.stringify(body) });
  if (r.status === 401) $('key-row').classList.remove('hidden');
  const j = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((j.error && j.error.message) || r.statusText);
  return j;
}

// Reads a server-sent event stream from a fetch Response, calling onData for each data: line.
async function readSSE(resp, onData) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of ev.split('\n')) if (line.startsWith('data: ')) onData(line.slice(6));
    }
  }
}

// ---- formatting ----

function fmt(v, digits) {
  if (v === null || v === undefined || !isFinite(v)) return '–';
  return Number(v).toLocaleString(state.lang === 'pt' ? 'pt-BR' : 'en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

function fmtBytes(n) {
  if (!n) return '0';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return fmt(n, i ? 1 : 0) + ' ' + u[i];
}

function fmtTime(ts) {
  return new Date(ts * 1000).toLocaleTimeString(state.lang === 'pt' ? 'pt-BR' : 'en-GB', { hour12: false });
}

// ---- canvas drawing ----

function setupCanvas(c) {
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth || c.width, h = c.clientHeight || c.height;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
  }
  const g = c.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  return { g, w, h };
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

const css = (name) => getComputedStyle(document.documentElement).getPropertyValue(name).trim();

// A time series over the last `span` seconds: area + line, grid, value labels.
function drawSeries(c, points, key, color, unit, span = 120) {
  const { g, w, h } = setupCanvas(c);
  const padL = 44, padR = 8, padT = 8, padB = 18;
  const now = points.length ? points[points.length - 1].t : Date.now() / 1000;
  const vis = points.filter((p) => p.t >= now - span);
  const vals = vis.map((p) => p[key]).filter((v) => v !== null && v !== undefined);
  const max = niceMax(Math.max(0, ...vals) * 1.1);
  const X = (ts) => padL + ((ts - (now - span)) / span) * (w - padL - padR);
  const Y = (v) => padT + (1 - v / max) * (h - padT - padB);
  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = css('--line');
  g.fillStyle = css('--muted');
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4, y = Math.round(Y(v)) + 0.5;
    g.beginPath(); g.moveTo(padL, y); g.lineTo(w - padR, y); g.stroke();
    g.textAlign = 'right'; g.textBaseline = 'middle';
    g.fillText(fmt(v, v < 10 && max <= 10 ? 1 : 0), padL - 6, y);
  }
  g.textAlign = 'center'; g.textBaseline = 'top';
  for (const s of [span, span / 2, 0]) g.fillText(s ? '−' + s + ' s' : t('now'), Math.min(Math.max(X(now - s), padL + 14), w - padR - 14), h - padB + 4);
  c.dataset.points = String(vals.length);
  c.dataset.last = vals.length ? String(vals[vals.length - 1]) : '';
  if (!vals.length) {
    g.textBaseline = 'middle';
    g.fillText(t('noData'), (padL + w) / 2, h / 2 - 6);
    return;
  }
  // segments break where a point has no value (no token in that second)
  const segs = [];
  let cur = [];
  for (const p of vis) {
    const v = p[key];
    if (v === null || v === undefined) { if (cur.length) segs.push(cur); cur = []; } else cur.push([X(p.t), Y(v)]);
  }
  if (cur.length) segs.push(cur);
  const grad = g.createLinearGradient(0, padT, 0, h - padB);
  grad.addColorStop(0, color + '66');
  grad.addColorStop(1, color + '05');
  for (const s of segs) {
    g.beginPath();
    g.moveTo(s[0][0], Y(0));
    for (const [x, y] of s) g.lineTo(x, y);
    g.lineTo(s[s.length - 1][0], Y(0));
    g.closePath();
    g.fillStyle = grad;
    g.fill();
    g.beginPath();
    s.forEach(([x, y], i) => (i ? g.lineTo(x, y) : g.moveTo(x, y)));
    g.strokeStyle = color;
    g.lineWidth = 2;
    g.stroke();
    if (s.length === 1) { g.fillStyle = color; g.beginPath(); g.arc(s[0][0], s[0][1], 2.5, 0, 7); g.fill(); }
  }
  const last = vals[vals.length - 1];
  g.fillStyle = color; g.textAlign = 'right'; g.textBaseline = 'top';
  g.font = 'bold 12px system-ui, sans-serif';
  g.fillText(fmt(last, 1) + ' ' + unit, w - padR - 2, padT + 2);
}

function drawGauge(c, used, total) {
  const { g, w, h } = setupCanvas(c);
  const cx = w / 2, cy = h - 16, r = Math.min(w / 2 - 14, h - 28);
  const frac = total ? Math.min(1, used / total) : 0;
  g.lineCap = 'round';
  g.lineWidth = 16;
  g.strokeStyle = css('--panel2');
  g.beginPath(); g.arc(cx, cy, r, Math.PI, 2 * Math.PI); g.stroke();
  const col = frac > 0.9 ? css('--red') : frac > 0.7 ? css('--yellow') : css('--ember');
  g.strokeStyle = col;
  g.beginPath(); g.arc(cx, cy, r, Math.PI, Math.PI + Math.max(0.01, frac) * Math.PI); g.stroke();
  g.fillStyle = css('--text');
  g.font = 'bold 20px system-ui, sans-serif';
  g.textAlign = 'center'; g.textBaseline = 'alphabetic';
  g.fillText(fmt(frac * 100, 1) + ' %', cx, cy - 6);
  c.dataset.fraction = String(frac);
}

const STATE_COLORS = { ready: '--green', loading: '--yellow', unloading: '--yellow', error: '--red', unloaded: '--line' };

// The lifecycle as a colored band: one segment per state, from the first event to now.
function drawBand(c, events, nowTs) {
  const { g, w, h } = setupCanvas(c);
  if (!events.length) return;
  const t0 = events[0].t, span = Math.max(1, nowTs - t0);
  const X = (ts) => ((ts - t0) / span) * w;
  events.forEach((e, i) => {
    const end = i + 1 < events.length ? events[i + 1].t : nowTs;
    g.fillStyle = css(STATE_COLORS[e.state] || '--line');
    g.fillRect(X(e.t), 4, Math.max(2, X(end) - X(e.t)), h - 8);
  });
}

// ---- rendering telemetry ----

function render() {
  const d = state.tele;
  const ms = $('model-state');
  const st = d ? d.model.state : 'unloaded';
  ms.dataset.state = st;
  ms.textContent = d && d.model.id ? `${d.model.id} · ${t('st_' + st)}` : t('noModel');
  $('conn').textContent = state.connOk ? t('connected') : t('reconnecting');
  $('conn').className = 'conn ' + (state.connOk ? 'ok' : 'bad');
  if (!d) return;
  const cur = d.current || {};
  const last = d.last || {};
  const series = d.series || [];
  const lastPt = series.length ? series[series.length - 1] : null;
  $('v-toks').textContent = cur.active ? fmt(cur.tok_s, 1) : lastPt ? fmt(lastPt.tok_s, 1) : '–';
  $('v-mspt').textContent = fmt(cur.active ? cur.ms_per_token : last.ms_per_token, 2);
  $('v-ptoks').textContent = fmt(cur.active && cur.prompt_tok_s != null ? cur.prompt_tok_s : last.prompt_tok_s, 0);
  $('v-ttft').textContent = (cur.active && cur.ttft_ms != null) || last.ttft_ms != null
    ? fmt(cur.active && cur.ttft_ms != null ? cur.ttft_ms : last.ttft_ms, 0) + ' ms' : '–';
  $('v-queue').textContent = String(d.queue.waiting + (d.queue.active ? 1 : 0));
  const gs = $('gen-status');
  gs.textContent = cur.active ? `${t('generating')} · ${cur.n_gen} tok` : t('idle');
  gs.className = 'status' + (cur.active ? ' on' : '');
  drawSeries($('plot-toks'), series, 'tok_s', css('--ember'), 'tok/s');
  drawSeries($('plot-mspt'), series, 'ms_per_token', css('--blue'), 'ms');
  drawGauge($('gauge'), d.memory.used, d.memory.total);
  $('mem-text').textContent = `${fmtBytes(d.memory.used)} ${t('of')} ${fmtBytes(d.memory.total)}`;
  $('mem-kind').textContent = d.memory.kind === 'gpu' ? `${t('memDevice')} · ${d.memory.device || 'GPU'}` : t('memResident');
  if (d.last) {
    $('l-np').textContent = fmt(last.n_prompt, 0);
    $('l-ng').textContent = fmt(last.n_gen, 0);
    $('l-toks').textContent = fmt(last.tok_s, 1);
    $('l-mspt').textContent = fmt(last.ms_per_token, 2);
    $('l-ptoks').textContent = fmt(last.prompt_tok_s, 0);
    $('l-ttft').textContent = last.ttft_ms != null ? fmt(last.ttft_ms, 0) + ' ms' : '–';
    $('l-finish').textContent = last.finish ? t('fin_' + last.finish) : '–';
  }
  const tl = $('timeline');
  tl.textContent = '';
  for (const e of [...d.timeline].reverse()) {
    const li = document.createElement('li');
    const time = document.createElement('span');
    time.className = 'time';
    time.textContent = fmtTime(e.t);
    const s = document.createElement('span');
    s.className = 'state';
    s.dataset.state = e.state;
    s.textContent = t('st_' + e.state);
    const m = document.createElement('span');
    m.className = 'msgtext';
    m.textContent = e.model + (e.message ? ' — ' + e.message : '');
    m.title = m.textContent;
    li.append(time, s, m);
    tl.append(li);
  }
  drawBand($('timeline-band'), d.timeline, d.time);
  syncPicker();
}

function syncPicker() {
  const sel = $('model-select');
  const ids = state.models.map((m) => m.id);
  if (sel.options.length !== ids.length || [...sel.options].some((o, i) => o.value !== ids[i])) {
    sel.textContent = '';
    for (const id of ids) {
      const o = document.createElement('option');
      o.value = id;
      o.textContent = id;
      sel.append(o);
    }
    if (state.tele && state.tele.model.id) sel.value = state.tele.model.id;
  }
}

async function telemetryLoop() {
  for (;;) {
    try {
      const r = await fetch('/api/telemetry/stream', { headers: headers() });
      if (r.status === 401) $('key-row').classList.remove('hidden');
      if (!r.ok) throw new Error(r.statusText);
      state.connOk = true;
      await readSSE(r, (data) => {
        try { state.tele = JSON.parse(data); } catch (e) { return; }
        render();
      });
    } catch (e) { /* fall through to retry */ }
    state.connOk = false;
    render();
    await new Promise((res) => setTimeout(res, 1500));
  }
}

async function refreshModels() {
  try {
    const j = await api('/api/models');
    state.models = j.models;
    syncPicker();
    if (j.current && j.current.id) $('model-select').value = j.current.id;
  } catch (e) { /* shown by the connection badge */ }
}

// ---- chat ----

function addMsg(role, text) {
  $('empty-chat').classList.add('hidden');
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  const who = document.createElement('span');
  who.className = 'who';
  who.dataset.role = role === 'user' ? 'you' : role === 'error' ? 'error' : 'assistant';
  who.textContent = t(who.dataset.role);
  const body = document.createElement('span');
  body.className = 'text';
  body.textContent = text;
  div.append(who, body);
  $('messages').append(div);
  $('messages').scrollTop = $('messages').scrollHeight;
  return div;
}

function samplingBody() {
  const num = (id) => { const v = $(id).value; return v === '' ? undefined : Number(v); };
  const b = {
    temperature: num('s-temperature'), top_p: num('s-top_p'), top_k: num('s-top_k'), min_p: num('s-min_p'),
    max_tokens: num('s-max_tokens'), seed: num('s-seed'), presence_penalty: num('s-presence_penalty'),
    frequency_penalty: num('s-frequency_penalty'),
  };
  const stop = $('s-stop').value.split(',').map((s) => s.trim()).filter(Boolean);
  if (stop.length) b.stop = stop;
  for (const k of Object.keys(b)) if (b[k] === undefined || Number.isNaN(b[k])) delete b[k];
  return b;
}

function setBusy(busy) {
  $('send-btn').classList.toggle('hidden', busy);
  $('stop-btn').classList.toggle('hidden', !busy);
}

async function send(text) {
  state.history.push({ role: 'user', content: text });
  addMsg('user', text);
  const div = addMsg('assistant', '');
  div.classList.add('streaming');
  const out = div.querySelector('.text');
  const msgs = [];
  if ($('s-system').value.trim()) msgs.push({ role: 'system', content: $('s-system').value.trim() });
  msgs.push(...state.history);
  const body = { ...samplingBody(), messages: msgs, stream: true };
  const sel = $('model-select').value;
  if (sel) body.model = sel;
  state.abort = new AbortController();
  setBusy(true);
  let reply = '';
  try {
    const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(), body: JSON.stringify(body), signal: state.abort.signal });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      if (r.status === 401) $('key-row').classList.remove('hidden');
      throw new Error((j.error && j.error.message) || r.statusText);
    }
    await readSSE(r, (data) => {
      if (data === '[DONE]') return;
      const j = JSON.parse(data);
      if (j.error) throw new Error(j.error.message);
      const delta = j.choices && j.choices[0] && j.choices[0].delta;
      if (delta && delta.content) {
        reply += delta.content;
        out.textContent = reply;
        $('messages').scrollTop = $('messages').scrollHeight;
      }
    });
    state.history.push({ role: 'assistant', content: reply });
  } catch (e) {
    if (e.name !== 'AbortError') addMsg('error', e.message);
    if (reply) state.history.push({ role: 'assistant', content: reply });
    else state.history.pop();
  } finally {
    div.classList.remove('streaming');
    div.dataset.done = '1';
    state.abort = null;
    setBusy(false);
  }
}

// Sampling settings are remembered across reloads, like the language.
function restoreSettings() {
  let saved = {};
  try { saved = JSON.parse(localStorage.getItem('brasa.settings') || '{}'); } catch (e) { /* ignore */ }
  for (const el of document.querySelectorAll('.settings input')) {
    if (typeof saved[el.id] === 'string') el.value = saved[el.id];
    el.addEventListener('change', () => {
      const all = {};
      for (const e of document.querySelectorAll('.settings input')) all[e.id] = e.value;
      try { localStorage.setItem('brasa.settings', JSON.stringify(all)); } catch (e) { /* ignore */ }
    });
  }
}

// ---- wiring ----

function init() {
  state.lang = initialLang();
  restoreSettings();
  try { $('api-key').value = sessionStorage.getItem('brasa.key') || ''; } catch (e) { /* ignore */ }
  $('api-key').addEventListener('change', () => {
    sessionStorage.setItem('brasa.key', $('api-key').value);
    refreshModels();
  });
  for (const b of document.querySelectorAll('.lang button')) b.addEventListener('click', () => setLang(b.dataset.lang));
  $('chat-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const text = $('prompt').value.trim();
    if (!text || state.abort) return;
    $('prompt').value = '';
    send(text);
  });
  $('prompt').addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('chat-form').requestSubmit(); }
  });
  $('stop-btn').addEventListener('click', () => state.abort && state.abort.abort());
  $('clear-btn').addEventListener('click', () => {
    state.history = [];
    for (const m of document.querySelectorAll('.msg')) m.remove();
    $('empty-chat').classList.remove('hidden');
  });
  $('load-btn').addEventListener('click', async () => {
    try { await api('/api/models/load', { model: $('model-select').value }); } catch (e) { addMsg('error', e.message); }
  });
  $('unload-btn').addEventListener('click', async () => {
    try { await api('/api/models/unload', {}); } catch (e) { addMsg('error', e.message); }
  });
  window.addEventListener('resize', render);
  applyLang();
  refreshModels();
  telemetryLoop();
}

document.addEventListener('DOMContentLoaded', init);
