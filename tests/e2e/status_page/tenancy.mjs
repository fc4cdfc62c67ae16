// Reads the status page's "Tenants" section in headless Chromium for
// tests/e2e/tests/status_page/tenancy.rs.
//
// Input (environment): STATUS_URL (https://127.0.0.1:<port>), STATUS_TOKEN (the API token typed
// into the login form; never printed), STATUS_OUT (folder for the screenshots and the browser
// profile), STATUS_NAME (screenshot name), CHROMIUM (optional, default /usr/bin/chromium).
//
// Output: one line `TENANCY_RESULT <json>` on stdout: the section's heading, each tenant with
// its caps and use rows (every `data-field` of a row), the zone table's row keys, the page's
// visible text and HTML, and the screenshot's path.

import { join } from "node:path";
import { need, signIn, withPage } from "./browser.mjs";

const script = "tenancy.mjs";
const base = need(script, "STATUS_URL");
const token = need(script, "STATUS_TOKEN");
const out = need(script, "STATUS_OUT");
const name = need(script, "STATUS_NAME");

await withPage(out, { width: 1400, height: 900 }, async (page) => {
  await signIn(page, base, token);
  const read = await page.evaluate(() => {
    const text = (el) => (el ? el.textContent.replace(/\s+/g, " ").trim() : null);
    const section = document.querySelector("#tenancy");
    const tenants = section
      ? [...section.querySelectorAll(".tenant")].map((t) => ({
          tenant: t.dataset.tenant,
          heading: text(t.querySelector("h3")),
          caps: text(t.querySelector('[data-field="caps"]')),
          rows: [...t.querySelectorAll("tbody tr")].map((tr) => {
            const row = { known: tr.dataset.known === "true", full: tr.dataset.full === "true" };
            for (const el of tr.querySelectorAll("[data-field]")) row[el.dataset.field] = text(el);
            return row;
          }),
        }))
      : null;
    return {
      heading: text(section && section.querySelector("h2")),
      tenants,
      zone_keys: [...document.querySelectorAll("#zones tbody tr[data-key]")].map((tr) => tr.dataset.key),
      text: document.body.innerText,
    };
  });
  const html = await page.content();
  const screenshot = join(out, `${name}.png`);
  // The section's box, clipped from the whole page: the live updates may replace elements
  // under a locator while it waits for them to hold still.
  const clip = await page.evaluate(() => {
    const r = document.querySelector("#tenancy").getBoundingClientRect();
    return { x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height };
  });
  await page.screenshot({ path: screenshot, fullPage: true, clip });
  await page.screenshot({ path: join(out, `${name}-page.png`), fullPage: true });
  console.log("TENANCY_RESULT " + JSON.stringify({ ...read, html, screenshot }));
});
