// The live view: every camera's latest inferred frame (boxes and track ids drawn by the daemon),
// its counting lines drawn over it with their running counts, and the line editor
// (liveview_editor.js) per camera. Polls /api/cameras; each snapshot is fetched as it is shown.
"use strict";
const POLL_MS = 2000;
const EDITING_POLL_MS = 1000;
const cards = new Map();

// From the origin, never from the page's URL: a page opened as https://user:pass@host/ has the
// credentials in its URL, and fetch() refuses a URL that carries them (the browser sends the
// authorization it already has for the origin).
function here(path) {
  return new URL(path, window.location.origin).href;
}

function card(id) {
  let c = cards.get(id);
  if (c) return c;
  const root = document.createElement("section");
  root.className = "camera";
  root.dataset.camera = id;
  const title = document.createElement("h2");
  const name = document.createElement("span");
  name.textContent = id;
  const edit = document.createElement("button");
  edit.type = "button";
  edit.className = "edit-lines";
  edit.textContent = "Edit lines";
  edit.setAttribute("aria-expanded", "false");
  edit.setAttribute("aria-label", "edit the counting lines of " + id);
  title.append(name, edit);
  const stage = document.createElement("div");
  stage.className = "stage";
  const img = document.createElement("img");
  img.alt = "latest inferred frame of " + id;
  const overlay = document.createElementNS(SVG_NS, "svg");
  overlay.setAttribute("class", "overlay");
  overlay.setAttribute("preserveAspectRatio", "none");
  overlay.setAttribute("viewBox", "0 0 640 480");
  stage.append(img, overlay);
  const facts = document.createElement("div");
  facts.className = "facts";
  const fields = {};
  for (const [key, label] of [["state", "state"], ["fps", "fps"], ["latency", "latency"], ["model", "model"],
                              ["detections", "detections"], ["seq", "frame"]]) {
    const k = document.createElement("span"); k.textContent = label;
    const v = document.createElement("span"); v.className = "fact-" + key;
    facts.append(k, v); fields[key] = v;
  }
  const counts = document.createElement("div");
  counts.className = "counts";
  const last = document.createElement("div");
  last.className = "last";
  const panel = document.createElement("div");
  root.append(title, stage, counts, last, panel, facts);
  document.getElementById("cameras").append(root);
  c = {id, root, img, overlay, fields, counts, last, panel, url: null, busy: false, cam: null, editor: null,
       w: 640, h: 480};
  edit.addEventListener("click", () => {
    if (c.editor) {
      c.editor.close();
      c.editor = null;
      root.classList.remove("editing");
      edit.setAttribute("aria-expanded", "false");
      edit.textContent = "Edit lines";
      drawOverlay(c);
    } else {
      root.classList.add("editing");
      c.editor = new LineEditor(c);
      edit.setAttribute("aria-expanded", "true");
      edit.textContent = "Close editor";
    }
    schedule(0);
  });
  cards.set(id, c);
  return c;
}

// Each counting line as the snapshot draws it beside the line and tools/demo.py prints it:
// "<line> in <N> out <M>"; then the last crossing, "last washer -> reject1 in 2.8 s".
function showParts(c, cam) {
  const rows = (cam.lines || []).map((line) => {
    const row = document.createElement("div");
    row.className = "line-count";
    row.dataset.line = line.id;
    row.dataset.in = String(line.in);
    row.dataset.out = String(line.out);
    row.textContent = line.id + " in " + line.in + " out " + line.out;
    return row;
  });
  c.counts.replaceChildren(...rows);
  const x = cam.last_crossing;
  let text = "";
  if (x) {
    text = "last " + x.label + " (" + x.line + " " + x.direction + ")";
    if (x.gate !== null && x.eta_ms !== null) {
      text += " -> " + x.gate + " in " + ((x.eta_ms - x.at_ms) / 1000).toFixed(1) + " s";
    }
  }
  c.last.textContent = text;
}

// The running lines over the image (the editor draws its draft instead while it is open).
function drawOverlay(c) {
  c.overlay.setAttribute("viewBox", "0 0 " + c.w + " " + c.h);
  if (c.editor) {
    c.editor.draw();
    c.editor.renderStatus();  // each line's counts beside its name
    return;
  }
  const lines = c.cam ? c.cam.lines || [] : [];
  c.overlay.replaceChildren(...lines.map((line) => drawLine(c, line, {label: line.text, cls: "running-line"})));
}

async function refreshSnapshot(id, c) {
  if (c.busy) return;
  c.busy = true;
  try {
    const r = await fetch(here("/cameras/" + encodeURIComponent(id) + "/snapshot.jpg?lines=0"), {cache: "no-store"});
    if (!r.ok) return;
    const blob = await r.blob();
    const url = URL.createObjectURL(blob);
    c.img.onload = () => {
      if (c.url) URL.revokeObjectURL(c.url);
      c.url = url;
      c.root.dataset.snapshotSeq = r.headers.get("X-Beltsight-Seq") || "";
      c.root.dataset.snapshotCapturedMs = r.headers.get("X-Beltsight-Captured-Ms") || "";
      c.root.dataset.loaded = "1";
    };
    c.img.src = url;
  } catch (e) {
    c.root.dataset.error = String(e);
  } finally {
    c.busy = false;
  }
}

async function poll() {
  try {
    const r = await fetch(here("/api/cameras"), {cache: "no-store"});
    const data = await r.json();
    const listed = new Set(data.cameras.map((cam) => cam.id));
    for (const [id, c] of cards) {  // a camera removed live: its card goes (unless its editor is open)
      if (!listed.has(id) && !c.editor) { c.root.remove(); cards.delete(id); }
    }
    for (const cam of data.cameras) {
      const c = card(cam.id);
      c.cam = cam;
      if (cam.w && cam.h) { c.w = cam.w; c.h = cam.h; }
      c.fields.state.textContent = cam.state;
      c.fields.state.className = "fact-state state-" + cam.state;
      c.root.dataset.state = cam.state;
      c.fields.fps.textContent = (cam.fps || 0).toFixed(1);
      c.fields.latency.textContent = cam.latency_ms === null ? "–" : cam.latency_ms.toFixed(0) + " ms";
      c.fields.model.textContent = cam.model === null ? "–" : cam.model;
      c.fields.detections.textContent = cam.detections === null ? "–" : String(cam.detections);
      c.fields.seq.textContent = cam.seq === null ? "–" : String(cam.seq);
      showParts(c, cam);
      drawOverlay(c);
      if (cam.model !== null) refreshSnapshot(cam.id, c);
    }
    document.getElementById("status").textContent =
      data.cameras.length + " cameras, updated " + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("status").textContent = "daemon unreachable: " + e;
  }
}

// Polls every 2 s, every second while an editor is open (counts move as parts cross).
let timer = null;
function schedule(delay) {
  clearTimeout(timer);
  timer = setTimeout(async () => {
    await poll();
    const editing = [...cards.values()].some((c) => c.editor);
    schedule(editing ? EDITING_POLL_MS : POLL_MS);
  }, delay);
}
schedule(0);
