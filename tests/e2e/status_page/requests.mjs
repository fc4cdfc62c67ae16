// Reads what the status page says of each zone's state and requests, in headless Chromium (the
// system's /usr/bin/chromium through playwright-core), for tests/e2e/tests/status_page/requests.rs.
//
// Input (environment): STATUS_URL, STATUS_TOKEN (typed into the login form; never printed),
// STATUS_OUT (folder for screenshots and the browser profile), STATUS_NAME (screenshot name),
// STATUS_OPEN (optional: request ids, comma-separated, whose link on the page is clicked and whose
// page is read), STATUS_VISIT (optional: paths, comma-separated, opened directly: their status
// and message), CHROMIUM (optional, default /usr/bin/chromium).
//
// Output: one line `REQUESTS_PAGE_RESULT <json>` on stdout: each zone row (health, since when and
// its <time datetime>, the agent's error, its requests in flight and failures with their links),
// each opened request's page, each visited path, the HTML of every page read, the screenshots.

import { join } from "node:path";
import { need as needOf, signIn, stepper, withPage } from "./browser.mjs";

const need = (name) => needOf("requests.mjs", name);
const base = need("STATUS_URL");
const token = need("STATUS_TOKEN");
const out = need("STATUS_OUT");
const name = need("STATUS_NAME");
const list = (v) => (v || "").split(",").filter((s) => s.length > 0);
const open = list(process.env.STATUS_OPEN);
const visit = list(process.env.STATUS_VISIT);
const step = stepper("requests.mjs");

/// The zone rows as the page shows them.
const readRows = () =>
  [...document.querySelectorAll("#zones tbody tr[data-key]")].map((tr) => {
    const text = (el) => (el ? el.textContent.replace(/\s+/g, " ").trim() : null);
    const field = (f) => tr.querySelector(`[data-field="${f}"]`);
    const items = (selector) =>
      [...tr.querySelectorAll(selector)].map((li) => ({
        id: li.dataset.request,
        href: li.querySelector("a")?.getAttribute("href") ?? null,
        text: text(li),
      }));
    return {
      key: tr.dataset.key,
      health: text(field("health")),
      since: text(field("health_since")),
      since_iso: field("health_since")?.querySelector("time")?.getAttribute("datetime") ?? null,
      agent_error: text(field("agent_error")),
      requests: text(field("requests")),
      in_flight: items("ul.reqs:not(.failed) li[data-request]"),
      failures: items("ul.reqs.failed li[data-request]"),
    };
  });

/// A request's page as shown.
const readRequest = () => {
  const text = (sel) => {
    const el = document.querySelector(sel);
    return el ? el.textContent.replace(/\s+/g, " ").trim() : null;
  };
  const items = (sel) => [...document.querySelectorAll(sel)].map((li) => li.textContent.replace(/\s+/g, " ").trim());
  return {
    title: text("h1"),
    id: text("#request-id"),
    state: text("#state"),
    op: text("#op"),
    where: text("#where"),
    owner: text("#owner"),
    error: text("#error"),
    params: items("#params li"),
    progress: items("#progress li"),
    outcome: text("#outcome"),
    outcome_lines: items("#outcome-lines li"),
  };
};

await withPage(out, { width: 1400, height: 900 }, async (page) => {
  step("start");
  await signIn(page, base, token);
  step("signed in");

  const rows = await page.evaluate(readRows);
  const html = await page.content();
  const screenshot = join(out, `${name}.png`);
  await page.screenshot({ path: screenshot, fullPage: true });

  const opened = [];
  for (const id of open) {
    // One click from the zone's row to the request's page.
    const link = page.locator(`#zones a[href="/status/requests/${id}"]`).first();
    await Promise.all([page.waitForURL(`${base}/status/requests/${id}`), link.click()]);
    const shot = join(out, `${name}-request-${opened.length}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    const shown = await page.evaluate(readRequest);
    opened.push({ id, url: new URL(page.url()).pathname, ...shown, html: await page.content(), screenshot: shot });
    step(`read request ${id}`);
    await page.goto(`${base}/status`);
  }

  const visited = [];
  for (const path of visit) {
    const response = await page.goto(`${base}${path}`);
    visited.push({
      path,
      status: response ? response.status() : null,
      title: await page.evaluate(() => document.querySelector("h1")?.textContent.trim() ?? null),
      message: await page.evaluate(() => document.querySelector("#error")?.textContent.trim() ?? null),
      html: await page.content(),
    });
  }

  step("done");
  console.log("REQUESTS_PAGE_RESULT " + JSON.stringify({ rows, html, screenshot, opened, visited }));
});
