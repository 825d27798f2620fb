// rate.mjs URL TOKEN RATER MAX - one rater rates up to MAX answers on the grit rate
// page in Debian's Chromium (headless, playwright-core from web/node_modules), with the
// keyboard only: a digit for the score, f for fabrication, Enter to submit (a comment is
// typed for some answers first). The score and flags are a function of the answer id and
// the rater (printed, so the test knows what was submitted). Prints one line per rating:
// "rated ANSWER SCORE FAB POSITION TOTAL"; then "done" if the page said all are rated.
// Checks that the page never shows which checkpoint wrote the answer.
import {createRequire} from "node:module";
import {mkdtempSync, rmSync} from "node:fs";
import {tmpdir} from "node:os";
import {join, dirname} from "node:path";
import {fileURLToPath} from "node:url";

const [url, token, rater, maxArg] = process.argv.slice(2);
const max = Number(maxArg);
const web = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "web");
const {chromium} = createRequire(join(web, "package.json"))("playwright-core");
const profile = mkdtempSync(join(tmpdir(), "grit-chromium-"));
let ctx, bad = 0;
const salt = rater === "bob" ? 1 : 0;
try {
  ctx = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.GRIT_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const page = ctx.pages()[0] || await ctx.newPage();
  page.on("pageerror", (e) => { console.log("FAIL: script error: " + e.message); bad++; });
  await page.goto(url + "#token=" + token);
  let n = 0;
  for (;;) {
    await page.waitForSelector("body[data-state=item], body[data-state=done]", {timeout: 10000});
    const state = await page.evaluate(() => document.body.dataset.state);
    if (state === "done") { console.log("done"); break; }
    if (n >= max) break;
    const id = Number(await page.getAttribute("#item", "data-answer"));
    const progress = await page.textContent("#progress");
    const shown = await page.textContent("body");
    if (/step_|ckpt|checkpoint/i.test(shown)) { console.log("FAIL: the page names a checkpoint"); bad++; }
    const score = 1 + ((id * 3 + salt * (id % 2)) % 5);
    const fab = id % 3 === 0;
    await page.keyboard.press(String(score));
    if (fab) await page.keyboard.press("f");
    if (id % 4 === 1) {
      await page.click("#comment");
      await page.keyboard.type(`said "x", ok (${rater})`);
    }
    await page.keyboard.press("Enter");
    await page.waitForFunction((prev) => document.body.dataset.state === "done" ||
      document.querySelector("#item").dataset.answer !== String(prev), id, {timeout: 10000});
    const m = /Answer (\d+) of (\d+)/.exec(progress);
    console.log(`rated ${id} ${score} ${fab ? 1 : 0} ${m ? m[1] : "?"} ${m ? m[2] : "?"}`);
    n++;
  }
} catch (e) {
  console.log("FAIL: " + e.message);
  bad++;
} finally {
  if (ctx) await ctx.close();
  rmSync(profile, {recursive: true, force: true});
}
process.exit(bad ? 1 : 0);
