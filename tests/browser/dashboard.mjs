// dashboard.mjs URL STEPS SCREENSHOT - drives Debian's Chromium (headless, through
// playwright-core from web/node_modules) to the dashboard of a run that had a node
// killed, saves a full-page screenshot, and checks the page: every chart holds the run's
// STEPS points and its canvas has the series drawn on it, the restart is marked, the
// incident is listed, the cordoned node is shown with its reason, the cost panel is
// filled, and the page made no request outside the grit server and no script error.
import {createRequire} from "node:module";
import {mkdtempSync, rmSync} from "node:fs";
import {tmpdir} from "node:os";
import {join, dirname} from "node:path";
import {fileURLToPath} from "node:url";

const [url, stepsArg, shot] = process.argv.slice(2);
const steps = Number(stepsArg);
const web = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "web");
const {chromium} = createRequire(join(web, "package.json"))("playwright-core");

const failures = [];
const fail = (m) => { failures.push(m); console.log("FAIL: " + m); };
const ok = (m) => console.log("ok   " + m);
const profile = mkdtempSync(join(tmpdir(), "grit-chromium-"));
let ctx;
try {
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.GRIT_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: {width: 1400, height: 900},
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const origin = new URL(url).origin;
  const outside = [];
  await ctx.route("**/*", (route) => {
    const u = route.request().url();
    if (u.startsWith(origin + "/")) return route.continue();
    outside.push(u);
    return route.abort();
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(url);
  await page.waitForSelector("body[data-loaded='1']", {timeout: 20000});
  await page.waitForTimeout(300); // let uPlot paint

  const charts = await page.evaluate(() => {
    const out = {};
    for (const [name, u] of Object.entries(window.gritDash.charts)) {
      const ys = u.data[1] || [];
      // the series' stroke colour on the canvas: proof it was drawn, not just given data
      const c = u.ctx.canvas, px = u.ctx.getImageData(0, 0, c.width, c.height).data;
      const want = u.series[1].stroke();
      const rgb = [1, 3, 5].map((i) => parseInt(want.slice(i, i + 2), 16));
      let hits = 0;
      for (let i = 0; i < px.length; i += 4)
        if (Math.abs(px[i] - rgb[0]) < 8 && Math.abs(px[i + 1] - rgb[1]) < 8 && Math.abs(px[i + 2] - rgb[2]) < 8) hits++;
      out[name] = {x: u.data[0].length, y: ys.filter((v) => v !== null && Number.isFinite(v)).length, hits};
    }
    return out;
  });
  for (const [name, c] of Object.entries(charts)) {
    if (c.x === steps && c.y === steps && c.hits > 50)
      ok(`chart ${name}: ${c.y} points, ${c.hits} pixels of its line drawn`);
    else fail(`chart ${name}: ${c.x} x / ${c.y} y points (want ${steps}), ${c.hits} pixels drawn`);
  }
  const restarts = await page.evaluate(() => window.gritDash.view.restarts.map((r) => r.step));
  restarts.length >= 1 ? ok(`restart marked at step ${restarts.join(", ")}`) : fail("no restart marked");

  const inc = await page.$$eval("#incidents tr.incident", (rows) => rows.map((r) => r.innerText));
  if (inc.length === 1 && /exit/.test(inc[0]) && /node1/.test(inc[0]) && /node2/.test(inc[0]) && /at step/.test(inc[0]))
    ok(`incident listed: ${inc[0].replace(/\s+/g, " ")}`);
  else fail(`incident table: ${JSON.stringify(inc)}`);

  const bars = await page.$$eval("#incidents tr.incident .phases .ph", (s) => s.map((e) => e.title));
  bars.some((t) => t.startsWith("detect")) && bars.some((t) => t.startsWith("restart"))
    ? ok(`incident timeline: ${bars.join(", ")}`) : fail(`incident timeline bars: ${JSON.stringify(bars)}`);

  const cord = await page.$$eval(".node[data-state='cordoned']", (ns) => ns.map((n) => n.dataset.node + ": " + n.innerText));
  if (cord.length === 1 && cord[0].startsWith("node1") && /unreachable|died/.test(cord[0]))
    ok(`cordoned node shown: ${cord[0].replace(/\s+/g, " ")}`);
  else fail(`cordoned nodes: ${JSON.stringify(cord)}`);
  const active = await page.$$eval(".node[data-state='active']", (ns) => ns.map((n) => n.dataset.node));
  JSON.stringify(active) === '["node0","node2"]' ? ok("active nodes node0, node2 (the spare took node1's place)")
                                                 : fail(`active nodes ${JSON.stringify(active)}`);

  const cost = await page.$eval("#cost", (t) => t.innerText);
  /kWh/.test(cost) && /per node-hour/.test(cost) && /kg at 400 g\/kWh/.test(cost)
    ? ok("cost, energy and CO2 shown") : fail(`cost panel: ${cost}`);
  const ckpts = await page.$$eval("#ckpts tbody tr", (rows) => rows.length);
  ckpts >= 3 ? ok(`${ckpts} checkpoints listed`) : fail(`${ckpts} checkpoints listed`);

  await page.screenshot({path: shot, fullPage: true});
  ok(`screenshot ${shot}`);
  outside.length ? fail(`requests outside the grit server: ${outside.join(", ")}`) : ok("no outside requests");
  errors.length ? fail(`page errors: ${errors.join(" | ")}`) : ok("no script errors");
} catch (e) {
  fail(String(e && e.stack || e));
} finally {
  if (ctx) await ctx.close();
  rmSync(profile, {recursive: true, force: true});
}
process.exit(failures.length ? 1 : 0);
