// pglab demos: draws what the server computes (pglab.web.api) and sends the controls back.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const H = Math.sqrt(3) / 2;
const CORNERS = [[0, 0], [1, 0], [0.5, H]];      // arm 1, arm 2, arm 3 (y up; the SVG flips it)
const ARM_COLORS = ["#d62728", "#2ca02c", "#1f77b4"];
const GRAD = "#ff7f0e";
const RACE_COLORS = { none: "#ff7f0e", running: "#1f77b4" };

// ---------- helpers ----------
function el(tag, attrs, parent) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}
const $ = (id) => document.getElementById(id);
// a distribution (or a direction with components summing to 0) -> triangle coordinates (SVG: y down)
function toXY(p) {
  let x = 0, y = 0;
  for (let a = 0; a < 3; a++) { x += p[a] * CORNERS[a][0]; y += p[a] * CORNERS[a][1]; }
  return [x, -y];
}
// triangle coordinates -> barycentric weights (may be negative outside the triangle)
function fromXY(x, y) {
  y = -y;
  const p3 = y / H, p2 = x - 0.5 * p3, p1 = 1 - p2 - p3;
  return [p1, p2, p3];
}
function clampPolicy(p, floor = 0.01) {
  const q = p.map((v) => Math.max(v, floor));
  const s = q.reduce((a, b) => a + b, 0);
  return q.map((v) => v / s);
}
function fmtSpread(x) {
  if (x === null || x === undefined) return "–";
  return x >= 100 ? x.toFixed(0) : x.toFixed(2);
}
const fmt = (x, d = 2) => (x === null || x === undefined ? "–" : x.toFixed(d));
function svgPoint(svg, evt) {
  const pt = svg.createSVGPoint();
  pt.x = evt.clientX; pt.y = evt.clientY;
  return pt.matrixTransform(svg.getScreenCTM().inverse());
}
function status(text) { $("status").textContent = text; }
async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
                                  body: JSON.stringify(body) });
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}
function drawTriangle(svg) {
  const pts = CORNERS.map((c) => `${c[0]},${-c[1]}`).join(" ");
  el("polygon", { points: pts, class: "simplex" }, svg);
  ["arm 1", "arm 2", "arm 3 (best)"].forEach((label, a) => {
    const [x, y] = toXY([0, 1, 2].map((i) => (i === a ? 1 : 0)));
    el("text", { x, y: y + (a === 2 ? -0.03 : 0.07), class: "corner", fill: ARM_COLORS[a],
                 "text-anchor": a === 0 ? "start" : a === 1 ? "end" : "middle" }, svg).textContent = label;
  });
}
function arrow(svg, x1, y1, x2, y2, cls) {
  el("line", { x1, y1, x2, y2, class: cls, "marker-end": `url(#head-${cls})` }, svg);
}
function markers(svg, classes) {
  const defs = el("defs", {}, svg);
  for (const cls of classes) {
    const m = el("marker", { id: `head-${cls}`, viewBox: "0 0 10 10", refX: 8, refY: 5, markerWidth: 5,
                              markerHeight: 5, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M0,0 L10,5 L0,10 z", class: `head ${cls}` }, m);
  }
}
function keyMove(evt, p, onMove) {
  const step = evt.shiftKey ? 0.05 : 0.01;
  const moves = { ArrowUp: [-step / 2, -step / 2, step], ArrowDown: [step / 2, step / 2, -step],
                  ArrowLeft: [step, -step, 0], ArrowRight: [-step, step, 0] };
  const d = moves[evt.key];
  if (!d) return;
  evt.preventDefault();
  onMove(clampPolicy(p.map((v, i) => v + d[i])));
}
function draggable(svg, handle, onMove) {
  let dragging = false;
  const move = (evt) => {
    const pt = svgPoint(svg, evt);
    onMove(clampPolicy(fromXY(pt.x, pt.y)));
  };
  svg.addEventListener("pointerdown", (evt) => { dragging = true; svg.setPointerCapture(evt.pointerId); move(evt); });
  svg.addEventListener("pointermove", (evt) => { if (dragging) move(evt); });
  svg.addEventListener("pointerup", () => { dragging = false; });
  svg.addEventListener("pointercancel", () => { dragging = false; });
}

// ---------- demo 1: the gradient cloud ----------
const CLOUD_DEFAULT = { pi: [1 / 3, 1 / 3, 1 / 3], c: 0, sigma: 0, baseline: "zero", samples: 0, seed: 1, zoom: 1 };
const cloud = { ...CLOUD_DEFAULT, data: null, pending: null, busy: false };

async function refreshCloud() {
  // one request at a time; the latest controls win
  cloud.pending = { pi: cloud.pi, c: cloud.c, sigma: cloud.sigma, baseline: cloud.baseline,
                    samples: cloud.samples, seed: cloud.seed };
  if (cloud.busy) return;
  cloud.busy = true;
  try {
    while (cloud.pending) {
      const body = cloud.pending;
      cloud.pending = null;
      cloud.data = await post("/api/cloud", body);
      drawCloud();
    }
    status("");
  } catch (err) {
    status(`Gradient cloud: ${err.message}`);
  } finally {
    cloud.busy = false;
  }
}

function drawCloud() {
  const d = cloud.data;
  const tri = $("tri"), pane = $("cloud"), strip = $("strip");
  // the triangle: spokes, the step of the policy along the true gradient, the policy point
  tri.replaceChildren();
  markers(tri, ["grad", "mean"]);
  drawTriangle(tri);
  const [px, py] = toXY(d.pi);
  for (let a = 0; a < 3; a++) {
    const [cx, cy] = toXY([0, 1, 2].map((i) => (i === a ? 1 : 0)));
    el("line", { x1: px, y1: py, x2: cx, y2: cy, class: "spoke", stroke: ARM_COLORS[a] }, tri);
  }
  const step = toXY(d.pi_step);
  const sl = Math.hypot(step[0], step[1]) || 1;
  arrow(tri, px, py, px + (0.18 * step[0]) / sl, py + (0.18 * step[1]) / sl, "grad");
  const g = toXY(d.gradient);
  const handle = el("circle", { cx: px, cy: py, r: 0.035, class: "policy", id: "policy", tabindex: 0,
                                role: "slider", "aria-label": "policy point",
                                "aria-valuetext": `pi = ${d.pi.map((v) => v.toFixed(2)).join(", ")}` }, tri);
  handle.addEventListener("keydown", (evt) => keyMove(evt, cloud.pi, setPolicy));
  if (cloud.focusPolicy) { handle.focus(); cloud.focusPolicy = false; }
  $("pi-readout").textContent = `(${d.pi.map((v) => v.toFixed(2)).join(", ")})`;

  // the cloud: axes through the origin, dots, the true gradient and the running mean
  pane.replaceChildren();
  markers(pane, ["grad", "mean"]);
  const scale = 0.25 / cloud.zoom;       // one unit of gradient = 0.25 of the panel, divided by the zoom
  el("line", { x1: -1, y1: 0, x2: 1, y2: 0, class: "axis" }, pane);
  el("line", { x1: 0, y1: -1, x2: 0, y2: 1, class: "axis" }, pane);
  for (const s of d.samples) {
    const [x, y] = toXY(s.g);
    el("circle", { cx: x * scale, cy: y * scale, r: 0.02, fill: ARM_COLORS[s.arm], class: "dot" }, pane);
  }
  arrow(pane, 0, 0, g[0] * scale, g[1] * scale, "grad");
  if (d.mean) {
    const m = toXY(d.mean);
    arrow(pane, 0, 0, m[0] * scale, m[1] * scale, "mean");
  }
  el("text", { x: -0.97, y: 0.95, class: "scale" }, pane).textContent = `scale ×${(1 / cloud.zoom).toFixed(2)}`;

  // readouts
  $("J").textContent = fmt(d.J);
  $("bstar").textContent = fmt(d.b_star);
  $("b-value").textContent = fmt(d.b);
  $("spread-exact").textContent = fmtSpread(d.spread_exact);
  $("spread-measured").textContent = fmtSpread(d.spread_measured);
  $("n-samples").textContent = String(d.samples.length);
  const slider = $("baseline");
  slider.min = d.strip.b[0].toFixed(2);
  slider.max = d.strip.b[d.strip.b.length - 1].toFixed(2);
  slider.value = d.b;
  slider.setAttribute("aria-valuetext", `b = ${d.b.toFixed(2)}`);

  // the strip: log10 spread against b
  strip.replaceChildren();
  const bs = d.strip.b, ex = d.strip.exact;
  const logs = ex.map((v) => Math.log10(Math.max(v, 1e-3)));
  const lo = Math.min(...logs, d.spread_measured ? Math.log10(Math.max(d.spread_measured, 1e-3)) : Infinity) - 0.2;
  const hi = Math.max(...logs) + 0.2;
  const X = (b) => 30 + (360 * (b - bs[0])) / (bs[bs.length - 1] - bs[0]);
  const Y = (v) => 80 - (70 * (Math.log10(Math.max(v, 1e-3)) - lo)) / (hi - lo);
  el("polyline", { points: bs.map((b, i) => `${X(b)},${Y(ex[i])}`).join(" "), class: "curve" }, strip);
  for (const [b, label, cls] of [[d.J, "J", "mark-j"], [d.b_star, "b*", "mark-bstar"]]) {
    el("line", { x1: X(b), y1: 8, x2: X(b), y2: 82, class: cls }, strip);
    el("text", { x: X(b) + 2, y: label === "J" ? 16 : 26, class: `label ${cls}` }, strip).textContent = label;
  }
  el("circle", { cx: X(d.b), cy: Y(d.spread_exact), r: 3, class: "current" }, strip);
  if (d.spread_measured) el("circle", { cx: X(d.b), cy: Y(d.spread_measured), r: 3, class: "measured" }, strip);
  for (let e = Math.ceil(lo); e <= Math.floor(hi); e++) {
    el("text", { x: 2, y: Y(10 ** e) + 3, class: "tick" }, strip).textContent = `1e${e}`;
  }
  el("text", { x: 390, y: 88, class: "tick", "text-anchor": "end" }, strip).textContent = "b →";
}

function setPolicy(p) { cloud.pi = p; cloud.focusPolicy = document.activeElement?.id === "policy"; refreshCloud(); }

function initCloud() {
  draggable($("tri"), null, setPolicy);
  $("baseline").addEventListener("input", (e) => { cloud.baseline = Number(e.target.value); refreshCloud(); });
  $("b-zero").addEventListener("click", () => { cloud.baseline = "zero"; refreshCloud(); });
  $("b-J").addEventListener("click", () => { cloud.baseline = "J"; refreshCloud(); });
  $("b-star").addEventListener("click", () => { cloud.baseline = "b*"; refreshCloud(); });
  const number = (id, key) => $(id).addEventListener("change", (e) => {
    const v = Number(e.target.value);
    if (!Number.isFinite(v)) { status(`${key} must be a number`); return; }
    cloud[key] = v; refreshCloud();
  });
  number("c", "c");
  number("sigma", "sigma");
  $("add1").addEventListener("click", () => { cloud.samples = Math.min(cloud.samples + 1, 5000); refreshCloud(); });
  $("add25").addEventListener("click", () => { cloud.samples = Math.min(cloud.samples + 25, 5000); refreshCloud(); });
  $("clear").addEventListener("click", () => { cloud.samples = 0; cloud.seed += 1; refreshCloud(); });
  $("zoom").addEventListener("click", () => { cloud.zoom *= 4; drawCloud(); });
  $("reset").addEventListener("click", () => {
    Object.assign(cloud, { ...CLOUD_DEFAULT, pi: [...CLOUD_DEFAULT.pi] });
    $("c").value = cloud.c; $("sigma").value = cloud.sigma;
    refreshCloud();
  });
  refreshCloud();
}

// ---------- demo 2: the race ----------
const race = { start: [1 / 3, 1 / 3, 1 / 3], c: 10, alpha: 0.1, seed: 0, steps: 400, shown: 0, data: null,
               playing: false, speed: 1, timer: null };

async function fetchRace() {
  try {
    race.data = await post("/api/race", { start: race.start, c: race.c, alpha: race.alpha, steps: race.steps,
                                          seed: race.seed });
    status("");
  } catch (err) {
    status(`Race: ${err.message}`);
    race.data = null;
  }
  drawRace();
}

function drawRace() {
  const tri = $("race-tri"), chart = $("race-j");
  tri.replaceChildren();
  drawTriangle(tri);
  const d = race.data;
  const shown = d ? Math.min(race.shown, d.steps) : 0;
  if (d) {
    for (const [method, m] of Object.entries(d.methods)) {
      for (const path of m.paths) {
        const pts = path.slice(0, shown + 1).map((p) => toXY(p).join(",")).join(" ");
        el("polyline", { points: pts, class: "path", stroke: RACE_COLORS[method] }, tri);
        const [x, y] = toXY(path[shown]);
        el("circle", { cx: x, cy: y, r: 0.012, fill: RACE_COLORS[method] }, tri);
      }
    }
  }
  const [sx, sy] = toXY(race.start);
  const start = el("circle", { cx: sx, cy: sy, r: 0.03, class: "policy", id: "race-start", tabindex: 0,
                               role: "slider", "aria-label": "race start",
                               "aria-valuetext": `start = ${race.start.map((v) => v.toFixed(2)).join(", ")}` }, tri);
  start.addEventListener("keydown", (evt) => keyMove(evt, race.start, setStart));
  if (race.focusStart) { start.focus(); race.focusStart = false; }

  chart.replaceChildren();
  if (!d) return;
  const top = d.steps;
  const all = Object.values(d.methods).flatMap((m) => m.mean_J);
  const lo = Math.min(...all, 1) - 0.1, hi = Math.max(...all, 4) + 0.1;
  const X = (t) => 40 + (350 * t) / Math.max(top, 1);
  const Y = (v) => 200 - (185 * (v - lo)) / (hi - lo);
  el("line", { x1: 40, y1: 200, x2: 390, y2: 200, class: "axis" }, chart);
  el("line", { x1: 40, y1: 10, x2: 40, y2: 200, class: "axis" }, chart);
  for (const v of [1, 2, 4]) {
    el("line", { x1: 40, y1: Y(v), x2: 390, y2: Y(v), class: "grid" }, chart);
    el("text", { x: 36, y: Y(v) + 4, class: "tick", "text-anchor": "end" }, chart).textContent = `${v}`;
  }
  el("text", { x: 390, y: 215, class: "tick", "text-anchor": "end" }, chart).textContent = `step (0 to ${top})`;
  for (const [method, m] of Object.entries(d.methods)) {
    const pts = m.mean_J.slice(0, shown + 1).map((v, t) => `${X(t)},${Y(v)}`).join(" ");
    el("polyline", { points: pts, class: "jline", stroke: RACE_COLORS[method] }, chart);
  }
  $("race-step").textContent = String(shown);
  const at = (m) => m.mean_J[shown];
  $("nb-meanJ").textContent = fmt(at(d.methods.none));
  $("b-meanJ").textContent = fmt(at(d.methods.running));
  $("nb-uncommitted").textContent = `${d.methods.none.not_committed_to_best[shown]} of ${d.runs}`;
  $("b-uncommitted").textContent = `${d.methods.running.not_committed_to_best[shown]} of ${d.runs}`;
  $("nb-wrong").textContent = `${d.methods.none.committed_to_wrong[shown]} of ${d.runs}`;
  $("b-wrong").textContent = `${d.methods.running.committed_to_wrong[shown]} of ${d.runs}`;
}

function stopPlay() {
  race.playing = false;
  clearInterval(race.timer);
  $("play").textContent = "Play";
}

async function showSteps(target) {
  if (target > race.steps) {
    race.steps = Math.min(5000, Math.ceil(target / 400) * 400);
    await fetchRace();
  }
  race.shown = Math.min(target, race.steps);
  drawRace();
}

function setStart(p) {
  stopPlay();
  race.start = p; race.shown = 0; race.steps = 400;
  race.focusStart = document.activeElement?.id === "race-start";
  fetchRace();
}

function initRace() {
  const tri = $("race-tri");
  tri.addEventListener("click", (evt) => { const pt = svgPoint(tri, evt); setStart(clampPolicy(fromXY(pt.x, pt.y))); });
  $("play").addEventListener("click", () => {
    if (race.playing) { stopPlay(); return; }
    if (race.data && race.shown >= race.data.steps) race.shown = 0;
    race.playing = true;
    $("play").textContent = "Pause";
    race.timer = setInterval(() => {
      const end = race.data ? race.data.steps : 0;
      race.shown = Math.min(race.shown + 2 * race.speed, end);
      drawRace();
      if (race.shown >= end) stopPlay();
    }, 16);
  });
  $("plus10").addEventListener("click", () => { stopPlay(); showSteps(race.shown + 10); });
  $("race-reset").addEventListener("click", () => { stopPlay(); race.shown = 0; race.steps = 400; fetchRace(); });
  $("speed").addEventListener("click", () => {
    race.speed = race.speed >= 4 ? 1 : race.speed * 2;
    $("speed").textContent = `Speed ${race.speed}×`;
  });
  for (const [id, key] of [["race-c", "c"], ["race-alpha", "alpha"]]) {
    $(id).addEventListener("change", (e) => {
      const v = Number(e.target.value);
      if (!Number.isFinite(v)) { status(`${key} must be a number`); return; }
      stopPlay(); race[key] = v; race.shown = 0; race.steps = 400; fetchRace();
    });
  }
  fetchRace();
}

initCloud();
initRace();
