// pglab inspect: draws the runs the server read (pglab.apps.inspect); every number comes from the run's files.
"use strict";

const $ = (id) => document.getElementById(id);
const SVGNS = "http://www.w3.org/2000/svg";
const OWNERS = ["pad", "prompt", "policy", "tool"];
const POLICY = 2;
const LABELS = { adv: "advantage", ref: "log-ratio to the reference", mismatch: "sampler/trainer mismatch",
                 ratio: "ratio" };
const runs = [];        // the summaries of /api/runs
const shownRows = {};   // run index -> the rows of its chosen step

function status(text) { $("status").textContent = text; }
async function getJSON(path) {
  const res = await fetch(path);
  const data = await res.json();
  if (!res.ok) throw new Error(data.error || res.statusText);
  return data;
}
function node(tag, attrs, parent, text) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  if (parent) parent.appendChild(el);
  return el;
}
function svgNode(tag, attrs, parent) {
  const el = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  if (parent) parent.appendChild(el);
  return el;
}
const fmt = (x) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Math.abs(x) >= 100 ? x.toFixed(0)
                    : x.toFixed(Math.abs(x) >= 1 ? 2 : 4));

// ---------- per-token quantities ----------
// log pi_old = log pi - log ratio (the policy before this step's updates; ratio 1 when the loss reads no pi_old)
function oldLogp(row, i) { return row.logp[i] - (row.ratio ? Math.log(Math.max(row.ratio[i], 1e-30)) : 0); }
function value(row, name, i) {
  if (row.owner[i] !== POLICY) return null;
  if (name === "adv") return row.adv ? row.adv[i] : null;
  if (name === "ref") return row.ref_logp && row.logp ? row.logp[i] - row.ref_logp[i] : null;
  if (name === "mismatch") return row.sampler_logp && row.logp ? oldLogp(row, i) - row.sampler_logp[i] : null;
  if (name === "ratio") return row.ratio ? row.ratio[i] : row.logp ? 1 : null;
  return null;
}
// the colour's strength: log of a ratio, the value itself otherwise
function signed(name, v) { return name === "ratio" ? Math.log(Math.max(v, 1e-30)) : v; }
function colour(strength, scale) {
  const t = scale > 0 ? Math.min(1, Math.abs(strength) / scale) : 0;
  const alpha = (0.12 + 0.78 * t).toFixed(3);
  return strength >= 0 ? `rgba(31, 119, 180, ${alpha})` : `rgba(214, 39, 40, ${alpha})`;
}
function flags(row) {
  const policy = row.owner.map((o, i) => (o === POLICY ? i : -1)).filter((i) => i >= 0);
  const mismatch = policy.map((i) => value(row, "mismatch", i)).filter((v) => v !== null);
  return {
    clipped: policy.some((i) => row.clipped && row.clipped[i]),
    masked: policy.some((i) => row.masked && row.masked[i]),
    mismatch: mismatch.length ? Math.max(...mismatch.map(Math.abs)) : 0,
    failed: row.passed === false || (row.passed == null && row.reward != null && row.reward <= 0),
  };
}

// ---------- episodes ----------
function renderEpisode(row, name, scale, parent) {
  const f = flags(row);
  const div = node("div", { class: "episode", "data-row": row.row, "data-clipped": f.clipped, "data-masked": f.masked,
                            "data-mismatch": f.mismatch, "data-failed": f.failed }, parent);
  const passed = row.passed == null ? "" : row.passed ? " · passed" : " · failed";
  node("div", { class: "episode-head" }, div,
       `row ${row.row}` + (row.group == null ? "" : ` · group ${row.group}`) +
       ` · reward ${fmt(row.reward)}${passed} · advantage ${fmt(row.advantage)}` +
       (row.end ? ` · ended by ${row.end}` : "") + (row.truncated ? " · cut to the recorded positions" : ""));
  const text = node("p", { class: "transcript" }, div);
  row.owner.forEach((owner, i) => {
    const piece = row.text ? row.text[i] : `[${row.ids ? row.ids[i] : "?"}]`;
    const span = node("span", { class: `tok ${OWNERS[owner] || "pad"}` }, text, piece);
    if (owner !== POLICY) return;
    if (row.clipped && row.clipped[i]) span.classList.add("clipped");
    if (row.masked && row.masked[i]) span.classList.add("masked");
    const v = value(row, name, i);
    if (v === null) { span.title = `${LABELS[name]}: not recorded`; return; }
    span.style.backgroundColor = colour(signed(name, v), scale);
    span.dataset.value = v;
    span.title = `${LABELS[name]} = ${fmt(v)}` + (row.clipped && row.clipped[i] ? " (clipped)" : "") +
                 (row.masked && row.masked[i] ? " (masked)" : "");
  });
}
function renderEpisodes(index) {
  const box = document.querySelector(`#run-${index} .episodes`);
  box.replaceChildren();
  const rows = shownRows[index] || [];
  if (!rows.length) { node("p", { class: "empty" }, box, "no recorded samples at this step"); return; }
  const name = $("quantity").value;
  const strengths = rows.flatMap((row) => row.owner.map((_, i) => value(row, name, i)))
    .filter((v) => v !== null).map((v) => Math.abs(signed(name, v)));
  const scale = strengths.length ? Math.max(...strengths) : 0;
  rows.forEach((row) => renderEpisode(row, name, scale, box));
  applyFilters();
}
function applyFilters() {
  const threshold = Number($("mismatch-threshold").value) || 0;
  const want = { clipped: $("f-clipped").checked, masked: $("f-masked").checked, mismatch: $("f-mismatch").checked,
                 failed: $("f-failed").checked };
  document.querySelectorAll(".episode").forEach((ep) => {
    const keep = (!want.clipped || ep.dataset.clipped === "true") && (!want.masked || ep.dataset.masked === "true") &&
      (!want.mismatch || Number(ep.dataset.mismatch) > threshold) && (!want.failed || ep.dataset.failed === "true");
    ep.hidden = !keep;
  });
  document.querySelectorAll(".run").forEach((run) => {
    const hidden = run.querySelectorAll(".episode[hidden]").length;
    run.querySelector(".filtered").textContent = hidden ? `${hidden} episodes hidden by the filters` : "";
  });
}

// ---------- timeline ----------
function drawMetric(parent, run, name, now) {
  const points = run.steps.filter((r) => typeof r[name] === "number").map((r) => [r.step, r[name]]);
  if (!points.length) return;
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const sx = (x) => (x1 > x0 ? ((x - x0) / (x1 - x0)) * 100 : 50);
  const sy = (y) => (y1 > y0 ? 95 - ((y - y0) / (y1 - y0)) * 90 : 50);
  const fig = node("figure", { class: "metric", "data-metric": name }, parent);
  fig.style.margin = "0";
  const svg = svgNode("svg", { viewBox: "0 0 100 100", preserveAspectRatio: "none", role: "img",
                               "aria-label": `${name} against step` }, fig);
  svgNode("polyline", { points: points.map(([x, y]) => `${sx(x)},${sy(y)}`).join(" ") }, svg);
  if (now !== null && now >= x0 && now <= x1) svgNode("line", { class: "now", x1: sx(now), x2: sx(now), y1: 0, y2: 100 }, svg);
  node("figcaption", {}, fig, `${name}: ${fmt(ys[ys.length - 1])} (${fmt(y0)} to ${fmt(y1)})`);
}
function drawTimeline(index) {
  const run = runs[index];
  const box = document.querySelector(`#run-${index} .timeline`);
  box.replaceChildren();
  const chosen = document.querySelector(`#run-${index} select.step`);
  const now = chosen && chosen.value !== "" ? Number(chosen.value) : null;
  run.metrics.forEach((name) => drawMetric(box, run, name, now));
  if (!run.steps.length) node("p", { class: "empty" }, box, "no step rows in this run");
}

// ---------- runs ----------
async function showStep(index, step) {
  try {
    const data = await getJSON(`/api/samples?run=${index}&step=${step}`);
    shownRows[index] = data.rows;
    renderEpisodes(index);
    drawTimeline(index);
    status("");
  } catch (err) { status(String(err.message || err)); }
}
function renderRun(run, index) {
  const col = node("section", { class: "run", id: `run-${index}`, "aria-label": `run ${run.name}` }, $("runs"));
  node("h2", { title: run.folder }, col, run.name);
  const warnings = node("ul", { class: "warnings" }, col);
  run.warnings.forEach((w) => node("li", {}, warnings, w));
  if (!run.warnings.length) node("li", { class: "empty" }, warnings, "no warnings");
  node("div", { class: "timeline" }, col);
  const pick = node("label", {}, col, "Step ");
  const select = node("select", { class: "step" }, pick);
  run.sample_steps.forEach((s) => node("option", { value: s }, select, String(s)));
  node("p", { class: "filtered legend" }, col);
  node("div", { class: "episodes" }, col);
  if (!run.sample_steps.length) {
    node("p", { class: "empty" }, col, "this run has no samples.jsonl (recorded by pglab's trainers since inspect)");
  }
  select.addEventListener("change", () => showStep(index, select.value));
  drawTimeline(index);
  if (run.sample_steps.length) {
    select.value = String(run.sample_steps[run.sample_steps.length - 1]);
    return showStep(index, select.value);
  }
  return Promise.resolve();
}
async function start() {
  try {
    const data = await getJSON("/api/runs");
    runs.push(...data.runs);
    await Promise.all(runs.map(renderRun));
    document.body.dataset.ready = "true";
  } catch (err) { status(String(err.message || err)); }
}
$("quantity").addEventListener("change", () => runs.forEach((_, i) => renderEpisodes(i)));
["f-clipped", "f-masked", "f-mismatch", "f-failed", "mismatch-threshold"].forEach((id) =>
  $(id).addEventListener("input", applyFilters));
start();
