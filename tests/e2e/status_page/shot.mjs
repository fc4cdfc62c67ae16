// Drives the control plane's status page in headless Chromium (the system's /usr/bin/chromium,
// through playwright-core: nothing is downloaded) for tests/e2e/tests/status_page.rs.
//
// Input (environment): STATUS_URL (https://127.0.0.1:<port>), STATUS_TOKEN (the API token typed
// into the login form; never printed), STATUS_OUT (folder for the screenshot and the browser
// profile), STATUS_NAME (screenshot name), STATUS_FILTER (optional: a health whose filter link
// is clicked), STATUS_REVOKE_URL and STATUS_ADMIN_TOKEN (optional: after reading the page, the
// token is revoked through that admin API URL and the open page reloaded, instead of signing
// out), CHROMIUM (optional, default /usr/bin/chromium).
//
// Output: one line `STATUS_PAGE_RESULT <json>` on stdout with the table as the page shows it,
// the filter links, the page's HTML, the session cookie's attributes (not its value), whether
// signing out worked, where a replay of the signed-out cookie lands, where the page goes after
// its token was revoked, and the screenshot's path.

import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";

const need = (name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`shot.mjs: ${name} is not set; see the comment at the top of this file`);
    process.exit(2);
  }
  return v;
};

const base = need("STATUS_URL");
const token = need("STATUS_TOKEN");
const out = need("STATUS_OUT");
const name = need("STATUS_NAME");
const filter = process.env.STATUS_FILTER || "";
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";

// Generous waits: a busy test machine may be slow, and no step here measures speed.
const WAIT_MS = 180_000;
// Each step's time on stderr, so a slow run shows where it waited.
const started = Date.now();
const step = (what) => console.error(`shot.mjs: ${what} (${Date.now() - started} ms)`);

// A fresh profile for every run, removed at the end.
const profile = mkdtempSync(join(out, "profile-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath,
  timeout: WAIT_MS,
  headless: true,
  // The control plane's certificate is signed by the test's own CA.
  ignoreHTTPSErrors: true,
  viewport: { width: 1360, height: 560 },
  args: [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});

try {
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(WAIT_MS);
  page.setDefaultNavigationTimeout(WAIT_MS);

  step("start");
  // Without a cookie the page sends us to its login form.
  await page.goto(`${base}/status`);
  const loginUrl = new URL(page.url()).pathname;
  await page.fill("#token", token);
  await Promise.all([page.waitForURL(`${base}/status`), page.click("#sign-in")]);

  if (filter) {
    await Promise.all([
      page.waitForURL(`${base}/status?health=${filter}`),
      page.click(`nav.filters a[data-filter="${filter}"]`),
    ]);
  }

  step("signed in");
  const table = await page.evaluate(() => {
    const text = (el) => (el ? el.textContent.trim() : null);
    const headers = [...document.querySelectorAll("#zones thead th")].map((th) => ({
      col: th.dataset.col,
      text: text(th),
    }));
    const rows = [...document.querySelectorAll("#zones tbody tr")]
      .filter((tr) => !tr.querySelector("td.empty"))
      .map((tr) => {
        const row = {};
        for (const el of tr.querySelectorAll("[data-field]")) {
          row[el.dataset.field] = text(el);
        }
        const time = tr.querySelector('[data-field="last_heartbeat"] time');
        if (time) row.last_heartbeat_iso = time.getAttribute("datetime");
        return row;
      });
    const filters = [...document.querySelectorAll("nav.filters a")].map((a) => ({
      label: a.dataset.filter,
      href: a.getAttribute("href"),
      count: Number(text(a.querySelector(".count"))),
      active: a.classList.contains("active"),
    }));
    return {
      headers,
      rows,
      filters,
      who: text(document.querySelector("#who")),
      scripts: document.scripts.length,
      common_ops: [...document.querySelectorAll("#ops-summary [data-op]")].map((li) => li.dataset.op),
      empty: text(document.querySelector("#zones td.empty")),
    };
  });
  const html = await page.content();
  const pageUrl = page.url();

  const screenshot = join(out, `${name}.png`);
  await page.screenshot({ path: screenshot, fullPage: true });

  const cookie = (await context.cookies(`${base}/status`)).find((c) => c.name === "harmony_status");
  const cookieAttrs = cookie
    ? { path: cookie.path, httpOnly: cookie.httpOnly, secure: cookie.secure, sameSite: cookie.sameSite }
    : null;

  step("read the page");
  const revokeUrl = process.env.STATUS_REVOKE_URL || "";
  let afterLogout = null;
  let cookieAfterLogout = null;
  let replayAfterLogout = null;
  let afterRevoke = null;
  if (revokeUrl) {
    // The token is revoked while the page is open (by the admin, from outside the browser):
    // the page's next request is refused and lands on the login form.
    const revoked = await fetch(revokeUrl, {
      method: "DELETE",
      headers: { authorization: `Bearer ${need("STATUS_ADMIN_TOKEN")}` },
      signal: AbortSignal.timeout(WAIT_MS),
    });
    if (!revoked.ok) throw new Error(`revoking the token answered ${revoked.status}`);
    step("revoked the token");
    await page.reload();
    afterRevoke = new URL(page.url()).pathname;
  } else {
    // Signing out clears the cookie: the page sends us to the login form again.
    await Promise.all([page.waitForURL(`${base}/status/login`), page.click("#logout")]);
    await page.goto(`${base}/status`);
    afterLogout = new URL(page.url()).pathname;
    cookieAfterLogout = (await context.cookies(`${base}/status`)).some((c) => c.name === "harmony_status");
    step("signed out");
    // The signed-out cookie, put back as a thief would replay it: the session is over.
    await context.addCookies([cookie]);
    await page.goto(`${base}/status`);
    replayAfterLogout = new URL(page.url()).pathname;
  }

  step("done");
  console.log(
    "STATUS_PAGE_RESULT " +
      JSON.stringify({
        login_url: loginUrl,
        page_url: pageUrl,
        ...table,
        html,
        cookie: cookieAttrs,
        after_logout: afterLogout,
        cookie_after_logout: cookieAfterLogout,
        replay_after_logout: replayAfterLogout,
        after_revoke: afterRevoke,
        screenshot,
      }),
  );
  console.error(`status page screenshot: ${screenshot}`);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
