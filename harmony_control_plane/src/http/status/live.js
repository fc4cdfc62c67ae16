// The status page's live updates (served as /status/live.js; the server side is
// harmony_control_plane/src/http/status/live.rs). Reads the page's event stream and applies each
// `update` in place: rows by their data-key (only the cells that changed are rewritten, rows are
// moved to the server's order), and the sections marked data-live="<name>". No reload: scroll,
// focus and open <details> are kept. The "Live" toggle (aria-pressed) closes the stream while
// paused and reopens it on resume (the first event of a stream carries the whole page). Health
// changes are announced politely to screen readers. Without scripts the page reloads itself
// instead (<noscript> refresh).
(() => {
  "use strict";
  const control = document.getElementById("live-control");
  const button = document.getElementById("live");
  const state = document.getElementById("live-state");
  const tbody = document.querySelector("tbody[data-live-rows]");
  if (!control || !button || !state || !tbody || !window.EventSource) return;
  const url = control.dataset.events;
  const PAUSED = "harmony-status-paused";

  // Spoken summaries of health changes (visually hidden).
  const announcer = document.createElement("div");
  announcer.className = "visually-hidden";
  announcer.setAttribute("role", "status");
  announcer.setAttribute("aria-live", "polite");
  document.body.appendChild(announcer);

  let source = null;
  let live = sessionStorage.getItem(PAUSED) !== "1";

  const fragment = (html) => {
    const t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content;
  };

  const sameAttributes = (a, b) =>
    a.attributes.length === b.attributes.length &&
    [...a.attributes].every((attr) => b.getAttribute(attr.name) === attr.value);

  // Rewrites `old` (a <tr>) into `fresh`, touching only what differs.
  const patchRow = (old, fresh) => {
    if (old.children.length !== fresh.children.length) {
      old.replaceWith(fresh);
      return fresh;
    }
    for (const attr of [...old.attributes]) {
      if (!fresh.hasAttribute(attr.name)) old.removeAttribute(attr.name);
    }
    for (const attr of [...fresh.attributes]) {
      if (old.getAttribute(attr.name) !== attr.value) old.setAttribute(attr.name, attr.value);
    }
    [...fresh.children].forEach((cell, i) => {
      const was = old.children[i];
      if (was.tagName !== cell.tagName || !sameAttributes(was, cell)) {
        was.replaceWith(cell.cloneNode(true));
      } else if (was.innerHTML !== cell.innerHTML) {
        was.innerHTML = cell.innerHTML;
      }
    });
    return old;
  };

  // Where the focus is, so it can be put back if its element was rewritten: the row (or live
  // section) holding it, and its position among that container's focusable elements.
  const FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  const focusPlace = () => {
    const el = document.activeElement;
    if (!el || el === document.body) return null;
    const box = el.closest("tr[data-key], [data-live]");
    if (!box) return { el };
    const key = box.dataset.key ? `tr[data-key="${CSS.escape(box.dataset.key)}"]` : `[data-live="${CSS.escape(box.dataset.live)}"]`;
    return { el, key, index: [...box.querySelectorAll(FOCUSABLE)].indexOf(el) };
  };
  const restoreFocus = (place) => {
    if (!place || document.activeElement === place.el) return;
    let target = place.el.isConnected ? place.el : null;
    if (!target && place.key) {
      const box = document.querySelector(place.key);
      target = box ? box.querySelectorAll(FOCUSABLE)[place.index] : null;
    }
    if (target) target.focus({ preventScroll: true });
  };

  let first = true;
  const apply = (update) => {
    const place = focusPlace();
    const said = [];
    const rows = new Map([...tbody.querySelectorAll(":scope > tr[data-key]")].map((tr) => [tr.dataset.key, tr]));
    for (const [key, html] of Object.entries(update.rows || {})) {
      const fresh = fragment(html).querySelector("tr");
      if (!fresh) continue;
      const old = rows.get(key);
      if (old) {
        const before = old.dataset.health;
        rows.set(key, patchRow(old, fresh));
        if (before && fresh.dataset.health && before !== fresh.dataset.health) {
          said.push(`${key} is now ${fresh.dataset.health} (was ${before})`);
        }
      } else {
        rows.set(key, fresh);
        if (!first && fresh.dataset.health) said.push(`${key} appeared, ${fresh.dataset.health}`);
      }
    }
    const order = update.order || [];
    const wanted = new Set(order);
    for (const [key, tr] of rows) {
      if (!wanted.has(key)) {
        tr.remove();
        if (!first && tr.dataset.health) said.push(`${key} is gone from this view`);
      }
    }
    order.forEach((key, i) => {
      const tr = rows.get(key);
      if (tr && tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    for (const [name, html] of Object.entries(update.sections || {})) {
      const box = document.querySelector(`[data-live="${CSS.escape(name)}"]`);
      if (!box) continue;
      const open = new Map([...box.querySelectorAll("details[id]")].map((d) => [d.id, d.open]));
      box.innerHTML = html;
      for (const d of box.querySelectorAll("details[id]")) {
        if (open.has(d.id)) d.open = open.get(d.id);
      }
    }
    const generated = document.getElementById("generated");
    if (generated && update.generated) {
      generated.setAttribute("datetime", update.generated.iso);
      generated.textContent = update.generated.utc;
    }
    restoreFocus(place);
    if (said.length) announcer.textContent = said.join("; ");
    first = false;
  };

  const stop = () => {
    if (source) source.close();
    source = null;
  };

  const start = () => {
    stop();
    state.textContent = "connecting…";
    first = true;
    source = new EventSource(url);
    source.addEventListener("update", (e) => {
      if (!live) return;
      apply(JSON.parse(e.data));
      state.textContent = "updated as things change";
    });
    source.addEventListener("end", () => {
      stop();
      live = false;
      button.setAttribute("aria-pressed", "false");
      button.disabled = true;
      state.textContent = "Stopped: your session ended. Sign in again.";
    });
    source.onerror = () => {
      if (!source) return;
      state.textContent =
        source.readyState === EventSource.CLOSED
          ? "Disconnected: reload the page to reconnect."
          : "reconnecting…";
    };
  };

  const show = () => {
    button.setAttribute("aria-pressed", String(live));
    if (live) {
      sessionStorage.removeItem(PAUSED);
      start();
    } else {
      sessionStorage.setItem(PAUSED, "1");
      stop();
      state.textContent = "Paused: updates held until you press Live.";
    }
  };

  button.addEventListener("click", () => {
    live = !live;
    show();
  });
  control.hidden = false;
  show();
})();
