// Co-browse on the brand's page. embed.js loads this (from Parley's origin) once the customer has
// said yes in the chat. It serializes the page here, in the customer's browser, with what must
// stay private masked before anything leaves: password fields, card fields (autocomplete="cc-*"),
// elements marked data-parley-mask or matching the brand's selectors, and card numbers anywhere
// in text or values (Luhn-valid runs of 13-19 digits). Scripts, frames and event handlers are not
// sent at all. The page goes to the chat frame by postMessage (the chat sends it on its real-time
// connection); the agent's pointer comes back the same way. A banner stays on the page while it
// runs, with Stop.
//
// When the customer has also said yes to control (a second question in the chat), the agent's
// clicks and typing come back the same way and are carried out here, by the page's own ids, never
// on a masked element (nor a file input) and only while this page's own state says control is on.
(() => {
  if (window.__parleyCobrowse) return;
  const DOT = "•";
  const SKIP = new Set(["SCRIPT", "NOSCRIPT", "TEMPLATE", "IFRAME", "FRAME", "FRAMESET", "OBJECT", "EMBED", "PORTAL"]);
  const URL_ATTRIBUTES = new Set(["src", "href", "poster", "background", "action", "formaction", "cite", "data"]);
  const SVG = "http://www.w3.org/2000/svg";
  const PART = 48 * 1024;

  let session = null;
  let ids = new WeakMap();
  /** The other way, for the agent's highlight: weak, so that the page's removed nodes can go. */
  let byId = new Map();
  let nextId = 1;
  let observer = null;
  let flushTimer = null;
  const changed = { children: new Set(), attributes: new Set(), text: new Set(), values: new Set(), scroll: false, viewport: false };
  let banner = null;
  let bannerText = null;
  let takeBack = null;
  let pointer = null;
  let highlight = null;
  /** Whether the customer lets the agent click and type (the chat says so). */
  let controlled = false;

  const idOf = (node) => {
    let id = ids.get(node);
    if (!id) { id = nextId++; ids.set(node, id); byId.set(id, new WeakRef(node)); }
    return id;
  };

  // Parley's own elements on the page (the launcher, the chat, the banner) are not shared.
  const ours = (node) => node instanceof Element && Boolean(node.closest("[data-parley-ui]"));

  function luhn(digits) {
    let sum = 0;
    for (let index = 0; index < digits.length; index++) {
      let digit = Number(digits[digits.length - 1 - index]);
      if (index % 2 === 1) { digit *= 2; if (digit > 9) digit -= 9; }
      sum += digit;
    }
    return sum % 10 === 0;
  }
  /** Card numbers in free text become dots (digits counted, separators kept). */
  function maskCards(text) {
    return text.replace(/(?:\d[ -]?){12,18}\d/g, (run) => {
      const digits = run.replace(/\D/g, "");
      return digits.length >= 13 && digits.length <= 19 && luhn(digits) ? run.replace(/\d/g, DOT) : run;
    });
  }
  const dots = (text) => String(text ?? "").replace(/[^\s]/g, DOT);

  function masked(element) {
    if (!(element instanceof Element)) return false;
    if (element.closest("[data-parley-mask]")) return true;
    if (element.matches("input[type=password]")) return true;
    const autocomplete = (element.getAttribute("autocomplete") ?? "").toLowerCase();
    if (autocomplete.split(/\s+/).some((token) => token.startsWith("cc-"))) return true;
    for (const selector of session?.maskSelectors ?? []) {
      try { if (element.closest(selector)) return true; } catch { /* a selector this browser does not know */ }
    }
    return false;
  }

  function absolute(value) {
    try {
      const url = new URL(value, document.baseURI);
      return url.protocol === "http:" || url.protocol === "https:" || url.protocol === "data:" ? url.href : null;
    } catch { return null; }
  }

  function valueOf(element) {
    if (element.type === "checkbox" || element.type === "radio") return element.checked ? "on" : "";
    const value = String(element.value ?? "");
    return masked(element) ? dots(value) : maskCards(value);
  }

  /** One node as [id, tag, attributes, children, svg?], a text as [id, 0, text]; null when not shared. */
  function serialize(node) {
    if (node.nodeType === Node.TEXT_NODE) {
      const parent = node.parentElement;
      if (parent && (SKIP.has(parent.tagName) || ours(parent))) return null;
      return [idOf(node), 0, parent && masked(parent) ? dots(node.data) : maskCards(node.data)];
    }
    if (node.nodeType !== Node.ELEMENT_NODE || SKIP.has(node.tagName) || ours(node)) return null;
    const tag = node.localName;
    const attributes = {};
    for (const attribute of node.attributes) {
      const name = attribute.name.toLowerCase();
      if (name.startsWith("on") || name === "srcdoc" || name === "nonce" || name === "integrity") continue;
      let value = attribute.value;
      if (URL_ATTRIBUTES.has(name) || name === "xlink:href") {
        if (value.startsWith("#")) { attributes[name] = value; continue; }
        value = absolute(value);
        if (value === null) continue;
      } else if (name === "srcset") {
        value = value.split(",").map((item) => {
          const [url, ...rest] = item.trim().split(/\s+/);
          const resolved = absolute(url);
          return resolved ? [resolved, ...rest].join(" ") : "";
        }).filter(Boolean).join(", ");
      } else if (name === "value" && masked(node)) {
        value = dots(value);
      }
      attributes[name] = value;
    }
    if (node instanceof HTMLInputElement || node instanceof HTMLTextAreaElement || node instanceof HTMLSelectElement) {
      attributes.value = valueOf(node);
      if (node.type === "checkbox" || node.type === "radio") {
        if (node.checked) attributes.checked = ""; else delete attributes.checked;
      }
    }
    const children = [];
    if (node instanceof HTMLStyleElement && !node.textContent.trim() && node.sheet) {
      // Styles inserted through the CSSOM (CSS-in-JS) have no text: their rules are the text.
      try { children.push([nextId++, 0, [...node.sheet.cssRules].map((rule) => rule.cssText).join("\n")]); } catch {}
    } else if (!(node instanceof HTMLTextAreaElement)) {
      for (const child of node.childNodes) {
        const item = serialize(child);
        if (item) children.push(item);
      }
    }
    return node.namespaceURI === SVG ? [idOf(node), tag, attributes, children, 1] : [idOf(node), tag, attributes, children];
  }

  function snapshot() {
    const body = JSON.stringify({
      root: serialize(document.documentElement), url: location.href, title: document.title,
      viewport: [innerWidth, innerHeight], scroll: [scrollX, scrollY],
    });
    const parts = Math.max(1, Math.ceil(body.length / PART));
    for (let index = 0; index < parts; index++) {
      session.send("snapshot", body.slice(index * PART, (index + 1) * PART), index === parts - 1);
    }
  }

  function flush() {
    flushTimer = null;
    if (!session) return;
    const change = {};
    const live = (node) => node.isConnected && ids.has(node);
    const children = [...changed.children].filter(live);
    if (children.length) change.children = children.map((node) => [idOf(node), serialize(node)?.[3] ?? []]);
    const attributes = [...changed.attributes].filter((node) => live(node) && !changed.children.has(node.parentNode));
    if (attributes.length) change.attributes = attributes.map((node) => [idOf(node), serialize(node)?.[2] ?? {}]);
    const texts = [...changed.text].filter(live);
    if (texts.length) change.text = texts.map((node) => [idOf(node), serialize(node)?.[2] ?? ""]);
    const values = [...changed.values].filter(live);
    if (values.length) change.values = values.map((node) => [idOf(node), valueOf(node)]);
    if (changed.scroll) change.scroll = [scrollX, scrollY];
    if (changed.viewport) change.viewport = [innerWidth, innerHeight];
    for (const set of [changed.children, changed.attributes, changed.text, changed.values]) set.clear();
    changed.scroll = changed.viewport = false;
    if (Object.keys(change).length) session.send("changes", JSON.stringify(change), false);
  }
  const soon = () => { if (!flushTimer) flushTimer = setTimeout(flush, 150); };

  function onMutations(records) {
    for (const record of records) {
      if (ours(record.target) || ours(record.target.parentElement)) continue;
      if (record.type === "childList") changed.children.add(record.target);
      else if (record.type === "attributes") changed.attributes.add(record.target);
      else if (record.type === "characterData") changed.text.add(record.target);
    }
    soon();
  }
  const onInput = (event) => { if (event.target instanceof Element && !ours(event.target)) { changed.values.add(event.target); soon(); } };
  const onScroll = () => { changed.scroll = true; soon(); };
  const onResize = () => { changed.viewport = true; soon(); };

  function showBanner(agentName, brandName, stop) {
    banner = document.createElement("div");
    banner.setAttribute("data-parley-ui", "cobrowse-banner");
    banner.setAttribute("role", "status");
    Object.assign(banner.style, {
      position: "fixed", top: "12px", left: "12px", right: "12px", width: "fit-content", margin: "0 auto", zIndex: "2147483002",
      display: "flex", alignItems: "center", boxSizing: "border-box",
      // On a narrow phone the buttons wrap under the words.
      flexWrap: "wrap", justifyContent: "flex-end", rowGap: "8px",
      gap: "12px", padding: "8px 8px 8px 16px", borderRadius: "22px", background: "#1c2230", color: "#fff",
      font: "500 14px/1.3 system-ui, -apple-system, sans-serif", boxShadow: "0 6px 24px rgb(0 0 0 / 25%)", maxWidth: "calc(100vw - 24px)",
    });
    const dot = document.createElement("span");
    Object.assign(dot.style, { width: "8px", height: "8px", borderRadius: "50%", background: "#ef4444", flex: "none" });
    const text = document.createElement("span");
    text.style.flex = "1 1 14em";
    bannerText = text;
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = "Stop";
    Object.assign(button.style, {
      border: "0", borderRadius: "999px", padding: "6px 14px", background: "#fff", color: "#1c2230", font: "600 14px/1 system-ui, sans-serif",
      cursor: "pointer", flex: "none",
    });
    button.addEventListener("click", stop);
    takeBack = document.createElement("button");
    takeBack.type = "button";
    takeBack.textContent = "Take back control";
    Object.assign(takeBack.style, {
      border: "1px solid rgb(255 255 255 / 55%)", borderRadius: "999px", padding: "5px 13px", background: "transparent", color: "#fff",
      font: "600 14px/1 system-ui, sans-serif", cursor: "pointer", flex: "none", display: "none",
    });
    takeBack.addEventListener("click", () => session?.onRelease?.());
    banner.append(dot, text, takeBack, button);
    document.body.append(banner);
    describe();
  }

  /** What the banner says: who sees the page, and whether they may also act on it. */
  function describe() {
    if (!bannerText || !session) return;
    const who = `${session.agentName}${session.brandName ? ` from ${session.brandName}` : ""}`;
    bannerText.textContent = controlled ? `${who} can see this page and click and type for you` : `${who} can see this page`;
    takeBack.style.display = controlled ? "" : "none";
  }

  /** The chat says whether control is on (the customer allowed it) or off (declined, taken back). */
  function control(granted) {
    controlled = Boolean(granted) && Boolean(session);
    describe();
  }

  /** Parley's elements, masked ones, file pickers: never acted on by the agent. */
  function actionable(element) {
    if (!(element instanceof Element) || !element.isConnected || ours(element) || masked(element)) return false;
    if (element === document.documentElement || element === document.body) return false;
    // (`masked` covers a field inside a part marked as a whole, such as a card block.)
    return !element.matches("input[type=file]");
  }

  /** Sets a field as typing would, so that the page's own scripts (frameworks' listeners) see it. */
  function setValue(element, value) {
    if (element instanceof HTMLSelectElement) {
      if (![...element.options].some((option) => option.value === value)) return false;
      element.value = value;
    } else if (element instanceof HTMLTextAreaElement || (element instanceof HTMLInputElement && !/^(checkbox|radio|submit|button|reset|image|hidden|file|password)$/i.test(element.type))) {
      const prototype = element instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
      Object.getOwnPropertyDescriptor(prototype, "value").set.call(element, value);
    } else {
      return false;
    }
    element.dispatchEvent(new Event("input", { bubbles: true }));
    element.dispatchEvent(new Event("change", { bubbles: true }));
    return true;
  }

  /** The agent's click or typing, carried out while control is on. Returns whether it was. */
  function input({ kind, id, value }) {
    if (!controlled || !session) return false;
    const element = Number.isInteger(id) ? byId.get(id)?.deref() : null;
    if (!actionable(element)) return false;
    if (kind === "click") {
      const box = element.getBoundingClientRect();
      point(box.left + box.width / 2 + scrollX, box.top + box.height / 2 + scrollY, id);
      element.focus?.({ preventScroll: true });
      element.click();
      return true;
    }
    if (kind === "value") {
      element.focus?.({ preventScroll: true });
      return setValue(element, String(value ?? "").slice(0, 10000));
    }
    return false;
  }

  /** The agent's pointer: a ring at a point of the page, and the element there outlined, for a few seconds. */
  function point(x, y, id) {
    if (!Number.isFinite(x) || !Number.isFinite(y)) return;
    const element = Number.isInteger(id) ? byId.get(id)?.deref() : null;
    if (element instanceof Element && element.isConnected && !ours(element) && element !== document.body && element !== document.documentElement) {
      if (!highlight) {
        highlight = document.createElement("div");
        highlight.setAttribute("data-parley-ui", "cobrowse-highlight");
        highlight.setAttribute("aria-hidden", "true");
        Object.assign(highlight.style, {
          position: "absolute", border: "3px solid #f59e0b", borderRadius: "6px", background: "rgb(245 158 11 / 12%)",
          zIndex: "2147483001", pointerEvents: "none", boxSizing: "border-box",
        });
        document.body.append(highlight);
      }
      const box = element.getBoundingClientRect();
      Object.assign(highlight.style, {
        left: `${box.left + scrollX - 4}px`, top: `${box.top + scrollY - 4}px`, width: `${box.width + 8}px`, height: `${box.height + 8}px`, display: "block",
      });
    } else if (highlight) {
      highlight.style.display = "none";
    }
    if (!pointer) {
      pointer = document.createElement("div");
      pointer.setAttribute("data-parley-ui", "cobrowse-pointer");
      pointer.setAttribute("aria-hidden", "true");
      Object.assign(pointer.style, {
        position: "absolute", width: "28px", height: "28px", marginLeft: "-14px", marginTop: "-14px", borderRadius: "50%",
        border: "3px solid #f59e0b", background: "rgb(245 158 11 / 25%)", boxShadow: "0 0 0 6px rgb(245 158 11 / 20%)",
        zIndex: "2147483002", pointerEvents: "none", transition: "left .2s, top .2s",
      });
      document.body.append(pointer);
    }
    Object.assign(pointer.style, { left: `${x}px`, top: `${y}px`, display: "block" });
    clearTimeout(point.timer);
    point.timer = setTimeout(() => {
      if (pointer) pointer.style.display = "none";
      if (highlight) highlight.style.display = "none";
    }, 4000);
  }

  function start(options) {
    if (session) stop();
    session = options;
    controlled = false;
    showBanner(options.agentName, options.brandName, options.onStop);
    snapshot();
    observer = new MutationObserver(onMutations);
    observer.observe(document.documentElement, { childList: true, attributes: true, characterData: true, subtree: true });
    document.addEventListener("input", onInput, true);
    document.addEventListener("change", onInput, true);
    addEventListener("scroll", onScroll, { passive: true });
    addEventListener("resize", onResize);
  }

  function stop() {
    observer?.disconnect();
    observer = null;
    clearTimeout(flushTimer);
    flushTimer = null;
    document.removeEventListener("input", onInput, true);
    document.removeEventListener("change", onInput, true);
    removeEventListener("scroll", onScroll);
    removeEventListener("resize", onResize);
    banner?.remove();
    banner = null;
    pointer?.remove();
    pointer = null;
    highlight?.remove();
    highlight = null;
    session = null;
    controlled = false;
    bannerText = null;
    takeBack = null;
    ids = new WeakMap();
    byId = new Map();
    nextId = 1;
  }

  window.__parleyCobrowse = {
    start, stop, point, control, input,
    get controlled() { return controlled; },
    resync() { if (session) { ids = new WeakMap(); byId = new Map(); nextId = 1; snapshot(); } },
    get running() { return Boolean(session); },
    // For tests: what the page would send, without a session.
    serializeForTest(selectors = []) { const saved = session; session = { maskSelectors: selectors }; try { return serialize(document.documentElement); } finally { session = saved; } },
  };
})();
