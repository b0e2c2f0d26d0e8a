// The dashboard in a real browser: Debian's Chromium, headless, driven by playwright-core.
//
//   node dashboard.mjs test --bin BUILD_DIR --fill FILL_STORE --root ROOT --out DIR
//       fills a fresh store with fill_store (a recorded optimize run, an eval run whose candidate
//       carries script, a bench run), starts `kblaster serve` on a free loopback port and checks
//       the pages: the runs table and its filters, a search and its rejected candidate's reason,
//       the live update after a new evaluation is written while the page is open, the injection
//       (script in a candidate shows as text, never runs), the evidence download (checked with
//       `kblaster evidence check`), and a screenshot of each main page checked for gross breakage.
//   node dashboard.mjs screenshots --bin BUILD_DIR --store STORE --out DIR [--bench FILE]
//       the screenshots of an existing store (scripts/dashboard-screenshots.sh).
import { spawn, execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import zlib from "node:zlib";
import { createRequire } from "node:module";

const require = createRequire(path.join(path.dirname(new URL(import.meta.url).pathname), "../../web/package.json"));
const { chromium } = require("playwright-core");

const args = { mode: process.argv[2] };
for (let i = 3; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, "")] = process.argv[i + 1];
const chromiumPath = process.env.KBLASTER_CHROMIUM || "/usr/bin/chromium";
let failures = 0;
const check = (ok, what) => {
  console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
  if (!ok) failures++;
};

// The server's access token: every request carries it (node's fetch as a header, the browser as
// the cookie the server sets).
const token = crypto.randomBytes(24).toString("hex");
const plainFetch = globalThis.fetch;
globalThis.fetch = (u, o = {}) => plainFetch(u, { ...o, headers: { ...(o.headers || {}), Authorization: `Bearer ${token}` } });

function startServer(bin, store, extra = []) {
  const portFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "kb-serve-")), "port");
  const proc = spawn(path.join(bin, "kblaster"), ["serve", "--store", store, "--port", "0", "--port-file", portFile, ...extra],
    { stdio: ["ignore", "inherit", "inherit"], env: { ...process.env, KBLASTER_SERVE_TOKEN: token } });
  return new Promise((resolve, reject) => {
    const t0 = Date.now();
    const wait = () => {
      if (fs.existsSync(portFile) && fs.readFileSync(portFile, "utf8").trim()) {
        return resolve({ proc, url: `http://127.0.0.1:${fs.readFileSync(portFile, "utf8").trim()}` });
      }
      if (proc.exitCode !== null) return reject(new Error(`kblaster serve exited with ${proc.exitCode}`));
      if (Date.now() - t0 > 20000) return reject(new Error("kblaster serve did not start in 20 s"));
      setTimeout(wait, 100);
    };
    wait();
  });
}

async function launch() {
  const userData = fs.mkdtempSync(path.join(os.tmpdir(), "kb-chromium-"));
  const context = await chromium.launchPersistentContext(userData, {
    executablePath: chromiumPath, headless: true, chromiumSandbox: false,
    viewport: { width: 1400, height: 900 },
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
  });
  await context.addCookies([{ name: "kblaster_token", value: token, domain: "127.0.0.1", path: "/" }]);
  return { context, userData };
}

// Width, height and how varied a PNG is: a blank or broken page is one colour.
function pngStats(file) {
  const b = fs.readFileSync(file);
  const width = b.readUInt32BE(16), height = b.readUInt32BE(20);
  const idat = [];
  for (let off = 8; off < b.length;) {
    const len = b.readUInt32BE(off), type = b.toString("ascii", off + 4, off + 8);
    if (type === "IDAT") idat.push(b.subarray(off + 8, off + 8 + len));
    off += 12 + len;
  }
  const raw = zlib.inflateSync(Buffer.concat(idat));
  const hist = new Map();
  for (let i = 0; i < raw.length; i += 7) hist.set(raw[i], (hist.get(raw[i]) || 0) + 1);
  const top = Math.max(...hist.values());
  return { width, height, bytes: b.length, distinct: hist.size, dominant: top / Math.ceil(raw.length / 7) };
}

async function shoot(page, url, file, selectors, what) {
  await page.goto(url);
  for (const s of selectors) {
    await page.locator(s).first().waitFor({ state: "visible", timeout: 15000 });
  }
  await page.waitForTimeout(300); // charts draw on the next frame
  await page.screenshot({ path: file, fullPage: false });
  const s = pngStats(file);
  check(s.width === 1400 && s.height === 900, `${what}: screenshot is 1400x900 (${s.width}x${s.height})`);
  // A blank page is one byte value but for the rows' filter bytes (> 99.9%).
  check(s.distinct > 30 && s.dominant < 0.995 && s.bytes > 20000,
    `${what}: screenshot is not blank (${s.distinct} byte values, dominant ${(100 * s.dominant).toFixed(1)}%, ${s.bytes} bytes)`);
  for (const sel of selectors) {
    const box = await page.locator(sel).first().boundingBox();
    check(box && box.width > 50 && box.height > 10, `${what}: ${sel} visible (${box ? `${box.width | 0}x${box.height | 0}` : "none"})`);
  }
}

async function screenshots(page, url, out, ids) {
  fs.mkdirSync(out, { recursive: true });
  await shoot(page, `${url}/#/`, path.join(out, "runs.png"), ["#runs-table"], "runs page");
  await shoot(page, `${url}/#/run/${ids.run}`, path.join(out, "run.png"), ["#tasks-table"], "run page");
  await shoot(page, `${url}/#/run/${ids.run}/task/${ids.task}`, path.join(out, "search.png"),
    ["#curve-evaluations canvas", "#candidates-table"], "search page");
  await shoot(page, `${url}/#/run/${ids.run}/eval/${ids.evaluation}`, path.join(out, "candidate.png"),
    ["#source", "#verification-table"], "candidate page");
  await shoot(page, `${url}/#/run/${ids.run}/task/${ids.task}/roofline`, path.join(out, "roofline.png"),
    ["#roofline-chart canvas", "#roofline-table"], "roofline page");
  await shoot(page, `${url}/#/suite` + (ids.bench ? `?run=${ids.bench}` : ""), path.join(out, "suite.png"),
    ["#suite-chart canvas", "#suite-table"], "suite page");
}

const rows = (page, table) => page.locator(`#${table} tbody tr`).count();

async function api(url) {
  const r = await fetch(url);
  return r.json();
}

// The pages to show from a store: the newest optimize run (else the newest run), its task with the
// most evaluations, and that task's best candidate (else its newest timed one).
async function pickPages(url) {
  const runs = await api(`${url}/api/runs`);
  const run = runs.find((r) => r.kind === "optimize" && r.evaluations > 0) || runs.find((r) => r.evaluations > 0);
  if (!run) throw new Error("the store has no run with evaluations");
  const detail = await api(`${url}/api/runs/${run.id}`);
  const task = detail.tasks.slice().sort((a, b) => b.evaluations - a.evaluations)[0];
  const search = await api(`${url}/api/runs/${run.id}/tasks/${task.task}`);
  const timed = search.candidates.filter((c) => c.speedup !== null);
  const best = timed.find((c) => c.candidate === task.best_candidate) || timed[timed.length - 1] || search.candidates[0];
  const bench = runs.find((r) => r.kind === "bench");
  return { run: run.id, task: task.task, evaluation: best.id, bench: bench ? bench.id : null };
}

async function testMode() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "kb-dashboard-"));
  const store = path.join(tmp, "store");
  const ids = JSON.parse(execFileSync(args.fill, [store, args.root], { encoding: "utf8" }));
  console.log("filled store:", JSON.stringify(ids));
  const { proc, url } = await startServer(args.bin, store);
  const { context, userData } = await launch();
  const page = context.pages()[0] || (await context.newPage());
  const consoleErrors = [];
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  try {
    // Headers: no inline script may run.
    const head = await fetch(`${url}/`);
    check((head.headers.get("content-security-policy") || "").includes("script-src 'self'"),
      "Content-Security-Policy allows scripts from the server only");

    // Runs list and filters.
    await page.goto(`${url}/#/`);
    await page.locator("#runs-table").waitFor();
    check(await rows(page, "runs-table") === 3, "runs table lists the 3 recorded runs");
    const first = await page.locator("#runs-table tbody tr").first().innerText();
    check(first.includes("bench") && first.includes("finished"), `newest run first: ${first.replace(/\s+/g, " ")}`);
    await page.goto(`${url}/#/?task=023`);
    await page.waitForFunction(() => document.querySelectorAll("#runs-table tbody tr").length === 2);
    check(true, "filter task=023 leaves the optimize and bench runs");
    await page.goto(`${url}/#/?kind=eval&outcome=rejected`);
    await page.waitForFunction(() => document.querySelectorAll("#runs-table tbody tr").length === 1);
    check(true, "filter kind=eval, outcome=rejected leaves the injection run");
    await page.goto(`${url}/#/?since=2999-01-01`);
    await page.locator("#no-runs").waitFor();
    check(true, "filter since=2999-01-01 leaves no run");

    // A run's tasks.
    await page.goto(`${url}/#/run/${ids.optimize}`);
    await page.locator("#tasks-table").waitFor();
    const taskText = await page.locator("#tasks-table").innerText();
    check(await rows(page, "tasks-table") === 2 && taskText.includes("023") && taskText.includes("019"),
      "run page lists tasks 023 and 019");
    check(/improved|no_improvement|failed/.test(taskText), "each task shows its outcome");

    // A search: the rejected candidate and its reason.
    await page.goto(`${url}/#/run/${ids.optimize}/task/023`);
    await page.locator("#candidates-table").waitFor();
    await page.locator("#curve-evaluations canvas").waitFor();
    const candidates = await page.locator("#candidates-table").innerText();
    check(candidates.includes("verify.mismatch") && candidates.includes("build.compile_error"),
      "search lists the rejected candidates with their reasons");
    check(await rows(page, "steps-table") > 0, "search shows the memory's steps (bottleneck state, strategy)");
    check(await rows(page, "ranking-table") > 0, "search shows the memory's ranking of strategies");
    const rejected = page.locator("#candidates-table tbody tr", { hasText: "verify.mismatch" }).first();
    await rejected.locator("a").first().click();
    await page.locator("#verdict-reason").waitFor();
    check((await page.locator("#verdict-reason").innerText()) === "verify.mismatch", "candidate page shows the rejection reason");
    const verification = await page.locator("#verification-table").innerText();
    check(verification.includes("failed") && verification.includes("passed"), "verification table shows the failing check among the passing");

    // Live: a new evaluation written while the page is open appears without a reload.
    await page.goto(`${url}/#/run/${ids.optimize}/task/023`);
    await page.locator("#candidates-table").waitFor();
    const before = await rows(page, "candidates-table");
    await page.evaluate(() => { window.__samePage = "yes"; });
    execFileSync(args.fill, [store, args.root, "--add", String(ids.optimize)]);
    await page.waitForFunction((n) => document.querySelectorAll("#candidates-table tbody tr").length === n + 1, before,
      { timeout: 20000 });
    check(await page.evaluate(() => window.__samePage) === "yes", "live update: the page was not reloaded");
    check((await page.locator("#candidates-table").innerText()).includes("row.live_update"),
      "live update: the new evaluation appears in the open search page");

    // Injection: script in a candidate's source, strategy, message and log is shown as text.
    const inj = await api(`${url}/api/runs/${ids.injection}`);
    await page.goto(`${url}/#/run/${ids.injection}/eval/${inj.evaluations[0].id}`);
    await page.locator("#source").waitFor();
    await page.waitForTimeout(500);
    const source = await page.locator("#source").textContent();
    check(source.includes("<script>window.__pwned = 1;</script>"), "injection: <script> in the source is shown as text");
    check(source.includes('<img src=x onerror="window.__pwned = 2">'), "injection: <img onerror> in the source is shown as text");
    check((await page.locator("#build-log").textContent()).includes("<script>window.__pwned = 5;</script>"),
      "injection: the build log is shown as text");
    check((await page.locator("#verdict-message").textContent()).includes("<img src=x"), "injection: the model's message is shown as text");
    check((await page.locator("main").innerText()).includes("<script>window.__pwned = 3;</script>"), "injection: the strategy name is shown as text");
    check(await page.evaluate(() => window.__pwned) === undefined, "injection: no script from the store ran");
    check(await page.locator("main script, main img, main iframe").count() === 0, "injection: no script, img or iframe element in the page body");

    // Evidence download, checked by kblaster itself.
    const tar = path.join(tmp, "evidence.tar");
    const resp = await page.request.get(`${url}/api/runs/${ids.optimize}/evidence.tar`);
    fs.writeFileSync(tar, await resp.body());
    check((resp.headers()["content-disposition"] || "").includes(`run-${ids.optimize}-evidence.tar`), "evidence is a download");
    execFileSync("tar", ["-xf", tar, "-C", tmp]);
    let evidenceOk = true;
    try {
      execFileSync(path.join(args.bin, "kblaster"), ["evidence", "check", path.join(tmp, `run-${ids.optimize}-evidence`)], { stdio: "inherit" });
    } catch { evidenceOk = false; }
    check(evidenceOk, "downloaded evidence passes kblaster evidence check");

    // Suite page: bench run against each PyTorch method.
    await page.goto(`${url}/#/suite?run=${ids.bench}`);
    await page.locator("#suite-table").waitFor();
    const suite = await page.locator("#suite-table").innerText();
    check(suite.includes("over PyTorch eager") && suite.includes("over PyTorch compile_max_autotune") && await rows(page, "suite-table") === 2,
      "suite page compares with each PyTorch method");

    // API errors are JSON with a status.
    const missing = await fetch(`${url}/api/runs/999999`);
    check(missing.status === 404 && (await missing.json()).error.includes("no run 999999"), "unknown run: 404 with a message");

    // Screenshots of each main page.
    await screenshots(page, url, args.out, await pickPages(url));
    check(consoleErrors.length === 0, `no errors in the browser console${consoleErrors.length ? ": " + consoleErrors.join(" | ") : ""}`);
  } finally {
    await context.close();
    proc.kill("SIGTERM");
    fs.rmSync(userData, { recursive: true, force: true });
  }
}

async function screenshotMode() {
  const extra = args.bench ? ["--bench", args.bench] : [];
  const { proc, url } = await startServer(args.bin, args.store, extra);
  const { context, userData } = await launch();
  try {
    const page = context.pages()[0] || (await context.newPage());
    const ids = await pickPages(url);
    console.log("pages:", JSON.stringify(ids));
    await screenshots(page, url, args.out, ids);
  } finally {
    await context.close();
    proc.kill("SIGTERM");
    fs.rmSync(userData, { recursive: true, force: true });
  }
}

try {
  if (args.mode === "test") await testMode();
  else if (args.mode === "screenshots") await screenshotMode();
  else throw new Error("usage: dashboard.mjs test|screenshots ...");
} catch (e) {
  console.log("FAIL", e.stack || e);
  failures++;
}
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
