// Co-browse, the agent's side: the offer, and the customer's page shown live in a dialog.
//
// The page arrives as JSON (js/cobrowse-page.js made it on the customer's side) and is built here,
// element by element, through an allowlist, into a frame that runs nothing: /cobrowse-view.html is
// served with `script-src 'none'` and `form-action 'none'`, the frame is sandboxed without
// allow-scripts, allow-forms or navigation, and it takes no pointer events (the agent points on an
// overlay above it). What is built never carries a script, a frame, an event handler, a `srcdoc`,
// a `<meta>` (refresh or policy), a `<base>`, or a URL that is not http(s) or a data: image.
//
// When the customer also lets the agent take control, a click on the overlay presses the element
// under it on the customer's page (by the page's own id), and a click on a field opens an editor
// over it whose text is set on the customer's field as the agent types. Fields the page masks are
// refused here first (and again by the customer's page, which decides).

const SVG = "http://www.w3.org/2000/svg";
const BLOCKED = new Set([
  "script", "noscript", "template", "iframe", "frame", "frameset", "object", "embed", "applet", "param", "base", "meta",
  "portal", "foreignobject", "animate", "set", "animatemotion", "animatetransform", "handler", "listener",
]);
const URL_ATTRIBUTES = new Set(["src", "href", "poster", "background", "cite", "data", "xlink:href"]);
const DROPPED = new Set(["srcdoc", "action", "formaction", "target", "http-equiv", "autofocus", "ping", "nonce", "integrity"]);

/** http(s), a data: image, or a fragment; anything else (javascript:, vbscript:, data:text/html) is not. */
export function safeURL(value) {
  const compact = String(value).replace(/[\u0000-\u0020\u007f]+/g, "").toLowerCase();
  return compact.startsWith("#") || compact.startsWith("https:") || compact.startsWith("http:") || /^data:image\/(png|jpe?g|gif|webp|svg\+xml);/.test(compact)
    ? String(value) : null;
}

/** CSS with every url() that is not http(s) or an image turned into `none` (a policy refusal logs an error). */
export function safeCSS(text) {
  return String(text).replace(/url\(([^)]*)\)/gi, (whole, inside) => (safeURL(inside.trim().replace(/^['"]|['"]$/g, "")) === null ? "none" : whole))
    .replace(/expression\s*\(|behavior\s*:|-moz-binding/gi, "x-");
}

/** The page's id of each element built (for the agent's highlight). */
const pageIds = new WeakMap();

/** Builds one serialized node into `doc` through the allowlist; `nodes` maps the page's ids to what was built. */
export function build(doc, item, nodes) {
  if (!Array.isArray(item)) return null;
  if (item[1] === 0) {
    const text = doc.createTextNode(String(item[2] ?? ""));
    nodes.set(item[0], text);
    return text;
  }
  const [id, tag, attributes, children, svg] = item;
  if (typeof tag !== "string" || !/^[a-z][a-z0-9-]*$/i.test(tag) || BLOCKED.has(tag.toLowerCase())) return null;
  if (tag === "link" && !String(attributes?.rel ?? "").toLowerCase().split(/\s+/).includes("stylesheet")) return null;
  const element = svg ? doc.createElementNS(SVG, tag) : doc.createElement(tag);
  setAttributes(element, attributes);
  if ("value" in (attributes ?? {}) && "value" in element) element.value = String(attributes.value);
  for (const child of Array.isArray(children) ? children : []) {
    const node = build(doc, child, nodes);
    if (node) element.append(node);
  }
  if (tag.toLowerCase() === "style") element.textContent = safeCSS(element.textContent);
  nodes.set(id, element);
  pageIds.set(element, id);
  return element;
}

function setAttributes(element, attributes) {
  for (const attribute of [...element.attributes]) element.removeAttribute(attribute.name);
  for (const [raw, rawValue] of Object.entries(attributes ?? {})) {
    const name = raw.toLowerCase();
    let value = String(rawValue);
    if (!/^[a-z_][a-z0-9_:.-]*$/.test(name) || name.startsWith("on") || DROPPED.has(name)) continue;
    if (URL_ATTRIBUTES.has(name)) {
      value = safeURL(value);
      if (value === null) continue;
    } else if (name === "srcset") {
      value = value.split(",").map((item) => item.trim()).filter((item) => safeURL(item.split(/\s+/)[0]) !== null).join(", ");
    } else if (name === "style") {
      value = safeCSS(value);
    }
    try {
      if (name === "xlink:href") element.setAttributeNS("http://www.w3.org/1999/xlink", name, value);
      else element.setAttribute(name, value);
    } catch { /* a name the DOM refuses */ }
  }
}

export class CobrowseView {
  /** `realtime`: the workspace's connection; `store`: who is signed in and the conversation open. */
  constructor({ realtime, store, dialog }) {
    Object.assign(this, { realtime, store, dialog });
    this.session = null;
    this.nodes = new Map();
    this.parts = [];
    this.viewport = [1280, 800];
    this.scale = 1;
    this.frame = null;
    this.stage = dialog.querySelector(".cobrowse-stage");
    this.overlay = dialog.querySelector(".cobrowse-overlay");
    this.status = dialog.querySelector(".cobrowse-status");
    this.address = dialog.querySelector(".cobrowse-url");
    this.ring = dialog.querySelector(".cobrowse-ring");
    this.hint = dialog.querySelector(".cobrowse-hint");
    this.stopButton = dialog.querySelector(".cobrowse-stop");
    this.controlButton = dialog.querySelector(".cobrowse-control");
    this.stopButton.addEventListener("click", () => this.stop());
    this.controlButton.addEventListener("click", () => this.toggleControl());
    dialog.addEventListener("close", () => { if (this.session) this.stop(); });
    this.overlay.addEventListener("click", (event) => (this.session?.control === "granted" ? this.act(event) : this.point(event)));
    new ResizeObserver(() => this.fit()).observe(dialog.querySelector(".cobrowse-body"));
  }

  get busy() { return Boolean(this.session); }

  /** The frame the page is built into, made when first needed (nothing of it loads before). */
  makeFrame() {
    if (this.frame) return this.ready;
    this.frame = Object.assign(document.createElement("iframe"), {
      className: "cobrowse-frame", title: "The customer's page (view only)", tabIndex: -1, referrerPolicy: "no-referrer",
    });
    this.frame.setAttribute("sandbox", "allow-same-origin");
    this.ready = new Promise((resolve) => this.frame.addEventListener("load", resolve, { once: true }));
    this.frame.src = "/cobrowse-view.html";
    this.stage.prepend(this.frame);
    return this.ready;
  }

  /** Offers co-browse in the open conversation and opens the dialog, waiting for the customer. */
  async offer(conversation, customerName) {
    await this.makeFrame();
    this.customerName = customerName || "The customer";
    this.dialog.querySelector(".cobrowse-title").textContent = `${this.customerName}'s page`;
    this.reset();
    this.stopButton.textContent = "Stop co-browsing";
    this.showStatus(`Waiting for ${this.customerName} to accept…`);
    this.dialog.showModal();
    try {
      const ack = await this.realtime.request({ type: "cobrowse.offer", conversationId: conversation.id });
      this.session = ack.cobrowse;
    } catch (error) {
      this.showStatus(error.message);
      this.stopButton.textContent = "Close";
    }
    this.renderControl();
  }

  /** A `cobrowse` frame: the session changed. */
  changed(session) {
    if (!this.session || session.id !== this.session.id || session.version < this.session.version) return;
    this.session = session;
    if (session.state === "active") {
      this.showStatus(session.consumerConnected ? (this.nodes.size ? "" : "Loading the page…") : `${this.customerName} is moving to another page…`);
    } else if (session.state === "ended") {
      const reasons = {
        declined: `${this.customerName} said no.`, unanswered: `${this.customerName} didn't answer.`,
        stopped_by_consumer: `${this.customerName} stopped sharing.`, stopped_by_agent: "You stopped co-browsing.",
        consumer_left: `${this.customerName} left the site.`, page_too_large: "This page is too large to show.",
        not_allowed: "Co-browse isn't allowed on this site.", agent_left: "Co-browse ended.", server_shutdown: "Co-browse ended.",
      };
      this.session = null;
      this.showStatus(reasons[session.endReason] ?? "Co-browse ended.");
      this.dialog.dataset.state = "ended";
      // Nothing left to stop: the button closes the window.
      this.stopButton.textContent = "Close";
      this.closeEditor();
    }
    this.renderControl();
  }

  // MARK: Control

  get mayControl() { return Boolean(this.store.me?.permissions?.includes("cobrowse_control")); }

  /** The control button and the hint follow the session: ask, waiting, or in control. */
  renderControl() {
    const control = this.session?.state === "active" ? this.session.control ?? "none" : "none";
    const button = this.controlButton;
    button.hidden = !this.mayControl || this.session?.state !== "active";
    button.disabled = control === "requested";
    button.textContent = { none: "Ask for control", requested: `Waiting for ${this.customerName}…`, granted: "Release control" }[control];
    button.setAttribute("aria-pressed", String(control === "granted"));
    this.dialog.dataset.control = control;
    this.hint.textContent = control === "granted"
      ? "Click to press for the customer; click a field to type in it. Private fields stay theirs."
      : "Click on the page to point at something.";
    if (control !== "granted") this.closeEditor();
  }

  async toggleControl() {
    if (!this.session) return;
    const action = this.session.control === "granted" ? "release" : "request";
    try {
      const ack = await this.realtime.request({ type: "cobrowse.control", sessionId: this.session.id, action });
      this.changed(ack.cobrowse);
    } catch (error) {
      this.flash(error.message);
    }
  }

  /** Whether the customer's page keeps this element to itself (its rules, as cobrowse-page.js applies them). */
  isPrivate(element) {
    if (element.closest("[data-parley-mask]") || element.matches("input[type=password], input[type=file]")) return true;
    if ((element.getAttribute("autocomplete") ?? "").toLowerCase().split(/\s+/).some((token) => token.startsWith("cc-"))) return true;
    return (this.session?.maskSelectors ?? []).some((selector) => { try { return Boolean(element.closest(selector)); } catch { return false; } });
  }

  /** In control: a click presses the element under it; a field opens an editor laid over it. */
  act(event) {
    const doc = this.frame?.contentDocument;
    const target = doc?.elementFromPoint(event.offsetX / this.scale, event.offsetY / this.scale);
    const id = target ? pageIds.get(target) : undefined;
    if (!target || id === undefined) return;
    this.point(event);
    if (this.isPrivate(target)) {
      this.flash(`That field is private: only ${this.customerName} can fill it in.`);
      return;
    }
    const typable = target.localName === "textarea" || target.localName === "select"
      || (target.localName === "input" && !/^(checkbox|radio|submit|button|reset|image|hidden)$/i.test(target.type));
    if (typable) this.openEditor(target, id);
    else this.send({ kind: "click", id });
  }

  send(input) {
    if (this.session?.control === "granted") {
      this.realtime.post({ type: "cobrowse.input", sessionId: this.session.id, payload: JSON.stringify(input) });
    }
  }

  /** An editor over the customer's field: what the agent types is set on it (a moment after they stop). */
  openEditor(field, id) {
    this.closeEditor();
    const box = field.getBoundingClientRect();
    const select = field.localName === "select";
    const editor = document.createElement(select ? "select" : field.localName === "textarea" ? "textarea" : "input");
    editor.className = "cobrowse-type";
    editor.setAttribute("aria-label", `Type for ${this.customerName}`);
    if (select) {
      for (const option of field.options) editor.append(new Option(option.text, option.value, false, option.value === field.value));
    } else {
      editor.value = field.value ?? "";
    }
    Object.assign(editor.style, {
      left: `${box.left * this.scale}px`, top: `${box.top * this.scale}px`,
      width: `${Math.max(box.width * this.scale, 160)}px`, height: field.localName === "textarea" ? `${Math.max(box.height * this.scale, 64)}px` : "",
    });
    let timer = null;
    const push = () => { clearTimeout(timer); timer = null; this.send({ kind: "value", id, value: editor.value }); };
    editor.addEventListener(select ? "change" : "input", () => {
      if (select) { push(); return; }
      clearTimeout(timer);
      timer = setTimeout(push, 250);
    });
    editor.addEventListener("keydown", (key) => {
      if (key.key === "Escape") { key.preventDefault(); key.stopPropagation(); this.closeEditor(); }
      if (key.key === "Enter" && !select && field.localName !== "textarea") { key.preventDefault(); push(); this.closeEditor(); }
    });
    editor.addEventListener("blur", () => { if (timer) push(); setTimeout(() => { if (this.editor === editor) this.closeEditor(); }, 0); });
    this.stage.append(editor);
    this.editor = editor;
    editor.focus();
  }

  closeEditor() {
    const editor = this.editor;
    this.editor = null;
    editor?.remove();
  }

  /** A short message over the page (a refusal, an error), gone after a few seconds. */
  flash(text) {
    this.showStatus(text);
    this.status.classList.add("flash");
    clearTimeout(this.flashTimer);
    this.flashTimer = setTimeout(() => {
      this.status.classList.remove("flash");
      if (this.session?.state === "active" && this.nodes.size) this.showStatus("");
    }, 3000);
  }

  /** A part of the customer's page. */
  data({ kind, last, payload }) {
    if (!this.session) return;
    if (kind === "snapshot") {
      this.parts.push(payload);
      if (!last) return;
      const text = this.parts.join("");
      this.parts = [];
      try { this.render(JSON.parse(text)); } catch { this.resync(); }
    } else if (kind === "changes" && this.nodes.size) {
      try { this.apply(JSON.parse(payload)); } catch { this.resync(); }
    }
  }

  render(page) {
    const doc = this.frame?.contentDocument;
    if (!doc) return;
    this.nodes = new Map();
    const root = build(doc, page.root, this.nodes);
    if (!root) return;
    doc.replaceChild(root, doc.documentElement);
    this.address.textContent = String(page.url ?? "").slice(0, 300);
    this.viewport = Array.isArray(page.viewport) ? page.viewport.map(Number) : this.viewport;
    this.fit();
    this.scroll(page.scroll);
    this.showStatus("");
    this.dialog.dataset.state = "live";
  }

  apply(change) {
    const doc = this.frame?.contentDocument;
    if (!doc) return;
    for (const [id, children] of change.children ?? []) {
      const element = this.nodes.get(id);
      if (element?.nodeType === 1) element.replaceChildren(...(children ?? []).map((child) => build(doc, child, this.nodes)).filter(Boolean));
    }
    for (const [id, attributes] of change.attributes ?? []) {
      const element = this.nodes.get(id);
      if (element?.nodeType === 1) setAttributes(element, attributes);
    }
    for (const [id, text] of change.text ?? []) {
      const node = this.nodes.get(id);
      if (node?.nodeType === 3) node.data = node.parentNode?.localName === "style" ? safeCSS(text) : String(text);
    }
    for (const [id, value] of change.values ?? []) {
      const element = this.nodes.get(id);
      if (element && "value" in element) {
        if (element.type === "checkbox" || element.type === "radio") element.checked = value === "on";
        else element.value = String(value);
      }
    }
    if (change.viewport) { this.viewport = change.viewport.map(Number); this.fit(); }
    if (change.scroll) this.scroll(change.scroll);
  }

  scroll(position) {
    if (!Array.isArray(position)) return;
    this.scrolled = [Number(position[0]) || 0, Number(position[1]) || 0];
    this.frame?.contentWindow?.scrollTo(...this.scrolled);
  }

  /** The customer's viewport, scaled to fit the dialog. */
  fit() {
    const [width, height] = this.viewport;
    const body = this.dialog.querySelector(".cobrowse-body");
    if (!this.frame || !width || !height || !body.clientWidth) return;
    this.scale = Math.min(1, body.clientWidth / width, body.clientHeight / height);
    Object.assign(this.frame.style, { width: `${width}px`, height: `${height}px`, transform: `scale(${this.scale})` });
    Object.assign(this.stage.style, { width: `${width * this.scale}px`, height: `${height * this.scale}px` });
  }

  /** The agent clicks on the page: the customer sees a ring there. */
  point(event) {
    if (!this.session || this.session.state !== "active") return;
    const [scrollX, scrollY] = this.scrolled ?? [0, 0];
    const x = Math.round(event.offsetX / this.scale + scrollX);
    const y = Math.round(event.offsetY / this.scale + scrollY);
    // The element there, by the page's own id: the customer sees it outlined.
    const target = this.frame?.contentDocument?.elementFromPoint(event.offsetX / this.scale, event.offsetY / this.scale);
    const id = target ? pageIds.get(target) ?? null : null;
    this.realtime.post({ type: "cobrowse.point", sessionId: this.session.id, payload: JSON.stringify({ x, y, id }) });
    Object.assign(this.ring.style, { left: `${event.offsetX}px`, top: `${event.offsetY}px` });
    this.ring.hidden = false;
    clearTimeout(this.ringTimer);
    this.ringTimer = setTimeout(() => { this.ring.hidden = true; }, 1500);
  }

  resync() {
    if (this.session) this.realtime.post({ type: "cobrowse.resync", sessionId: this.session.id });
  }

  async stop() {
    const session = this.session;
    this.session = null;
    this.closeEditor();
    if (session) await this.realtime.request({ type: "cobrowse.end", sessionId: session.id }).catch(() => {});
    if (this.dialog.open) this.dialog.close();
  }

  reset() {
    this.nodes = new Map();
    this.parts = [];
    this.address.textContent = "";
    this.dialog.dataset.state = "waiting";
    const doc = this.frame?.contentDocument;
    doc?.documentElement?.replaceChildren(doc.createElement("head"), doc.createElement("body"));
  }

  showStatus(text) {
    this.status.textContent = text;
    this.status.hidden = !text;
  }
}
