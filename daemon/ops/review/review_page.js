// The review page: the record's crossings (GET /api/crossings), their snapshots (/snapshots/<path>) and
// clips (/clips/<path>), counts per hour or shift (GET /api/counts) as an inline SVG chart. The filters
// live in the page's URL, so a view, or one crossing (`open`), can be sent as a link.
'use strict';

const PRE_ROLL_S = 3;   // the clip starts playing this long before the crossing
const BOX_SHOWN_S = 0.5; // the part's box is drawn this close to the crossing's moment (dashed elsewhere)
const PAGE = 50;
const FILTERS = ['camera', 'line', 'label', 'direction', 'since', 'until'];
const SVG = 'http://www.w3.org/2000/svg';
const state = { camera: '', line: '', label: '', direction: '', since: '', until: '', bucket: '1h', open: '' };
let next = null;
let shown = [];

const $ = (selector) => document.querySelector(selector);

function el(tag, attrs = {}, text = '') {
  const node = tag.startsWith('svg:') ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

function query(names, extra = {}) {
  const q = new URLSearchParams();
  for (const n of names) if (state[n]) q.set(n, state[n]);
  for (const [k, v] of Object.entries(extra)) if (v !== null && v !== '') q.set(k, v);
  return q.toString();
}

async function getJSON(url) {
  const r = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error((body.problems || [r.status + ' ' + r.statusText]).join('; '));
  return body;
}

function readURL() {
  const q = new URLSearchParams(location.search);
  for (const k of Object.keys(state)) state[k] = q.get(k) || (k === 'bucket' ? '1h' : '');
}

function writeURL() {
  history.replaceState(null, '', '/review?' + query([...FILTERS, 'open'], { bucket: state.bucket === '1h' ? '' : state.bucket }));
}

function shareLink(c) {
  const q = new URLSearchParams({ camera: c.camera, line: c.line, since: c.at_ms, until: c.at_ms + 1, open: c.id });
  return location.origin + '/review?' + q.toString();
}

function localInput(ms) { // ms -> the datetime-local input's value (local time)
  if (!ms) return '';
  const d = new Date(Number(ms));
  return new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
}

function showFilters() {
  const form = $('#filters');
  form.label.value = state.label;
  form.direction.value = state.direction;
  form.since.value = localInput(state.since);
  form.until.value = localInput(state.until);
  $('#bucket').value = state.bucket;
  for (const b of document.querySelectorAll('#lines button')) {
    b.setAttribute('aria-pressed', String(b.dataset.camera === state.camera && b.dataset.line === state.line));
  }
}

async function loadLines() {
  const { lines } = await getJSON('/api/crossings/lines');
  const box = $('#lines');
  box.replaceChildren();
  const all = el('button', { type: 'button', class: 'line-filter', 'data-camera': '', 'data-line': '' }, 'all lines');
  box.append(all);
  for (const { camera, line } of lines) {
    box.append(el('button', { type: 'button', class: 'line-filter', 'data-camera': camera, 'data-line': line }, `${camera} · ${line}`));
  }
  for (const b of box.querySelectorAll('button')) {
    b.addEventListener('click', () => { state.camera = b.dataset.camera; state.line = b.dataset.line; state.open = ''; refresh(); });
  }
}

function row(c) {
  const tr = el('tr', { class: 'crossing', 'data-id': c.id, 'data-line': c.line, 'data-camera': c.camera, tabindex: '0' });
  const thumb = el('td');
  if (c.snapshot) thumb.append(el('img', { class: 'thumb', loading: 'lazy', alt: `${c.label} on ${c.line}`, src: '/snapshots/' + pathURL(c.snapshot) }));
  tr.append(thumb, el('td', { class: 'time' }, new Date(c.at_ms).toLocaleString()));
  for (const v of [c.camera, c.line, c.direction, c.label, String(c.track), String(c.count)]) tr.append(el('td', {}, v));
  const link = el('a', { class: 'share', href: shareLink(c), title: 'a link to this crossing' }, 'link');
  link.addEventListener('click', (e) => e.stopPropagation());
  const cell = el('td');
  cell.append(link);
  tr.append(cell);
  tr.addEventListener('click', () => openCrossing(c));
  tr.addEventListener('keydown', (e) => { if (e.key === 'Enter') openCrossing(c); });
  return tr;
}

function pathURL(path) { return path.split('/').map(encodeURIComponent).join('/'); }

async function loadCrossings(more) {
  const data = await getJSON('/api/crossings?' + query(FILTERS, { limit: PAGE, cursor: more ? next : '' }));
  const body = $('#crossings');
  if (!more) { body.replaceChildren(); shown = []; }
  for (const c of data.crossings) body.append(row(c));
  shown = shown.concat(data.crossings);
  next = data.next;
  $('#more').hidden = !next;
  $('#status').textContent = `${shown.length} crossing${shown.length === 1 ? '' : 's'}${next ? ' (more below)' : ''}`;
}

function overlay(c, w, h) {
  const svg = el('svg:svg', { viewBox: `0 0 ${w} ${h}`, preserveAspectRatio: 'xMidYMid meet', class: 'overlay' });
  if (c.line_xy) {
    const [[x1, y1], [x2, y2]] = c.line_xy;
    svg.append(el('svg:line', { class: 'line', x1: x1 * w, y1: y1 * h, x2: x2 * w, y2: y2 * h }));
  }
  if (c.box) {
    const sx = c.w ? w / c.w : 1;
    const sy = c.h ? h / c.h : 1;
    const [a, b, d, e] = c.box;
    svg.append(el('svg:rect', { class: 'box', x: a * sx, y: b * sy, width: (d - a) * sx, height: (e - b) * sy }));
  }
  return svg;
}

function openCrossing(c) {
  state.open = c.id;
  writeURL();
  for (const tr of document.querySelectorAll('tr.crossing')) tr.classList.toggle('open', tr.dataset.id === c.id);
  $('#open-title').textContent = `${c.label} ${c.direction} on ${c.camera} · ${c.line}, ${new Date(c.at_ms).toLocaleString()}`;
  const player = $('#player');
  player.replaceChildren();
  const w = c.w || 1280;
  const h = c.h || 720;
  if (c.clip) {
    const video = el('video', { controls: '', muted: '', playsinline: '', preload: 'auto' });
    video.muted = true;
    const offset = (c.clip_offset_ms || 0) / 1000;
    video.addEventListener('loadedmetadata', () => {
      video.currentTime = Math.max(0, offset - PRE_ROLL_S);
      video.play().catch(() => {}); // autoplay refused: the controls still play it
    }, { once: true });
    video.addEventListener('timeupdate', () => {
      const box = player.querySelector('.box');
      if (box) box.classList.toggle('away', Math.abs(video.currentTime - offset) > BOX_SHOWN_S);
    });
    video.src = '/clips/' + pathURL(c.clip);
    player.append(video, overlay(c, w, h));
  } else if (c.snapshot) {
    player.append(el('img', { src: '/snapshots/' + pathURL(c.snapshot), alt: 'snapshot' }), overlay(c, w, h));
  } else {
    player.append(el('p', {}, 'no clip and no snapshot recorded for this crossing'));
  }
  const facts = $('#facts');
  facts.replaceChildren();
  const eta = c.eta ? Object.entries(c.eta).map(([g, ms]) => `${g} ${new Date(ms).toLocaleTimeString()}`).join(', ') : '–';
  const rows = [['track', c.track], ['count', c.count], ['score', c.score.toFixed(2)],
    ['speed', c.speed_mm_s != null ? `${c.speed_mm_s.toFixed(0)} mm/s` : (c.speed_px_s != null ? `${c.speed_px_s.toFixed(0)} px/s` : '–')],
    ['gate ETAs', eta], ['clip', c.clip ? `${c.clip} at ${(c.clip_offset_ms / 1000).toFixed(1)} s` : '–'],
    ['link', shareLink(c)]];
  for (const [k, v] of rows) facts.append(el('span', {}, k), el('span', {}, String(v)));
  window.reviewOpen = c;
}

const BUCKET_MS = { '15m': 900000, '1h': 3600000, shift: 8 * 3600000 };

async function loadCounts() {
  const span = state.bucket === 'shift' ? 7 * 86400000 : 86400000;
  const until = Number(state.until) || Date.now();
  const since = Number(state.since) || until - span;
  const data = await getJSON('/api/counts?' + query(['camera', 'line', 'label', 'direction'], { since, until, bucket: state.bucket }));
  drawChart(data.buckets, since, until + BUCKET_MS[state.bucket]); // room for the last bucket's bars
}

function drawChart(buckets, since, until) { // bars at their time over [since, until): in, then out
  const W = 600, H = 180, top = 12, bottom = 20;
  const svg = el('svg:svg', { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'counts' });
  const max = Math.max(1, ...buckets.map((b) => Math.max(b.in, b.out)));
  const x = (ms) => ((ms - since) / Math.max(1, until - since)) * W;
  const bar = Math.max(1.5, (x(since + BUCKET_MS[state.bucket]) - x(since)) / 2 - 0.5);
  for (const b of buckets) {
    for (const [k, dx] of [['in', 0], ['out', bar]]) {
      const hgt = (b[k] / max) * (H - top - bottom);
      const r = el('svg:rect', { class: `bar ${k}`, x: Math.max(0, x(b.start)) + dx, y: H - bottom - hgt, width: bar, height: hgt, 'data-start': b.start, 'data-n': b[k] });
      r.append(el('svg:title', {}, `${new Date(b.start).toLocaleString()}: ${b[k]} ${k}`));
      svg.append(r);
    }
  }
  for (let i = 0; i <= 4; i++) { // five time marks along the axis
    const t = new Date(since + (i / 4) * (until - since));
    const label = state.bucket === 'shift' ? t.toLocaleDateString(undefined, { weekday: 'short' }) + ' ' + t.toTimeString().slice(0, 5) : t.toTimeString().slice(0, 5);
    svg.append(el('svg:text', { x: Math.min(W - 50, (i / 4) * W + 2), y: H - 5 }, label));
  }
  svg.append(el('svg:text', { x: 2, y: top - 2 }, `${max} per bucket`));
  $('#chart').replaceChildren(svg);
}

async function refresh() {
  writeURL();
  showFilters();
  $('#problem').textContent = '';
  try {
    await Promise.all([loadCrossings(false), loadCounts()]);
    if (state.open) {
      const c = shown.find((x) => x.id === state.open);
      if (c) openCrossing(c);
    }
  } catch (err) {
    $('#problem').textContent = String(err.message || err);
  }
}

$('#filters').addEventListener('submit', (e) => {
  e.preventDefault();
  const form = e.target;
  state.label = form.label.value.trim();
  state.direction = form.direction.value;
  state.since = form.since.value ? String(new Date(form.since.value).getTime()) : '';
  state.until = form.until.value ? String(new Date(form.until.value).getTime()) : '';
  state.open = '';
  refresh();
});
$('#bucket').addEventListener('change', (e) => { state.bucket = e.target.value; writeURL(); loadCounts().catch((err) => { $('#problem').textContent = String(err.message || err); }); });
$('#more').addEventListener('click', () => loadCrossings(true).catch((err) => { $('#problem').textContent = String(err.message || err); }));

readURL();
loadLines().then(refresh, (err) => { $('#problem').textContent = String(err.message || err); });
