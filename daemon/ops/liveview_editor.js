// The line editor of the live view: per camera, on its current frame, place counting lines with two
// clicks or taps, drag their ends, flip their "in" direction, name them, add gates, and calibrate
// mm_per_px from a segment of known length. Nothing changes in the daemon until Apply
// (PUT /api/cameras/<id>/lines); Revert reloads what runs (GET). Apply sends the ETag of the lines it
// read as If-Match: when someone else changed the camera since, the daemon answers 412 with what runs
// now, which the editor loads and says so. Pointer Events throughout, so a mouse, a pen and a finger
// all work; the handles also move with the arrow keys.
"use strict";
const SVG_NS = "http://www.w3.org/2000/svg";
const KEY_STEP = 0.005;

function svgEl(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function htmlEl(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, String(v));
  }
  el.append(...children);
  return el;
}

function round4(v) {
  return Math.round(v * 10000) / 10000;
}

function clamp01(v) {
  return Math.min(1, Math.max(0, v));
}

// CSS pixels to the overlay's units (the source frame's pixels).
function unit(c) {
  const width = c.overlay.getBoundingClientRect().width;
  return width > 0 ? c.w / width : 1;
}

// A line (normalised start, end, direction) drawn in the frame's pixels: the line, an arrow from its
// middle towards "in" and a label beside the arrow.
function drawLine(c, line, opts) {
  const k = unit(c);
  const g = svgEl("g", {class: opts.cls, "data-line": line.id});
  const [x1, y1, x2, y2] = [line.start[0] * c.w, line.start[1] * c.h, line.end[0] * c.w, line.end[1] * c.h];
  const colour = opts.colour || "#ff0";
  g.append(svgEl("line", {x1, y1, x2, y2, stroke: "#000", "stroke-width": 5 * k, "stroke-opacity": 0.5}));
  g.append(svgEl("line", {x1, y1, x2, y2, stroke: colour, "stroke-width": 3 * k,
                          "stroke-dasharray": opts.dashed ? 8 * k + " " + 6 * k : "none"}));
  const dx = line.direction[0] * c.w, dy = line.direction[1] * c.h;
  const norm = Math.hypot(dx, dy) || 1;
  const [ux, uy] = [dx / norm, dy / norm];
  const [mx, my] = [(x1 + x2) / 2, (y1 + y2) / 2];
  const len = 34 * k;
  const [ax, ay] = [mx + ux * len, my + uy * len];
  g.append(svgEl("line", {x1: mx, y1: my, x2: ax, y2: ay, stroke: colour, "stroke-width": 3 * k}));
  const head = 9 * k;
  const points = [[ax + ux * head, ay + uy * head], [ax - uy * head * 0.7, ay + ux * head * 0.7],
                  [ax + uy * head * 0.7, ay - ux * head * 0.7]];
  g.append(svgEl("polygon", {points: points.map((p) => p.join(",")).join(" "), fill: colour, class: "arrow"}));
  const size = 13 * k;
  g.append(svgEl("text", {x: ax + ux * (head + 4 * k) - (ux < -0.3 ? 14 * k : 0),
                          y: ay + uy * (head + 4 * k) + (uy > 0.3 ? size : 0),
                          fill: colour, "font-size": size, "font-weight": "bold", class: "in-label"}, "in"));
  if (opts.label) {
    const tx = Math.min(c.w - 8 * size, Math.max(2 * k, mx - ux * len - 4 * size));
    const ty = Math.min(c.h - 4 * k, Math.max(size, my - uy * len));
    const text = svgEl("text", {x: tx, y: ty, fill: colour, "font-size": size, class: "count-label",
                                stroke: "#000", "stroke-width": 3 * k, "paint-order": "stroke"}, opts.label);
    g.append(text);
  }
  return g;
}

// The "in" direction of a line from a to b (normalised): its normal in the frame's pixels, on the
// side of `like` when given, else the side whose larger component is positive.
function normalOf(c, a, b, like) {
  const lx = (b[0] - a[0]) * c.w, ly = (b[1] - a[1]) * c.h;
  let nx = -ly, ny = lx;
  if (like) {
    if (nx * like[0] * c.w + ny * like[1] * c.h < 0) { nx = -nx; ny = -ny; }
  } else if ((Math.abs(nx) >= Math.abs(ny) ? nx : ny) < 0) { nx = -nx; ny = -ny; }
  const [dx, dy] = [nx / c.w, ny / c.h];
  const m = Math.max(Math.abs(dx), Math.abs(dy)) || 1;
  return [round4(dx / m), round4(dy / m)];
}

class LineEditor {
  constructor(c) {
    this.c = c;
    this.running = null;
    this.etag = null;  // the ETag of `running`, sent as If-Match by Apply
    this.draft = {mm_per_px: null, lines: []};
    this.mode = "idle";  // "line" or "measure": the next two clicks place one
    this.pending = null;  // the first point placed
    this.hover = null;
    this.measure = null;  // {start, end}: the calibration segment
    this.knownMm = "";
    this.selected = -1;
    this.drag = null;
    this.problems = [];
    this.message = "";
    this.focus = null;
    this.listeners = [];
    this.listen(c.overlay, "pointerdown", (e) => this.pointerDown(e));
    this.listen(c.overlay, "pointermove", (e) => this.pointerMove(e));
    this.listen(c.overlay, "pointerup", (e) => this.pointerUp(e));
    this.listen(c.overlay, "pointercancel", (e) => this.pointerUp(e));
    this.listen(c.overlay, "keydown", (e) => this.key(e));
    this.revert();
  }

  listen(target, type, fn) {
    target.addEventListener(type, fn);
    this.listeners.push([target, type, fn]);
  }

  close() {
    for (const [target, type, fn] of this.listeners) target.removeEventListener(type, fn);
    this.c.panel.replaceChildren();
    this.c.root.dataset.editor = "";
  }

  url() {
    return here("/api/cameras/" + encodeURIComponent(this.c.id) + "/lines");
  }

  // -- the daemon: GET what runs, PUT the draft ------------------------------------------------
  async revert() {
    this.setState("loading");
    try {
      const r = await fetch(this.url(), {cache: "no-store", credentials: "same-origin"});
      if (!r.ok) throw new Error(r.status + " " + (await r.text()).trim());
      this.load(r, await r.json());
      this.problems = [];
      this.message = "Showing what runs.";
      this.setState("clean");
    } catch (e) {
      this.message = "Could not read the lines that run: " + e.message;
      this.setState("error");
    }
    this.render();
  }

  // What runs (a reply's body) as the running lines and the draft, with the reply's ETag.
  load(reply, lines) {
    this.running = lines;
    this.etag = reply.headers.get("ETag");
    this.draft = structuredClone(this.running);
  }

  async apply() {
    this.setState("applying");
    this.render();
    const headers = {"Content-Type": "application/json"};
    if (this.etag) headers["If-Match"] = this.etag;
    try {
      const r = await fetch(this.url(), {method: "PUT", credentials: "same-origin", cache: "no-store", headers,
                                         body: JSON.stringify(this.draft)});
      if (r.status === 200) {
        this.load(r, await r.json());
        this.problems = [];
        this.message = "Applied at " + new Date().toLocaleTimeString() + ": these lines run now.";
        this.setState("applied");
        schedule(0);  // the counts of the lines that run now
      } else if (r.status === 412) {
        this.load(r, await r.json());
        this.problems = [];
        this.message = "Not applied: someone else changed the lines of this camera since you opened them. " +
          "What runs now is loaded; redo your change on it and Apply again.";
        this.setState("conflict");
      } else if (r.status === 400) {
        this.problems = (await r.json()).problems || ["the daemon refused the lines"];
        this.message = "Not applied: " + this.problems.length + " problem(s), shown beside the fields.";
        this.setState("invalid");
      } else {
        this.problems = [];
        this.message = "Not applied: " + r.status + " " + (await r.text()).trim();
        this.setState("refused");
      }
    } catch (e) {
      this.message = "Not applied: " + e.message;
      this.setState("error");
    }
    this.render();
  }

  setState(state) {
    this.state = state;
    this.c.root.dataset.editor = state;
  }

  dirty() {
    return this.running !== null && JSON.stringify(this.draft) !== JSON.stringify(this.running);
  }

  // -- editing the draft ------------------------------------------------------------------------
  changed(structure) {
    this.c.root.dataset.dirty = this.dirty() ? "1" : "0";
    if (structure) this.render(); else { this.draw(); this.renderStatus(); }
  }

  newId(prefix, taken) {
    for (let i = 1; ; i++) if (!taken.includes(prefix + i)) return prefix + i;
  }

  addLine(a, b) {
    const id = this.newId("line", this.draft.lines.map((l) => l.id));
    this.draft.lines.push({id, start: a, end: b, direction: normalOf(this.c, a, b), gates: []});
    this.selected = this.draft.lines.length - 1;
    this.changed(true);
  }

  setMode(mode) {
    this.mode = this.mode === mode ? "idle" : mode;
    this.pending = null;
    this.hover = null;
    this.render();
  }

  point(e) {
    const r = this.c.overlay.getBoundingClientRect();
    return [round4(clamp01((e.clientX - r.left) / r.width)), round4(clamp01((e.clientY - r.top) / r.height))];
  }

  pointerDown(e) {
    const t = e.target.closest("[data-handle]");
    if (t) {
      e.preventDefault();
      this.c.overlay.setPointerCapture(e.pointerId);
      this.drag = {pointer: e.pointerId, handle: t.dataset.handle, index: Number(t.dataset.index)};
      if (this.drag.index >= 0) this.selected = this.drag.index;
      return;
    }
    if (this.mode === "idle") {
      const g = e.target.closest("[data-index]");
      if (g) { this.selected = Number(g.dataset.index); this.render(); }
      return;
    }
    e.preventDefault();
    const p = this.point(e);
    if (this.pending === null) {
      this.pending = p;
      this.hover = p;
      this.draw();
      this.renderHint();
      return;
    }
    if (Math.hypot(p[0] - this.pending[0], p[1] - this.pending[1]) < 0.01) return;  // the same spot again
    const [a, mode] = [this.pending, this.mode];
    this.pending = null;
    this.hover = null;
    this.mode = "idle";
    if (mode === "line") {
      this.addLine(a, p);
    } else {
      this.measure = {start: a, end: p};
      this.render();
      const known = this.c.panel.querySelector("input[name=known_mm]");
      if (known) known.focus();
    }
  }

  pointerMove(e) {
    if (this.drag && e.pointerId === this.drag.pointer) {
      this.moveHandle(this.drag.handle, this.drag.index, this.point(e));
    } else if (this.pending !== null) {
      this.hover = this.point(e);
      this.draw();
    }
  }

  pointerUp(e) {
    if (this.drag && e.pointerId === this.drag.pointer) {
      this.drag = null;
      this.render();
    }
  }

  moveHandle(handle, index, p) {
    if (handle === "measure-start" || handle === "measure-end") {
      this.measure[handle === "measure-start" ? "start" : "end"] = p;
      this.renderCalibration();
      this.draw();
      return;
    }
    const line = this.draft.lines[index];
    const other = handle === "start" ? line.end : line.start;
    if (Math.hypot(p[0] - other[0], p[1] - other[1]) < 0.005) return;
    line[handle] = p;
    line.direction = normalOf(this.c, line.start, line.end, line.direction);
    this.changed(false);
  }

  key(e) {
    const t = e.target.closest("[data-handle]");
    const step = {ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1]}[e.key];
    if (!t || !step) return;
    e.preventDefault();
    const index = Number(t.dataset.index);
    const at = t.dataset.handle.startsWith("measure")
      ? this.measure[t.dataset.handle === "measure-start" ? "start" : "end"]
      : this.draft.lines[index][t.dataset.handle];
    const s = KEY_STEP * (e.shiftKey ? 10 : 1);
    this.focus = t.dataset.handle + ":" + index;
    this.moveHandle(t.dataset.handle, index, [round4(clamp01(at[0] + step[0] * s)), round4(clamp01(at[1] + step[1] * s))]);
  }

  // -- calibration: a segment of known length sets mm_per_px ------------------------------------
  measuredPx() {
    if (!this.measure) return null;
    const {start, end} = this.measure;
    return Math.hypot((end[0] - start[0]) * this.c.w, (end[1] - start[1]) * this.c.h);
  }

  calibrate() {
    const px = this.measuredPx();
    const mm = Number(this.knownMm);
    if (px && this.knownMm !== "" && mm > 0) {
      this.draft.mm_per_px = Math.round((mm / px) * 1e6) / 1e6;
      const input = this.c.panel.querySelector("input[name=mm_per_px]");
      if (input) input.value = String(this.draft.mm_per_px);
      this.changed(false);
    }
  }

  // -- drawing the overlay ------------------------------------------------------------------------
  countsOf(id) {
    const line = ((this.c.cam && this.c.cam.lines) || []).find((l) => l.id === id);
    return line ? {in: line.in, out: line.out} : null;
  }

  draw() {
    const c = this.c, k = unit(c);
    const nodes = [];
    const draftIds = this.draft.lines.map((l) => JSON.stringify([l.start, l.end]));
    for (const line of (this.running && this.running.lines) || []) {  // what runs, where the draft moved it
      if (!draftIds.includes(JSON.stringify([line.start, line.end]))) {
        nodes.push(drawLine(c, line, {cls: "running-line", colour: "#888", dashed: true}));
      }
    }
    this.draft.lines.forEach((line, i) => {
      const counts = this.countsOf(line.id);
      const bad = this.problems.some((p) => p.startsWith("lines." + i + ".") || p.startsWith("lines." + i + ":"));
      const label = line.id + (counts ? " in " + counts.in + " out " + counts.out : " (new)");
      const g = drawLine(c, line, {cls: "draft-line", label, colour: bad ? "#f44" : i === this.selected ? "#ff0" : "#dd0"});
      g.setAttribute("data-index", i);
      nodes.push(g);
      for (const end of ["start", "end"]) nodes.push(this.handle(end, i, line[end], k, "line " + line.id));
    });
    if (this.measure) {
      const {start, end} = this.measure;
      nodes.push(svgEl("line", {x1: start[0] * c.w, y1: start[1] * c.h, x2: end[0] * c.w, y2: end[1] * c.h,
                                stroke: "#0cf", "stroke-width": 3 * k, "stroke-dasharray": 6 * k + " " + 4 * k,
                                class: "measure-line"}));
      nodes.push(this.handle("measure-start", -1, start, k, "the calibration segment"));
      nodes.push(this.handle("measure-end", -1, end, k, "the calibration segment"));
    }
    if (this.pending !== null) {
      const [a, b] = [this.pending, this.hover || this.pending];
      nodes.push(svgEl("line", {x1: a[0] * c.w, y1: a[1] * c.h, x2: b[0] * c.w, y2: b[1] * c.h, class: "pending",
                                stroke: this.mode === "measure" ? "#0cf" : "#ff0", "stroke-width": 2 * k,
                                "stroke-dasharray": 4 * k + " " + 4 * k}));
      nodes.push(svgEl("circle", {cx: a[0] * c.w, cy: a[1] * c.h, r: 5 * k, fill: "#ff0"}));
    }
    const keep = this.focus;  // the focused handle is replaced: its successor gets the focus
    c.overlay.replaceChildren(...nodes);
    this.focus = keep;
    if (keep) {
      const [handle, index] = keep.split(":");
      const el = c.overlay.querySelector('[data-handle="' + handle + '"][data-index="' + index + '"]');
      if (el) el.focus();
    }
  }

  handle(which, index, at, k, what) {
    const name = which.replace("measure-", "") + " of " + what;
    const el = svgEl("circle", {cx: at[0] * this.c.w, cy: at[1] * this.c.h, r: 13 * k, tabindex: 0, role: "button",
                                class: "handle" + (index < 0 ? " measure" : ""), "data-handle": which,
                                "data-index": index, "aria-label": name + ": drag it, or move it with the arrow keys"});
    el.addEventListener("blur", () => { if (this.focus === which + ":" + index) this.focus = null; });
    el.addEventListener("focus", () => { this.focus = which + ":" + index; });
    return el;
  }

  // -- the panel: tools, calibration, lines and gates, problems ---------------------------------
  problemsFor(path) {
    return this.problems.filter((p) => p.split(":")[0] === path).map((p) => p.slice(path.length + 1).trim());
  }

  // A problem goes beside the most specific field that has a slot for it (lines.0.start -> line 0).
  placeProblems() {
    const slots = new Map([...this.c.panel.querySelectorAll("[data-problem]")].map((el) => [el.dataset.problem, el]));
    for (const el of slots.values()) el.replaceChildren();
    for (const el of this.c.panel.querySelectorAll(".invalid")) el.classList.remove("invalid");
    for (const problem of this.problems) {
      const colon = problem.indexOf(":");
      const path = colon > 0 ? problem.slice(0, colon) : "";
      let key = path;
      while (key && !slots.has(key)) key = key.includes(".") ? key.slice(0, key.lastIndexOf(".")) : "";
      const slot = slots.get(key) || slots.get("");
      slot.append(htmlEl("div", {class: "problem-item", text: key === path && path ? problem.slice(colon + 1).trim() : problem}));
      const field = this.c.panel.querySelector('[data-path="' + path + '"]');
      if (field) field.classList.add("invalid");
    }
  }

  renderHint() {
    const hint = this.c.panel.querySelector(".hint");
    if (!hint) return;
    const what = this.mode === "line" ? "the line" : "a segment of known length";
    hint.textContent = this.mode === "idle" ? ""
      : (this.pending === null ? "Click or tap where " + what + " starts" : "Click or tap where " + what + " ends");
  }

  renderStatus() {
    const status = this.c.panel.querySelector(".editor-status");
    if (!status) return;
    const dirty = this.dirty();
    status.className = "editor-status " + (this.state === "conflict" && !dirty ? "conflict" : dirty ? "dirty" : "applied");
    status.textContent = (dirty ? "Draft not applied: the daemon still runs the previous lines. " : "") + this.message;
    for (const line of this.draft.lines) {
      const counts = this.countsOf(line.id);
      const el = this.c.panel.querySelector('.line-counts[data-line="' + CSS.escape(line.id) + '"]');
      if (el) el.textContent = counts ? "in " + counts.in + " out " + counts.out : "not running yet";
    }
  }

  renderCalibration() {
    const info = this.c.panel.querySelector(".measured");
    const px = this.measuredPx();
    if (info) info.textContent = px === null ? "no segment drawn" : "segment " + px.toFixed(1) + " px";
  }

  toolButton(label, mode, help) {
    return htmlEl("button", {type: "button", "aria-pressed": this.mode === mode ? "true" : "false", "data-tool": mode,
                             title: help, text: label,
                             onclick: (e) => {
                               if (e.detail === 0 && mode === "line") {  // from the keyboard: a line in the middle
                                 this.addLine([0.5, 0.2], [0.5, 0.8]);
                               } else this.setMode(mode);
                             }});
  }

  render() {
    const d = this.draft;
    const tools = htmlEl("div", {class: "tools", role: "toolbar", "aria-label": "line editor of " + this.c.id},
      this.toolButton("Add line", "line", "then click or tap the line's two ends on the image"),
      this.toolButton("Measure", "measure", "then click or tap both ends of something of known length"),
      htmlEl("button", {type: "button", class: "primary", "data-act": "apply", text: "Apply",
                        onclick: () => this.apply()}),
      htmlEl("button", {type: "button", "data-act": "revert", text: "Revert", onclick: () => this.revert()}),
      htmlEl("span", {class: "hint", "aria-live": "polite"}));
    const mm = htmlEl("input", {type: "number", step: "any", min: "0", name: "mm_per_px", "data-path": "mm_per_px",
                                value: d.mm_per_px === null || d.mm_per_px === undefined ? "" : d.mm_per_px,
                                oninput: (e) => { d.mm_per_px = e.target.value === "" ? null : Number(e.target.value);
                                                  this.changed(false); }});
    const known = htmlEl("input", {type: "number", step: "any", min: "0", name: "known_mm", value: this.knownMm,
                                   oninput: (e) => { this.knownMm = e.target.value; this.calibrate(); }});
    const calibration = htmlEl("div", {class: "calibration"},
      htmlEl("label", {}, "mm per px ", mm),
      htmlEl("span", {class: "measured"}),
      htmlEl("label", {}, "its length in mm ", known),
      htmlEl("div", {class: "problem", "data-problem": "mm_per_px", role: "alert"}));
    const list = htmlEl("ol", {class: "lines", "aria-label": "counting lines"},
      ...d.lines.map((line, i) => this.lineRow(line, i)));
    const general = htmlEl("div", {class: "problem", "data-problem": "", role: "alert"});
    const status = htmlEl("div", {class: "editor-status", "aria-live": "polite"});
    const root = htmlEl("div", {class: "editor"}, tools, calibration, list, general, status);
    const focused = document.activeElement && this.c.panel.contains(document.activeElement)
      ? document.activeElement.getAttribute("data-path") || document.activeElement.getAttribute("data-tool") : null;
    this.c.panel.replaceChildren(root);
    if (focused) {
      const again = root.querySelector('[data-path="' + focused + '"], [data-tool="' + focused + '"]');
      if (again) again.focus();
    }
    this.renderHint();
    this.renderCalibration();
    this.placeProblems();
    this.renderStatus();
    this.c.root.dataset.dirty = this.dirty() ? "1" : "0";
    this.draw();
  }

  lineRow(line, i) {
    const path = "lines." + i;
    const name = htmlEl("input", {name: "line-id", "data-path": path + ".id", value: line.id, size: 12,
                                  "aria-label": "name of line " + (i + 1),
                                  oninput: (e) => { line.id = e.target.value; this.changed(false); }});
    const gates = htmlEl("ul", {class: "gates"}, ...line.gates.map((gate, j) => {
      const gp = path + ".gates." + j;
      return htmlEl("li", {class: "gate-row"},
        htmlEl("div", {class: "row"},
          htmlEl("label", {}, "gate ", htmlEl("input", {name: "gate-id", "data-path": gp + ".id", value: gate.id, size: 10,
                                                          oninput: (e) => { gate.id = e.target.value; this.changed(false); }})),
          htmlEl("label", {}, "distance mm ", htmlEl("input", {
            type: "number", step: "any", min: "0", name: "distance_mm", "data-path": gp + ".distance_mm",
            value: gate.distance_mm === null ? "" : gate.distance_mm,
            oninput: (e) => { gate.distance_mm = e.target.value === "" ? null : Number(e.target.value); this.changed(false); }})),
          htmlEl("button", {type: "button", text: "Remove gate", "aria-label": "remove gate " + gate.id,
                            onclick: () => { line.gates.splice(j, 1); this.changed(true); }})),
        htmlEl("div", {class: "problem", "data-problem": gp}));
    }));
    return htmlEl("li", {class: "line-row" + (i === this.selected ? " selected" : ""), "data-line-index": i},
      htmlEl("div", {class: "row"},
        htmlEl("label", {}, "name ", name),
        htmlEl("span", {class: "line-counts", "data-line": line.id}),
        htmlEl("button", {type: "button", "data-act": "flip", text: "Flip direction",
                          "aria-label": "flip the in direction of " + line.id,
                          onclick: () => { line.direction = [-line.direction[0], -line.direction[1]];
                                           this.changed(false); }}),
        htmlEl("button", {type: "button", "data-act": "add-gate", text: "Add gate",
                          onclick: () => { line.gates.push({id: this.newId("gate", line.gates.map((g) => g.id)),
                                                            distance_mm: 500});
                                           this.changed(true); }}),
        htmlEl("button", {type: "button", "data-act": "remove-line", text: "Remove line",
                          "aria-label": "remove line " + line.id,
                          onclick: () => { this.draft.lines.splice(i, 1); this.selected = -1; this.changed(true); }})),
      htmlEl("div", {class: "problem", "data-problem": path + ".id"}),
      htmlEl("div", {class: "problem", "data-problem": path}),
      gates);
  }
}
