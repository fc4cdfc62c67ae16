// What the status page scripts share: reading their environment, starting the system's Chromium
// (through playwright-core, in a fresh profile) and signing in through the login form.

import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";

/// Generous waits: a busy test machine may be slow, and no step measures speed.
export const WAIT_MS = 180_000;

/// The environment variable `name`, or exit 2 naming it (`script` says who asks).
export const need = (script, name) => {
  const v = process.env[name];
  if (!v) {
    console.error(`${script}: ${name} is not set; see the comment at the top of ${script}`);
    process.exit(2);
  }
  return v;
};

/// A `step(what)` that logs `<script>: what (N ms)` on stderr, for a slow run to show where.
export const stepper = (script) => {
  const started = Date.now();
  return (what) => console.error(`${script}: ${what} (${Date.now() - started} ms)`);
};

/// Chromium's flags for the tests: no sandbox (root in a container), nothing it would fetch.
export const ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/// Runs `body(page)` in headless Chromium (CHROMIUM, default /usr/bin/chromium) with a fresh
/// profile under `out`, removed at the end; the control plane's certificate is signed by the
/// test's own CA, so HTTPS errors are ignored.
export const withPage = async (out, viewport, body) => {
  const profile = mkdtempSync(join(out, "profile-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    timeout: WAIT_MS,
    headless: true,
    ignoreHTTPSErrors: true,
    viewport,
    args: ARGS,
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(WAIT_MS);
    page.setDefaultNavigationTimeout(WAIT_MS);
    return await body(page);
  } finally {
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }
};

/// Signs in at `base` with `token`: `/status` sends a browser without a session to the login
/// form, which sends it back once signed in.
export const signIn = async (page, base, token) => {
  await page.goto(`${base}/status`);
  await page.fill("#token", token);
  await Promise.all([page.waitForURL(`${base}/status`), page.click("#sign-in")]);
};
