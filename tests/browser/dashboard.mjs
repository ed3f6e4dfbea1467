// The dashboard in a real browser (tests/t31_dashboard.rs runs this): Playwright drives
// Debian's Chromium, headless, with a fresh profile and no network, through the dashboard of
// a 3-node fleet. It prints `step NAME` at each milestone and reads a line from stdin where
// it waits for the test to act (`run TURN LAUNCH`, `killed NODE`). On a failure it takes
// failure.png, prints `fail STEP: why` and the page's text on stderr, and exits 1.
//
// Env: PLAYWRIGHT_CORE (the playwright-core package's directory), CHROMIUM (the browser),
// DASHBOARD_URL (a node's HTTP listener), BOXFLEET_TOKEN, SCREENSHOTS (a directory),
// STEP_TIMEOUT_MS (default 60000).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";
import { createRequire } from "node:module";

for (const name of ["PLAYWRIGHT_CORE", "DASHBOARD_URL", "BOXFLEET_TOKEN", "SCREENSHOTS"]) {
  if (!process.env[name]) {
    console.log(`fail start: ${name} is not set`);
    console.error(`fail start: ${name} is not set (see tests/browser/README.md)`);
    process.exit(1);
  }
}
// the package's directory: its index.js (CommonJS) is in every release
const { chromium } = createRequire(import.meta.url)(process.env.PLAYWRIGHT_CORE);
const base = process.env.DASHBOARD_URL.replace(/\/+$/, "");
const token = process.env.BOXFLEET_TOKEN;
const shots = process.env.SCREENSHOTS;
const timeout = Number(process.env.STEP_TIMEOUT_MS || 60000);
fs.mkdirSync(shots, { recursive: true });

// stdin lines, kept until asked for: a line that arrives early is not lost; stdin closed
// (the test gone) fails the step that waits instead of hanging it
const waiting = [];
const arrived = [];
let closed = false;
const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const next = waiting.shift();
  if (next) next.resolve(line.trim()); else arrived.push(line.trim());
});
lines.on("close", () => {
  closed = true;
  for (const next of waiting.splice(0)) next.reject(new Error("stdin closed before the test said what it did"));
});
const nextLine = () => arrived.length ? Promise.resolve(arrived.shift())
  : closed ? Promise.reject(new Error("stdin closed before the test said what it did"))
  : new Promise((resolve, reject) => waiting.push({ resolve, reject }));
// the next line, which must be `<word> <args…>`
async function told(word, count) {
  const line = await nextLine();
  const parts = line.split(/\s+/);
  if (parts[0] !== word || parts.length < 1 + count) throw new Error(`expected \`${word} …\` on stdin, read \`${line}\``);
  return parts.slice(1);
}

// `step` is the milestone being worked towards: a failure is named after it
let step = "signed-in";
const said = (name, next) => { console.log("step " + name); step = next || name; };
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "boxfleet-dashboard-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1360, height: 900 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
}).catch((error) => {
  console.log(`fail launch: ${String(error.message || error).split("\n")[0]}`);
  console.error(`fail launch: the browser did not start (CHROMIUM=${process.env.CHROMIUM || "/usr/bin/chromium"}): ${error.stack || error}`);
  process.exit(1);
});
const page = context.pages()[0] || await context.newPage();
page.setDefaultTimeout(timeout);
const shoot = (name, fullPage) => page.screenshot({ path: path.join(shots, name), fullPage: !!fullPage });

async function run() {
  // a: the page sends a viewer with no credential to sign in, and back
  await page.goto(base + "/");
  await page.waitForURL(/\/login/);
  await page.fill("#token", token);
  await page.click("#sign-in");
  // back on the board, or the login page again saying why the token is refused
  await page.waitForFunction(() => location.pathname === "/" || document.getElementById("refused"));
  const refused = await page.evaluate(() => location.pathname === "/" ? null : document.getElementById("refused")?.textContent);
  if (refused) throw new Error("the token is refused: " + refused.trim());
  await page.waitForURL((url) => url.pathname === "/");
  await page.waitForFunction(() => document.getElementById("who")?.textContent.trim().length > 0);
  await page.waitForSelector("table#board");
  said("signed-in", "board");

  // b: the run appears on the board, with its role and agent id
  const [turn] = await told("run", 2);
  const row = page.locator(`#board-rows tr[data-turn="${turn}"]`);
  await row.waitFor();
  await page.waitForFunction((t) => {
    const r = document.querySelector(`#board-rows tr[data-turn="${t}"]`);
    return r && r.querySelector("td.role").textContent.trim() && r.querySelector("td.agent-id").textContent.trim();
  }, turn);
  await shoot("board.png");
  said("board", "tail");
  await row.locator("a").first().click();
  await page.waitForURL((url) => url.pathname === "/runs/" + encodeURIComponent(turn));

  // c: the live tail follows the job
  await page.waitForFunction(() => document.getElementById("tail")?.textContent.includes("step 2/4"));
  await shoot("run-live.png");
  said("tail", "parked");

  // d: it parks on a question, answered from the page
  await page.waitForSelector("#question-text", { state: "visible" });
  await shoot("run-parked.png");
  said("parked", "answered");
  await page.fill("#answer-text", "SQLite");
  await page.click("#answer-send");
  await page.waitForFunction(() => document.getElementById("answer-outcome")?.textContent.includes("recorded"));
  said("answered", "card");

  // e: the resumed job's card
  const card = page.locator("section.card.phase", { hasText: "Findings" });
  await card.waitFor();
  const text = await card.innerText();
  for (const fact of ["Tokens", "Model", "Delivered"]) {
    if (!text.includes(fact)) throw new Error(`the phase card has no ${fact}: ${text}`);
  }
  await shoot("run-card.png", true);
  said("card", "fleet");

  // f: the fleet, live, with its supervision tree
  await page.goto(base + "/fleet");
  await page.waitForFunction(() => document.querySelectorAll("#nodes tr.node.live").length === 3);
  await page.waitForSelector("#tree li[data-actor]");
  await shoot("fleet.png", true);
  said("fleet", "lost");

  // g: a node killed is marked lost
  const [node] = await told("killed", 1);
  await page.waitForSelector(`#nodes tr.node.lost[data-node="${node}"]`);
  await shoot("fleet-lost.png", true);
  said("lost", "done");
}

try {
  await run();
  said("done");
  await context.close();
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(0);
} catch (error) {
  console.log(`fail ${step}: ${String(error.message || error).split("\n")[0]}`);
  console.error(`fail ${step}: ${error.stack || error}`);
  try {
    await shoot("failure.png", true);
    console.error("--- the page (" + page.url() + ")\n" + (await page.evaluate(() => document.body.innerText)).slice(0, 4000));
  } catch (_) { /* the page is gone */ }
  // a wedged browser does not hold the exit up
  await Promise.race([context.close().catch(() => {}), new Promise((r) => setTimeout(r, 10000))]);
  fs.rmSync(profile, { recursive: true, force: true });
  process.exit(1);
}
