// The dashboard's pages, drawn from the JSON API of `kblaster serve`. Everything that comes from
// the store (sources, logs, reasons, strategy names, LLM answers) is put into the page as text
// (textContent), never as markup; highlighted source is highlight.js's escaped output.
"use strict";

const main = () => document.getElementById("main");
let currentVersion = null;
let charts = [];

// ---- small DOM helpers (text only) ----
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}
const link = (href, text) => el("a", { href }, text);
const badge = (v) => el("span", { class: "verdict v-" + String(v || "none").replace(/[^a-z_]/g, "") }, v || "-");
const fmt = (x, d = 3) => (x === null || x === undefined || !isFinite(x) ? "-" : Number(x).toFixed(d));
const pct = (x) => (x === null || x === undefined ? "-" : (100 * x).toFixed(0) + "%");
const ms = (s) => (s === null || s === undefined ? "-" : (1000 * s).toFixed(4));
const speedup = (s, lo, hi) =>
  s === null || s === undefined ? "-" : fmt(s) + "x" + (lo !== null && lo !== undefined ? ` [${fmt(lo)}, ${fmt(hi)}]` : "");
const secs = (s) => (s === null || s === undefined ? "-" : s < 120 ? s.toFixed(1) + " s" : (s / 60).toFixed(1) + " min");

function table(id, headers, rows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((cells) =>
      el("tr", {}, cells.map((c) => (c instanceof Node && c.tagName === "TD" ? c : el("td", {}, c)))))));
}
const num = (x) => el("td", { class: "num" }, x);

async function api(path) {
  const r = await fetch(path, { cache: "no-store" });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error || r.statusText);
  return j;
}

function render(...nodes) {
  for (const c of charts) c.destroy();
  charts = [];
  const m = main();
  const y = window.scrollY;
  m.replaceChildren(...nodes.flat());
  window.scrollTo(0, y);
}

// ---- charts (uPlot) ----
function chart(container, opts, data) {
  if (typeof uPlot === "undefined") {
    container.append(el("p", { class: "muted" }, "charts unavailable (uPlot not loaded)"));
    return;
  }
  const width = Math.max(320, container.clientWidth - 16 || 600);
  const u = new uPlot({ width, height: 260, ...opts }, data, container);
  charts.push(u);
}

// ---- pages ----
async function pageRuns(query) {
  const params = new URLSearchParams(query);
  const runs = await api("/api/runs?" + params.toString());
  const input = (name, label, placeholder) =>
    el("label", {}, label, el("input", { name, value: params.get(name) || "", placeholder }));
  const select = (name, label, options) => {
    const s = el("select", { name }, options.map((o) => el("option", { value: o }, o || "any")));
    s.value = params.get(name) || "";
    return el("label", {}, label, s);
  };
  const form = el("form", { class: "filters", id: "run-filters", onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(ev.target)) if (v) q.set(k, v);
    location.hash = "#/?" + q.toString();
  } },
    input("task", "task", "e.g. 023"),
    select("outcome", "outcome", ["", "improved", "no_improvement", "failed", "blocked", "timeout",
      "same", "regressed", "inconclusive", "rejected", "error"]),
    select("kind", "kind", ["", "optimize", "eval", "bench", "calibrate", "preflight", "profile"]),
    select("status", "status", ["", "running", "finished", "interrupted"]),
    input("since", "started on or after", "2026-11-30"),
    input("until", "started on or before", "2026-12-31"),
    el("button", { type: "submit" }, "Filter"));
  render(el("h1", {}, "Runs"), form,
    runs.length === 0 ? el("p", { class: "muted", id: "no-runs" }, "No run matches.") :
    table("runs-table", ["run", "kind", "status", "started", "finished", "tasks", "evaluations", "outcome", "reason"],
      runs.map((r) => [link(`#/run/${r.id}`, String(r.id)), r.kind, badge(r.status), r.started,
        r.finished || "-", r.tasks.join(" "), num(r.evaluations), badge(r.outcome || "-"), r.reason])));
}

async function pageRun(id) {
  const d = await api(`/api/runs/${id}`);
  const r = d.run;
  const facts = el("dl", { class: "facts" }, ...[["kind", r.kind], ["status", badge(r.status)],
    ["started", r.started], ["finished", r.finished || "-"],
    ["outcome", r.outcome ? el("span", {}, badge(r.outcome), " ", r.reason) : "-"],
    ["arguments", JSON.stringify(r.args)], ["kblaster", r.tool_version]]
    .flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  render(
    el("div", { class: "crumbs" }, link("#/", "Runs"), " / run " + r.id),
    el("h1", {}, `Run ${r.id} (${r.kind})`), facts,
    el("p", {}, el("a", { class: "button", id: "evidence-download", href: `/api/runs/${r.id}/evidence.tar`,
      download: `run-${r.id}-evidence.tar` }, "Download evidence (tar)"),
      r.kind === "bench" ? el("span", {}, " ", link(`#/suite?run=${r.id}`, "suite chart")) : null),
    el("h2", {}, "Tasks"),
    table("tasks-table", ["task", "outcome", "reason", "speedup [95% CI]", "floor", "evaluations", "time", "best strategy", ""],
      d.tasks.map((t) => [link(`#/run/${r.id}/task/${encodeURIComponent(t.task)}`, t.task), badge(t.outcome),
        t.reason, num(speedup(t.speedup, t.ci_low, t.ci_high)), num(pct(t.floor_fraction)), num(t.evaluations),
        num(secs(t.seconds)), t.strategy || "-",
        link(`#/run/${r.id}/task/${encodeURIComponent(t.task)}/roofline`, "roofline")])),
    el("h2", {}, `Evaluations (${d.evaluations.length})`),
    table("evaluations-table", ["id", "task", "candidate", "origin/strategy", "verdict", "reason", "speedup", "created"],
      d.evaluations.map((e) => [link(`#/run/${r.id}/eval/${e.id}`, String(e.id)), e.task, num(e.candidate),
        e.origin + (e.strategy ? "/" + e.strategy : ""), badge(e.verdict), e.reason,
        num(speedup(e.speedup, e.ci_low, e.ci_high)), e.created])));
}

async function pageSearch(run, task) {
  const d = await api(`/api/runs/${run}/tasks/${encodeURIComponent(task)}`);
  const byEval = el("div", { class: "chart", id: "curve-evaluations" });
  const byTime = el("div", { class: "chart", id: "curve-time" });
  render(
    el("div", { class: "crumbs" }, link("#/", "Runs"), " / ", link(`#/run/${run}`, `run ${run}`), ` / task ${task}`),
    el("h1", {}, `Search: task ${task}`),
    el("p", {}, `family ${d.family || "-"} on ${d.gpu || "-"}; best so far `, el("b", { id: "best-so-far" }, fmt(d.best) + "x"),
      " over the baseline · ", link(`#/run/${run}/task/${encodeURIComponent(task)}/roofline`, "roofline")),
    el("div", { class: "grid2" },
      el("div", {}, el("h2", {}, "Best so far over evaluations"), byEval),
      el("div", {}, el("h2", {}, "Best so far over wall time"), byTime)),
    el("h2", {}, `Candidates (${d.candidates.length})`),
    table("candidates-table", ["step", "evaluation", "origin/strategy", "verdict", "reason", "speedup vs compared [95% CI]",
      "vs baseline", "floor", "time", "message"],
      d.candidates.map((c) => [num(c.step), link(`#/run/${run}/eval/${c.id}`, String(c.id)),
        c.origin + (c.strategy ? "/" + c.strategy : ""), badge(c.verdict), el("span", { class: "reason" }, c.reason),
        num(speedup(c.speedup, c.ci_low, c.ci_high)), num(c.speedup_vs_baseline ? fmt(c.speedup_vs_baseline) + "x" : "-"),
        num(pct(c.floor_fraction)), num(secs(c.seconds)), c.message])),
    el("h2", {}, "Steps as the memory recorded them"),
    d.steps.length === 0 ? el("p", { class: "muted" }, "No memory records for this task in this run.") :
    table("steps-table", ["step", "bottleneck state", "strategy", "parameters", "predicted", "measured", "correct", "failure"],
      d.steps.map((s) => [num(s.step), s.state_before || "-", s.strategy, JSON.stringify(s.params),
        num(fmt(s.predicted_speedup)), num(fmt(s.measured_speedup)), s.correct ? "yes" : "no", s.failure_reason || ""])),
    el("h2", {}, `Memory's ranking of strategies (family ${d.family || "-"}, ${d.gpu || "-"})`),
    d.ranking.length === 0 ? el("p", { class: "muted" }, "The memory has no experience for this family and GPU.") :
    table("ranking-table", ["strategy", "attempts", "correct", "faster", "mean log2 speedup", "UCB1", "best", "last failure"],
      d.ranking.map((s) => [s.strategy, num(s.attempts), num(s.correct), num(s.successes), num(fmt(s.mean_reward)),
        num(s.ucb === null ? "∞" : fmt(s.ucb)), num(fmt(s.best_speedup) + "x"), s.last_failure || ""])));
  const steps = d.curve.map((p) => p.step), best = d.curve.map((p) => p.best);
  const series = [{}, { label: "best so far [x over baseline]", stroke: "#2456c7", width: 2, points: { show: true } }];
  chart(byEval, { series: [{ label: "evaluation" }, ...series.slice(1)], scales: { x: { time: false } },
    axes: [{ label: "evaluations" }, { label: "speedup" }] }, [steps, best]);
  const t = d.curve.filter((p) => p.wall_s !== null);
  chart(byTime, { series: [{ label: "wall [s]" }, ...series.slice(1)], scales: { x: { time: false } },
    axes: [{ label: "wall time [s]" }, { label: "speedup" }] }, [t.map((p) => p.wall_s), t.map((p) => p.best)]);
}

function highlighted(code, id) {
  const c = el("code", { class: "language-cpp hljs", id });
  if (typeof hljs !== "undefined") {
    // highlight.js escapes the source; its output holds only its own <span class> markup.
    c.innerHTML = hljs.highlight(code, { language: "cpp", ignoreIllegals: true }).value;
  } else {
    c.textContent = code;
  }
  return el("pre", {}, c);
}

function diffView(from, to, id, fromName, toName) {
  const pre = el("pre", { class: "diff", id });
  if (from === null || from === undefined || from === "") {
    pre.append(el("span", { class: "ctx" }, "(not in this run's records)"));
    return pre;
  }
  if (typeof Diff === "undefined") {
    pre.textContent = "diff unavailable (jsdiff not loaded)";
    return pre;
  }
  const patch = Diff.createTwoFilesPatch(fromName, toName, from, to, "", "", { context: 3 });
  for (const line of patch.split("\n").slice(2)) {
    const cls = line.startsWith("@@") ? "hunk" : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
    pre.append(el("span", { class: cls }, line));
  }
  if (from === to) pre.replaceChildren(el("span", { class: "ctx" }, "(identical)"));
  return pre;
}

async function pageEvaluation(run, id) {
  const d = await api(`/api/runs/${run}/evaluations/${id}`);
  const hist = el("div", { class: "chart", id: "timing-histogram" });
  const facts = el("dl", { class: "facts" }, ...[
    ["verdict", badge(d.verdict)], ["reason", el("span", { id: "verdict-reason" }, d.reason || "-")],
    ["message", el("span", { id: "verdict-message" }, d.message || "-")],
    ["origin/strategy", d.origin + (d.strategy ? "/" + d.strategy : "")], ["shape", d.shape || "-"],
    ["speedup [95% CI]", speedup(d.speedup, d.ci_low, d.ci_high)], ["p (Mann-Whitney)", fmt(d.p_value, 4)],
    ["medians [ms]", `candidate ${ms(d.candidate_median_s)}, compared ${ms(d.baseline_median_s)}`],
    ["floor fraction", pct(d.floor_fraction)], ["sandboxed", d.sandboxed ? "yes" : "no"],
  ].flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  const sessions = (d.session_medians || []).map((s, i) => [num(i + 1), num(ms(s.candidate)), num(ms(s.baseline)),
    num(s.candidate && s.baseline ? fmt(s.baseline / s.candidate) + "x" : "-")]);
  const b = d.build || {};
  render(
    el("div", { class: "crumbs" }, link("#/", "Runs"), " / ", link(`#/run/${run}`, `run ${run}`), " / ",
      link(`#/run/${run}/task/${encodeURIComponent(d.task)}`, `task ${d.task}`), ` / evaluation ${d.id}`),
    el("h1", {}, `Candidate ${d.candidate} of task ${d.task} (evaluation ${d.id})`), facts,
    el("h2", {}, "Source"), highlighted(d.source || "", "source"),
    el("div", { class: "grid2" },
      el("div", {}, el("h2", {}, "Diff against the task's baseline"),
        diffView(d.baseline_source, d.source || "", "diff-baseline", "baseline.cu", "candidate.cu")),
      el("div", {}, el("h2", {}, `Diff against the candidate it was compared with (${d.compared_with ?? "-"}: the best so far)`),
        diffView(d.compared_source, d.source || "", "diff-previous", "compared.cu", "candidate.cu"))),
    el("h2", {}, "Build"),
    el("p", {}, badge(b.status || "-"), " ", b.reason || "", ` · ${fmt(b.seconds, 2)} s`, b.cached ? " (cached)" : "",
      " · ", el("code", {}, (b.flags || []).join(" "))),
    el("pre", { id: "build-log" }, b.log || "(empty log)"),
    el("h2", {}, `Verification (${d.verification.length} checks)`),
    d.verification.length === 0 ? el("p", { class: "muted" }, "No verification was recorded.") :
    table("verification-table", ["set", "shape", "distribution", "seed", "output", "result", "max abs err", "max rel err",
      "p99 abs err", "rel L2", "violations", "reason"],
      d.verification.map((c) => [c.role, c.shape, c.distribution, String(c.seed ?? ""), c.output || "",
        badge(c.passed ? "passed" : "failed"), num(fmt(c.max_abs_err, 6)), num(fmt(c.max_rel_err, 6)),
        num(fmt(c.p99_abs_err, 6)), num(fmt(c.rel_l2, 9)), num(c.violations ?? "-"), c.reason || ""])),
    el("h2", {}, "Timing"),
    el("div", { class: "grid2" },
      el("div", {}, el("p", { class: "muted" }, `${d.samples.candidate.length} candidate and ${d.samples.baseline.length} compared samples [ms]`), hist),
      el("div", {}, el("p", { class: "muted" }, "Per-session medians [ms]"),
        sessions.length ? table("sessions-table", ["session", "candidate", "compared", "ratio"], sessions)
          : el("p", { class: "muted" }, "No timing sessions."))),
    el("h2", {}, "Sanitizers"),
    el("pre", { id: "sanitize" }, d.sanitize ? JSON.stringify(d.sanitize, null, 2) : "not run for this evaluation"),
    el("h2", {}, "Profiler"),
    el("pre", { id: "profile" }, d.profile || d.bottleneck ? JSON.stringify({ profile: d.profile, bottleneck: d.bottleneck }, null, 2)
      : "not profiled in this evaluation"));
  const all = d.samples.candidate.concat(d.samples.baseline);
  if (all.length) {
    const bins = 40, lo = Math.min(...all), hi = Math.max(...all), w = (hi - lo) / bins || 1e-12;
    const count = (vals) => { const ys = new Array(bins).fill(0); for (const v of vals) ys[Math.min(bins - 1, Math.floor((v - lo) / w))]++; return ys; };
    const xs = Array.from({ length: bins }, (_, i) => 1e3 * (lo + (i + 0.5) * w));
    const bars = typeof uPlot !== "undefined" ? uPlot.paths.bars({ size: [0.9, 40] }) : undefined;
    chart(hist, { scales: { x: { time: false } }, axes: [{ label: "time [ms]" }, { label: "samples" }],
      series: [{ label: "ms" }, { label: "candidate", fill: "rgba(36,86,199,0.45)", stroke: "#2456c7", paths: bars, points: { show: false } },
        { label: "compared", fill: "rgba(160,90,0,0.35)", stroke: "#a05a00", paths: bars, points: { show: false } }] },
      [xs, count(d.samples.candidate), count(d.samples.baseline)]);
  } else {
    hist.append(el("p", { class: "muted" }, "No timing samples (not timed)."));
  }
}

async function pageRoofline(run, task) {
  const d = await api(`/api/runs/${run}/tasks/${encodeURIComponent(task)}/roofline`);
  const box = el("div", { class: "chart", id: "roofline-chart" });
  render(
    el("div", { class: "crumbs" }, link("#/", "Runs"), " / ", link(`#/run/${run}`, `run ${run}`), " / ",
      link(`#/run/${run}/task/${encodeURIComponent(task)}`, `task ${task}`), " / roofline"),
    el("h1", {}, `Roofline: task ${task} ${d.name || ""}`),
    d.available ? el("p", { class: "muted" }, `ceilings: ${(d.bandwidth / 1e12).toFixed(2)} TB/s, ${(d.fp32_flops / 1e12).toFixed(0)} TFLOP/s fp32 (${d.ceilings_source}); ridge at ${fmt(d.ridge, 1)} FLOP/byte`)
      : el("p", { class: "muted" }, d.reason),
    box,
    el("h2", {}, "Kernels placed"),
    table("roofline-table", ["evaluation", "kernel", "verdict", "shape", "time [ms]", "FLOP/byte", "GFLOP/s", "GB/s", "floor"],
      d.points.map((p) => [link(`#/run/${run}/eval/${p.evaluation}`, String(p.evaluation)), p.label, badge(p.verdict || "-"),
        p.shape, num(ms(p.seconds)), num(fmt(p.intensity, 3)), num(fmt(p.flops_per_s / 1e9, 1)),
        num(fmt(p.bytes_per_s / 1e9, 1)), num(pct(p.floor_fraction))])));
  if (!d.available || !d.points.length) return;
  const xsSet = new Set([1e-2, d.ridge, 1e3]);
  for (const p of d.points) xsSet.add(Math.max(p.intensity, 1e-3));
  const xs = [...xsSet].sort((a, b) => a - b);
  const roof = xs.map((x) => Math.min(d.bandwidth * x, d.fp32_flops) / 1e9);
  const colors = ["#2456c7", "#137333", "#b3261e", "#a05a00", "#7b3fb3", "#0b7f86"];
  const series = [{ label: "FLOP/byte" }, { label: "roof [GFLOP/s]", stroke: "#1d2330", width: 2, points: { show: false } }];
  const data = [xs, roof];
  d.points.forEach((p, i) => {
    series.push({ label: p.label, stroke: colors[i % colors.length], width: 0, points: { show: true, size: 9 } });
    data.push(xs.map((x) => (x === Math.max(p.intensity, 1e-3) ? p.flops_per_s / 1e9 : null)));
  });
  chart(box, { height: 360, scales: { x: { time: false, distr: 3 }, y: { distr: 3 } },
    axes: [{ label: "arithmetic intensity [FLOP/byte]" }, { label: "GFLOP/s", size: 70 }], series }, data);
}

async function pageSuite(query) {
  const params = new URLSearchParams(query);
  const d = await api("/api/suite" + (params.get("run") ? "?run=" + encodeURIComponent(params.get("run")) : ""));
  const box = el("div", { class: "chart", id: "suite-chart" });
  render(el("h1", {}, "Suite: speedups"),
    d.available ? el("p", { class: "muted" }, `from ${d.source}` + (d.pytorch_source ? `; PyTorch timings from ${d.pytorch_source}` : "; no PyTorch timings"))
      : el("p", { class: "muted", id: "no-suite" }, "No bench run in the store and no --bench file."),
    box,
    table("suite-table", ["task", "shape", "verdict", "speedup over baseline [95% CI]", ...d.methods.map((m) => "over PyTorch " + m)],
      d.rows.map((r) => [r.task, r.shape, badge(r.verdict),
        num(speedup(r.speedup, r.ci_low, r.ci_high)), ...d.methods.map((m) => num(r.vs_pytorch[m] ? fmt(r.vs_pytorch[m]) + "x" + (r.resolved === false ? "*" : "") : "-"))])),
    d.rows.some((r) => r.resolved === false)
      ? el("p", { class: "muted", id: "suite-resolution" }, "* below the timing resolution: our median is under 10 times the judge's resolution (about 2 us), so the ratio to PyTorch is not a measurement of the kernel")
      : "");
  if (!d.rows.length) return;
  const xs = d.rows.map((_, i) => i);
  const colors = ["#2456c7", "#b3261e", "#137333", "#a05a00", "#7b3fb3"];
  const series = [{ label: "task" }, { label: "over baseline", stroke: colors[0], width: 0, points: { show: true, size: 10 } }];
  const data = [xs, d.rows.map((r) => r.speedup)];
  d.methods.forEach((m, i) => {
    series.push({ label: "over PyTorch " + m, stroke: colors[(i + 1) % colors.length], width: 0, points: { show: true, size: 10 } });
    data.push(d.rows.map((r) => r.vs_pytorch[m] ?? null));
  });
  series.push({ label: "1x", stroke: "#999", dash: [4, 4], points: { show: false } });
  data.push(xs.map(() => 1));
  chart(box, { height: 320, scales: { x: { time: false, range: [-0.5, xs.length - 0.5] }, y: { distr: 3 } },
    axes: [{ label: "task", values: (u, ticks) => ticks.map((t) => (Number.isInteger(t) && d.rows[t] ? d.rows[t].task : "")), splits: () => xs },
      { label: "speedup [x]" }], series }, data);
}

// ---- routing and live updates ----
async function route() {
  const h = location.hash.replace(/^#/, "") || "/";
  const [path, query] = h.split("?");
  const p = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (p.length === 0) return await pageRuns(query || "");
    if (p[0] === "suite") return await pageSuite(query || "");
    if (p[0] === "run" && p.length === 2) return await pageRun(p[1]);
    if (p[0] === "run" && p[2] === "task" && p.length === 4) return await pageSearch(p[1], p[3]);
    if (p[0] === "run" && p[2] === "task" && p[4] === "roofline") return await pageRoofline(p[1], p[3]);
    if (p[0] === "run" && p[2] === "eval" && p.length === 4) return await pageEvaluation(p[1], p[3]);
    render(el("p", { class: "error" }, "No such page: " + h));
  } catch (e) {
    render(el("p", { class: "error", id: "page-error" }, String(e.message || e)));
  }
}

async function poll() {
  const live = document.getElementById("live");
  try {
    const v = (await api("/api/version")).version;
    if (currentVersion !== null && v !== currentVersion) {
      currentVersion = v;
      await route();
    }
    currentVersion = v;
    live.textContent = "live · " + new Date().toLocaleTimeString();
    live.className = "live";
    document.body.dataset.version = v;
  } catch (e) {
    live.textContent = "server unreachable";
    live.className = "live stale";
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  route();
  poll();
  setInterval(poll, 1500);
});
