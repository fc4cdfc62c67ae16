// The status page live, accessible and on a phone, in headless Chromium (the system's
// /usr/bin/chromium through playwright-core), for tests/e2e/tests/status_page/live.rs.
//
// Input (environment): STATUS_URL (https://127.0.0.1:<port>), STATUS_TOKEN (the admin token),
// STATUS_TENANT_TOKEN (a tenant's token), STATUS_SHOTS (folder for status-admin.png, status-tenant.png and status-phone.png),
// CHROMIUM (optional, default /usr/bin/chromium), NODE_TLS_REJECT_UNAUTHORIZED=0 (Node's own
// fetch to the admin API, signed by the test's CA). Tokens are never printed.
//
// What it does:
// - live (the page's real Content-Security-Policy in force): signed in as the admin, marks the
//   window, creates a region through the admin API and waits at most LIVE_MS for its row;
//   pauses the page, creates another region that a second, live page shows within LIVE_MS
//   while the paused one does not, resumes and waits at most LIVE_MS for it there too;
//   decommissions it and waits for it in the decommissioned section; records whether the
//   marker survived, main-frame navigations, where the focus is, and CSP errors;
// - without scripts: whether the page still has its reload (<noscript> refresh) and a toggle;
// - control borders (buttons, inputs, filter links): the lowest contrast against their
//   surroundings, on the admin's, the tenant's and the login page;
// - accessibility: axe-core (node_modules/axe-core/axe.min.js, injected in a context with
//   bypassCSP) on the admin's and the tenant's page: the serious and critical violations;
// - narrower windows down to a phone (390x844): the page's width against the window's, for the
//   admin and the tenant;
// - screenshots: the admin's and the tenant's page at 1400x900, the admin's on the phone.
//
// Output: one line `STATUS_LIVE_RESULT <json>` on stdout.

import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { ARGS, WAIT_MS, need as needOf, signIn, stepper } from "./browser.mjs";

const need = (name) => needOf("live.mjs", name);
const base = need("STATUS_URL");
const adminToken = need("STATUS_TOKEN");
const tenantToken = need("STATUS_TENANT_TOKEN");
const shots = need("STATUS_SHOTS");
mkdirSync(shots, { recursive: true });
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

// The bound for a change to show: the only timing this script checks (every other
// wait is WAIT_MS: a busy test machine may be slow).
const LIVE_MS = 2_000;
const DESKTOP = { width: 1400, height: 900 };
const PHONE = { width: 390, height: 844 };
const step = stepper("live.mjs");

// Chromium's profile is a temporary folder of playwright's, removed when it closes.
const browser = await chromium.launch({
  executablePath,
  timeout: WAIT_MS,
  headless: true,
  args: ARGS,
});

const admin = async (method, path, body) => {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, "content-type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(WAIT_MS),
  });
  if (!r.ok) throw new Error(`${method} ${path} answered ${r.status}: ${await r.text()}`);
};

/// A signed-in page in a new context (`options` for the context).
const signedIn = async (token, options = {}) => {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: DESKTOP, ...options });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.setDefaultNavigationTimeout(WAIT_MS);
  await signIn(page, base, token);
  return { context, page };
};

/// Waits until the page's script applied its first update.
const liveReady = (page) =>
  page.waitForFunction(() => document.getElementById("live-state")?.textContent.startsWith("updated"));

/// Milliseconds until `selector` is on `page`, or null when not within LIVE_MS.
const within = async (page, selector) => {
  const t0 = Date.now();
  try {
    await page.waitForSelector(selector, { timeout: LIVE_MS, state: "attached" });
    return Date.now() - t0;
  } catch {
    return null;
  }
};

const row = (key) => `#zones tbody tr[data-key="${key}"]`;

// The page's width at each window width, down to the phone's (left at the phone's).
const WIDTHS = [1280, 1200, 1024, 800, 600, PHONE.width];
const widths = async (page) => {
  const seen = [];
  for (const width of WIDTHS) {
    await page.setViewportSize({ width, height: PHONE.height });
    seen.push(
      await page.evaluate(() => ({
        scroll_width: document.documentElement.scrollWidth,
        inner_width: window.innerWidth,
      })),
    );
  }
  return seen;
};

// Each control's border (buttons, inputs, filter links) against the background around it: the
// lowest contrast ratio and the control that has it.
const borders = (page) =>
  page.evaluate(() => {
    const rgb = (c) => c.match(/[\d.]+/g).map(Number);
    const lum = ([r, g, b]) => {
      const l = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * l(r) + 0.7152 * l(g) + 0.0722 * l(b);
    };
    const around = (el) => {
      for (let e = el.parentElement; e; e = e.parentElement) {
        const c = rgb(getComputedStyle(e).backgroundColor);
        if (c.length < 4 || c[3] > 0) return c;
      }
      return [255, 255, 255];
    };
    let worst = { ratio: Infinity, control: null };
    for (const el of document.querySelectorAll("button, input, select, nav.filters a")) {
      if (!el.checkVisibility()) continue;
      const [a, b] = [lum(rgb(getComputedStyle(el).borderTopColor)), lum(around(el))];
      const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
      if (ratio < worst.ratio) worst = { ratio, control: el.id || el.textContent.trim() };
    }
    return worst;
  });

const axe = async (page) => {
  await page.addScriptTag({ path: axePath });
  return page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations
      .filter((v) => v.impact === "serious" || v.impact === "critical")
      .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => n.target.join(" ")).slice(0, 5) }));
  });
};

try {
  step("start");
  // --- live, with the page's own CSP in force --------------------------------------------
  const csp = [];
  const { context, page } = await signedIn(adminToken);
  page.on("console", (m) => {
    if (/Content.Security.Policy/i.test(m.text())) csp.push(m.text());
  });
  let navigations = 0;
  page.on("framenavigated", (f) => {
    if (f === page.mainFrame()) navigations += 1;
  });
  await liveReady(page);
  step("live");
  await page.evaluate(() => {
    window.__marker = "kept";
  });
  await page.focus("#live");
  navigations = 0;
  await admin("POST", "/v1/admin/regions", { region: "ap-south", zone: "mumbai-1" });
  const appearedMs = await within(page, row("ap-south/mumbai-1"));
  const focus = await page.evaluate(() => document.activeElement?.id ?? null);

  // Paused: a second page shows the next change, the paused one does not.
  await page.click("#live");
  const paused = await page.evaluate(() => ({
    pressed: document.getElementById("live").getAttribute("aria-pressed"),
    state: document.getElementById("live-state").textContent,
  }));
  const other = await context.newPage();
  other.setDefaultTimeout(WAIT_MS);
  await other.goto(`${base}/status`);
  await liveReady(other);
  await admin("POST", "/v1/admin/regions", { region: "sa-east", zone: "sao-1" });
  const otherMs = await within(other, row("sa-east/sao-1"));
  const whilePaused = await page.$(row("sa-east/sao-1"));
  await page.click("#live");
  const resumedMs = await within(page, row("sa-east/sao-1"));
  await other.close();

  // Decommissioned: the row leaves the table for the decommissioned section.
  await admin("DELETE", "/v1/admin/regions/sa-east");
  const retiredMs = await within(page, `#retired tr:has([data-field="zone"]:text-is("sao-1"))`);
  const after = await page.evaluate(() => ({
    marker: window.__marker ?? null,
    rows: [...document.querySelectorAll("#zones tbody tr[data-key]")].map((tr) => tr.dataset.key),
    all_count: Number(document.querySelector('nav.filters a[data-filter="all"] .count')?.textContent),
  }));
  // The reload is only for pages without scripts.
  const scripted = { refresh: await page.locator('meta[http-equiv="refresh"]').count() };
  step("live checked");
  await context.close();
  const { context: off, page: plain } = await signedIn(adminToken, { javaScriptEnabled: false });
  const noscript = {
    refresh: await plain.locator('meta[http-equiv="refresh"]').count(),
    toggle_visible: await plain.locator("#live").isVisible(),
  };
  // The login form's field and button.
  const login = await off.newPage();
  await login.goto(`${base}/status/login`);
  const loginBorder = await borders(login);
  await off.close();

  // --- screenshots, phone width and axe (bypassCSP only to inject axe-core) ---------------
  const views = {};
  for (const [who, token] of [
    ["admin", adminToken],
    ["tenant", tenantToken],
  ]) {
    const { context: c, page: p } = await signedIn(token, { bypassCSP: true });
    await liveReady(p);
    const border = await borders(p);
    await p.screenshot({ path: join(shots, `status-${who}.png`), fullPage: true });
    const violations = await axe(p);
    const phone = await widths(p);
    const phoneViolations = await axe(p);
    if (who === "admin") await p.screenshot({ path: join(shots, "status-phone.png"), fullPage: true });
    views[who] = { violations, phone, phone_violations: phoneViolations, border };
    await c.close();
    step(`${who} checked`);
  }

  console.log(
    "STATUS_LIVE_RESULT " +
      JSON.stringify({
        live: {
          appeared_ms: appearedMs,
          navigations,
          focus,
          paused,
          other_ms: otherMs,
          shown_while_paused: whilePaused !== null,
          resumed_ms: resumedMs,
          retired_ms: retiredMs,
          csp_errors: csp,
          ...after,
        },
        scripted,
        noscript,
        login_border: loginBorder,
        views,
        screenshots: ["status-admin.png", "status-tenant.png", "status-phone.png"].map((f) => join(shots, f)),
      }),
  );
} finally {
  await browser.close();
}
