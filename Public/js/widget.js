import { ErrorCode } from "./error-codes.js";
import { Api, ApiError } from "./api.js";
import { Realtime } from "./realtime.js";
import { Composer, configureAttachments, connectionStatusText } from "./composer.js";
import { Timeline } from "./timeline.js";
import { icon, initials, isImage } from "./icons.js";
import { CallSession } from "./call-session.js";
import { AppScreen } from "./app-screen.js";
import "./call-view.js";
import "./voice-recorder.js";
import { NotifyOffer } from "./notify.js";

// The consumer widget. /widget.html?app=app_... ; the session token is kept per app in localStorage.
const appId = new URLSearchParams(location.search).get("app");
const storageKey = `parley.consumer.${appId}`;
const $ = (selector) => document.querySelector(selector);
const status = $(".status");
const textarea = $("#message");
const recorder = $("parley-recorder");
const composer = $(".composer");
$(".send-text").innerHTML = icon("send");
const embedded = new URLSearchParams(location.search).has("embedded") && window.parent !== window;
/**
 * App mode (`&mode=app`): the chat screen of a brand's app, in its web view (ParleyKit's
 * ParleyChatView). No launcher and no close button, the whole screen inside the device's safe
 * areas, and the session is the SDK's: the host hands it to `parleyApp.start({ token })` once the
 * page asks for it (`ready` to the `parley` script message handler), so it is never in a URL nor
 * kept by the page. Notifications are the app's (APNs through the SDK), not Web Push.
 */
const appMode = new URLSearchParams(location.search).get("mode") === "app";
/** Tells the app hosting the page (app mode): `ready`, `sessionExpired`. */
function tellHost(message) {
  try { window.webkit?.messageHandlers?.parley?.postMessage(message); } catch {}
}
let hostSession = null;
/** The app's own screens, for screen share in calls (app mode only; the host says whether it can). */
const appScreen = new AppScreen(tellHost);
const hostSessionWaiters = [];
if (appMode) {
  document.documentElement.classList.add("app-mode");
  window.parleyApp = Object.freeze({
    /**
     * The host's session: `{ token }` (ParleyKit's consumer session), and `screenShare: true` when
     * the app can share its own screens in a call (app-screen.js).
     */
    start(session) {
      if (typeof session?.token !== "string" || !session.token) return false;
      hostSession = session.token;
      appScreen.available = session.screenShare === true;
      hostSessionWaiters.splice(0).forEach((resolve) => resolve(hostSession));
      return true;
    },
    /** A frame of the app's screen while it shares (a data: URL of a JPEG or PNG). */
    screenFrame(dataUrl) { return appScreen.frame(dataUrl); },
    /** The app stopped sharing by itself (`denied`: the person said no). */
    screenShareEnded(reason) { appScreen.ended(reason); },
  });
}
/** The session the host app gives (waits for it). */
function sessionFromHost() {
  if (hostSession) return Promise.resolve(hostSession);
  // Waiting before asking: a host may answer from within postMessage.
  const session = new Promise((resolve) => hostSessionWaiters.push(resolve));
  tellHost({ type: "ready" });
  return session;
}
/** Whether the visitor can see the chat: an embedded chat is loaded while its panel is closed. */
let panelOpen = !embedded;
let unseen = 0;
/** The page around the chat, as the browser reports it on its messages (never as the page claims). */
let parentOrigin = null;
if (embedded) {
  // The launcher says when its panel opens and closes. Only a count crosses to the brand's page,
  // never message text: any page can embed the widget.
  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    parentOrigin = event.origin;
    if (event.data === "parley:open") { panelOpen = true; unseen = 0; markRead(); refreshAvailability(); }
    if (event.data === "parley:closed") panelOpen = false;
    if (event.data?.type === "parley:page") reportPage(String(event.data.url ?? ""), String(event.data.title ?? ""));
    if (event.data?.type === "parley:cobrowse-data") cobrowse.data(event.data);
    if (event.data?.type === "parley:cobrowse-stop") cobrowse.stop();
    if (event.data?.type === "parley:cobrowse-release") cobrowse.control("release");
  });
  // A close button, and Escape as for a dialog, hand focus back to the launcher.
  const closeChat = () => window.parent.postMessage("parley:close", "*");
  const close = $(".close");
  close.innerHTML = icon("close");
  close.hidden = false;
  close.onclick = closeChat;
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !event.defaultPrevented) closeChat();
  });
}

const api = new Api();
let realtime;
let timeline;
let conversationId = null;
let calls;
/** The brand's look and whether an agent is there (from /v1/consumer/settings), and who answered. */
const brand = { name: "", availability: "", available: false, agent: null, previewOrigins: [], logoUrl: null };
let connection = "connecting";

/** The header's second line: the connection while it is not up, otherwise whether anyone is there. */
function setStatus(state, message) {
  connection = state;
  const up = state === "online" && !message;
  status.dataset.state = state;
  status.dataset.availability = brand.available ? "available" : "away";
  // Away, the header says so briefly; the brand's longer away text is the hint over the composer.
  const availability = brand.available ? brand.availability : "Away right now";
  status.textContent = message ?? (up && brand.availability ? availability : connectionStatusText[state]);
}

/** Colour, name and initials in the header: the brand's until an agent answers, then the agent's. */
function renderHeader() {
  $(".brand-name").textContent = brand.agent?.name ?? brand.name;
  const avatar = $(".avatar");
  // The brand's logo until an agent answers; then the agent's initials.
  if (brand.logoUrl && !brand.agent) {
    avatar.replaceChildren(Object.assign(document.createElement("img"), { src: brand.logoUrl, alt: "" }));
    avatar.classList.add("logo");
  } else {
    // An agent by their initials, the brand by its first letter.
    avatar.textContent = initials(brand.agent?.name ?? brand.name, { one: !brand.agent });
    avatar.classList.remove("logo");
  }
  $(".header-brand").textContent = brand.agent ? brand.name : "";
  setStatus(connection);
}

/** The brand's colour, with text in white or near-black, whichever reads better on it. */
function applyColor(hex) {
  if (!/^#[0-9a-f]{6}$/i.test(hex ?? "")) return;
  const [r, g, b] = [1, 3, 5].map((index) => parseInt(hex.slice(index, index + 2), 16) / 255)
    .map((channel) => (channel <= 0.03928 ? channel / 12.92 : ((channel + 0.055) / 1.055) ** 2.4));
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  const root = document.documentElement.style;
  root.setProperty("--accent", hex);
  root.setProperty("--accent-ink", luminance > 0.4 ? "#0f131a" : "#ffffff");
}

async function refreshAvailability() {
  if (!api.token) return;
  try {
    const settings = await api.get("/v1/consumer/settings");
    brand.available = settings.agentsAvailable;
    brand.availability = settings.availability;
    renderHeader();
  } catch {}
}

// The page the visitor is on, from the launcher: sent with a new session, or reported when it changed.
let pageToReport = null;
const pageKey = `parley.page.${appId}`;
function reportPage(url, title) {
  if (!/^https?:\/\//.test(url)) return;
  pageToReport = { pageUrl: url.slice(0, 2048), pageTitle: title.slice(0, 300) || undefined };
  if (api.token) sendPage();
}
async function sendPage() {
  const page = pageToReport;
  if (!page || localStorage.getItem(pageKey) === page.pageUrl) return;
  try {
    await api.post("/v1/consumer/visits", page);
    localStorage.setItem(pageKey, page.pageUrl);
  } catch {}
}

/** Resumes the saved session or starts one; true when the visitor is new (and so has no history). */
async function session() {
  if (appMode) {
    api.token = await sessionFromHost();
    try { await api.get("/v1/consumer/me"); return false; } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) throw error;
      // The SDK's session ended: it makes a new one and starts the page again.
      hostSession = null;
      tellHost({ type: "sessionExpired" });
      api.token = await sessionFromHost();
      return false;
    }
  }
  const saved = localStorage.getItem(storageKey);
  if (saved) {
    api.token = saved;
    try { await api.get("/v1/consumer/me"); return false; } catch (error) { if (!(error instanceof ApiError) || error.status !== 401) throw error; }
  }
  const page = pageToReport;  // the launcher's report may arrive while the session is created
  // The visitor's language, for the brand's automatic messages: only a language tag (WebKit on a
  // machine without a locale says "C"); the server ignores one it cannot read anyway.
  const language = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$/.test(navigator.language ?? "") ? navigator.language : undefined;
  const created = await api.post("/v1/consumer/session", { appId, language, ...(page ?? {}) });
  if (page) localStorage.setItem(pageKey, page.pageUrl);
  api.token = created.token;
  localStorage.setItem(storageKey, created.token);
  return true;
}

/** How long to wait before starting again after `error`, in ms, or null when trying again cannot
 * help (a refusal: the same request would be refused the same way). */
function retryDelay(error, attempt) {
  if (error instanceof ApiError && error.status === 429) return Math.max(1, error.retryAfter ?? 5) * 1000;
  if (error instanceof ApiError && error.status >= 400 && error.status < 500 && error.status !== 408) return null;
  return Math.min(30_000, 3000 * 2 ** Math.min(attempt, 4));  // unreachable or 5xx: 3, 6, 12, 24, 30 s
}

let startAttempts = 0;
async function start() {
  if (!appId) { setStatus("offline", "This chat is not set up: the page needs ?app=…"); return; }
  let newVisitor;
  try {
    newVisitor = await session();
  } catch (error) {
    const delay = retryDelay(error, startAttempts++);
    if (error.code === ErrorCode.appNotFound) setStatus("offline", "This chat is not available.");
    else if (delay === null) setStatus("offline", `This chat could not start: ${error.message}`);
    else setStatus("offline", `Cannot connect. Trying again in ${Math.round(delay / 1000)} s…`);
    if (delay !== null) setTimeout(start, delay);
    return;
  }
  startAttempts = 0;
  sendPage();
  const settings = await api.get("/v1/consumer/settings");
  document.title = `Chat with ${settings.brandName}`;
  Object.assign(brand, {
    name: settings.brandName, availability: settings.availability, available: settings.agentsAvailable, previewOrigins: settings.previewOrigins ?? [],
    logoUrl: settings.logoUrl ?? null,
  });
  applyColor(settings.widgetColor);
  if (embedded) window.parent.postMessage({ type: "parley:color", color: settings.widgetColor }, "*");
  $(".empty-hint").textContent = settings.agentsAvailable ? "Send us a message or a voice note." : settings.availability;
  renderHeader();
  configureAttachments(composer, settings.attachmentGroups);
  if (settings.voiceEnabled) {
    recorder.setAttribute("max-seconds", settings.voiceMaxSeconds);
    recorder.setAttribute("min-seconds", settings.voiceMinSeconds ?? 1);
    recorder.hidden = false;
  }
  timeline = new Timeline($(".timeline"), {
    perspective: "consumer", api, nameOf: (message) => message.senderKind === "agent" ? message.senderName ?? brand.name : message.senderKind === "system" ? brand.name : null,
  });
  // A visitor whose session was just created has no conversations yet: no request for them.
  const conversations = newVisitor ? [] : (await api.get("/v1/consumer/conversations?limit=2")).items;
  $(".history-open").hidden = conversations.length < 2;
  if (conversations.length) {
    conversationId = conversations[0].id;
    const [history, callHistory] = await Promise.all([
      api.get(`/v1/consumer/conversations/${conversationId}/messages?limit=200`),
      api.get(`/v1/consumer/conversations/${conversationId}/calls?limit=50`),
    ]);
    history.items.forEach((message) => timeline.upsert(message));
    meetAgent(history.items.findLast((message) => message.senderKind === "agent"));
    callHistory.items.filter((call) => call.seq).forEach((call) => timeline.callRecord({ seq: call.seq, call, createdAt: call.endedAt }));
    api.get(`/v1/consumer/conversations/${conversationId}/queue`).then(showQueue).catch(() => {});
    if (conversations[0].state === "resolved") showClosed(conversations[0], { seq: conversations[0].lastSeq + 0.5 });
  }
  realtime = new Realtime({ token: api.token });
  calls = new CallSession({ realtime, api, role: "consumer", screenSource: appMode ? appScreen : null });
  $(".widget").append(Object.assign(document.createElement("parley-call"), { session: calls }));
  calls.addEventListener("ringing", () => {
    // Inside a brand's page, a ringing call opens the chat panel.
    if (window.parent !== window) window.parent.postMessage("parley:ringing", "*");
  });
  if (conversationId) realtime.seen(conversationId, conversations[0].lastSeq);
  realtime.addEventListener("status", (event) => {
    setStatus(event.detail);
    if (event.detail === "online") writer.flush();  // what was written offline goes out, in order
  });
  realtime.addEventListener("frame", (event) => receive(event.detail));
  realtime.connect();
  markRead();
}

function receive(frame) {
  if (frame.type === "message") {
    follow(frame.message.conversationId);
    timeline.upsert(frame.message);
    if (frame.message.senderKind !== "consumer") {
      if (frame.message.senderKind === "agent" && !brand.available) refreshAvailability();  // somebody is here after all
      meetAgent(frame.message);
      showTyping(false);
      acknowledge(frame.message);
    }
  } else if (frame.type === "event") {
    const event = frame.event;
    if (event.kind === "receipt") timeline.receipt(event);
    if (event.kind === "voice_processed" && event.message) timeline.upsert(event.message);
    if (event.kind === "call") timeline.callRecord(event);
    if (event.kind === "assigned") {
      introduce(event);
      if (!brand.available) refreshAvailability();
    }
    if (event.conversationId === conversationId && event.kind === "state_changed" && event.state === "resolved") {
      api.get(`/v1/consumer/conversations/${event.conversationId}`).then((conversation) => showClosed(conversation, event)).catch(() => {});
    }
    if (event.conversationId === conversationId && event.kind === "rated") rated(event.rating);
  } else if (frame.type === "queue") {
    showQueue(frame.queue);
  } else if (frame.type === "cobrowse") {
    cobrowse.changed(frame.cobrowse);
  } else if (frame.type === "cobrowse.point") {
    cobrowse.toPage(frame.sessionId, { action: "point", ...safePoint(frame.payload) });
  } else if (frame.type === "cobrowse.resync") {
    cobrowse.toPage(frame.sessionId, { action: "resync" });
  } else if (frame.type === "cobrowse.input") {
    const input = safeInput(frame.payload);
    if (input) cobrowse.toPage(frame.sessionId, { action: "input", ...input });
  } else if (frame.type === "typing" && frame.participant.kind === "agent" && frame.conversationId === conversationId) {
    showTyping(frame.isTyping);
  }
}

/** The agent's pointer: two numbers and an element's id, whatever else the payload holds. */
function safePoint(payload) {
  try {
    const { x, y, id } = JSON.parse(payload);
    return { x: Number(x), y: Number(y), id: Number.isInteger(id) ? id : null };
  } catch { return {}; }
}

/** The agent's click or typing: a kind, an element's id and a string, whatever else the payload holds. */
function safeInput(payload) {
  try {
    const { kind, id, value } = JSON.parse(payload);
    if (!Number.isInteger(id) || (kind !== "click" && kind !== "value")) return null;
    return kind === "click" ? { kind, id } : { kind, id, value: String(value ?? "").slice(0, 10000) };
  } catch { return null; }
}

/**
 * Co-browse, the customer's side. An offer shows a card in the chat; nothing is shared until the
 * customer presses Share page. Then the brand's page (embed.js, js/cobrowse-page.js) serializes
 * itself with private fields masked, and this frame relays what it sends on the real-time
 * connection. The yes is remembered for the tab (sessionStorage), so the next page of the site
 * takes the session over by itself. Only inside the brand's page: the chat on its own has no page
 * to share.
 */
const cobrowse = {
  session: null,
  seq: 0,
  card: null,
  consentKey: (id) => `parley.cobrowse.${id}`,

  changed(session) {
    if (!embedded || !parentOrigin) return;
    if (this.session?.id === session.id && session.version < this.session.version) return;
    const previous = this.session;
    this.session = session.state === "ended" ? null : session;
    if (session.state === "offered") {
      this.offer(session);
    } else if (session.state === "active") {
      this.card?.remove();
      this.card = null;
      const consented = (() => { try { return sessionStorage.getItem(this.consentKey(session.id)) === "1"; } catch { return false; } })();
      // Another page of the site had it, and the customer said yes in this tab: this page takes over.
      if (!session.consumerConnected && consented) this.accept(session);
      // Control is asked separately, in the chat of the page that is shared.
      if (session.control === "requested" && this.sharing) this.askControl(session);
      else { this.controlCard?.remove(); this.controlCard = null; }
      if (this.sharing && previous?.control !== session.control) {
        window.parent.postMessage({ type: "parley:cobrowse", action: "control", granted: session.control === "granted" }, parentOrigin);
      }
    } else {
      this.card?.remove();
      this.card = null;
      this.controlCard?.remove();
      this.controlCard = null;
      this.sharing = false;
      if (previous) {
        window.parent.postMessage({ type: "parley:cobrowse", action: "stop" }, parentOrigin);
        try { sessionStorage.removeItem(this.consentKey(session.id)); } catch {}
        const note = {
          page_too_large: "This page is too large to share. Your agent can't see it.",
          not_allowed: "Sharing isn't available on this site.",
        }[session.endReason];
        if (note) {
          this.notice(note);
          window.parent.postMessage("parley:ringing", "*");  // the chat opens (on a phone it stepped aside) to say why
        }
      }
    }
  },

  /**
   * A question in the chat, above the composer: a title, a line of text, and a no and a yes (the
   * yes focused). Inside the brand's page it opens the chat panel, as a ringing call does.
   */
  question({ name, className, title, text, no, yes }) {
    const card = document.createElement("div");
    card.className = className;
    card.setAttribute("role", "alertdialog");
    card.setAttribute("aria-labelledby", `${name}-title`);
    card.setAttribute("aria-describedby", `${name}-text`);
    const heading = Object.assign(document.createElement("p"), { id: `${name}-title`, className: "cobrowse-title", textContent: title });
    const line = Object.assign(document.createElement("p"), { id: `${name}-text`, className: "cobrowse-text", textContent: text });
    const actions = Object.assign(document.createElement("div"), { className: "cobrowse-actions" });
    const decline = Object.assign(document.createElement("button"), { type: "button", className: "button", textContent: no.label });
    const accept = Object.assign(document.createElement("button"), { type: "button", className: "button primary", textContent: yes.label });
    decline.onclick = no.action;
    accept.onclick = yes.action;
    actions.append(decline, accept);
    card.append(heading, line, actions);
    $(".composer").before(card);
    accept.focus({ preventScroll: true });
    window.parent.postMessage("parley:ringing", "*");
    return card;
  },

  offer(session) {
    this.card?.remove();
    this.card = this.question({
      name: "cobrowse-offer", className: "cobrowse-offer",
      title: `${session.agentName} would like to see this page`,
      text: "They can see what you see on this site and point at things, but can't click or type. Passwords and card details stay hidden. You can stop at any time.",
      no: { label: "Not now", action: () => this.answer(session, false) },
      yes: { label: "Share this page", action: () => this.accept(session) },
    });
  },

  async answer(session, accept) {
    try {
      const ack = await realtime.request({ type: "cobrowse.answer", sessionId: session.id, accept, origin: parentOrigin });
      return ack.cobrowse;
    } catch (error) {
      this.notice(error.message);
      return null;
    } finally {
      this.card?.remove();
      this.card = null;
    }
  },

  async accept(session) {
    const accepted = await this.answer(session, true);
    if (accepted?.state !== "active") return;
    this.session = accepted;
    this.seq = 0;
    this.sharing = true;
    try { sessionStorage.setItem(this.consentKey(session.id), "1"); } catch {}
    window.parent.postMessage({
      type: "parley:cobrowse", action: "start", agentName: accepted.agentName, brandName: brand.name, maskSelectors: accepted.maskSelectors,
      granted: accepted.control === "granted",
    }, parentOrigin);
    if (accepted.control === "requested") this.askControl(accepted);
  },

  /** The agent asks to click and type: a second yes, in the chat, separate from sharing the page. */
  askControl(session) {
    if (this.controlCard?.dataset.session === session.id) return;
    this.controlCard?.remove();
    this.controlCard = this.question({
      name: "cobrowse-control", className: "cobrowse-offer cobrowse-control",
      title: `${session.agentName} asks to click and type on this page for you`,
      text: "They could press buttons and fill in fields, but never passwords or card details. You see everything they do, and can take control back at any time.",
      no: { label: "No thanks", action: () => this.control("deny") },
      yes: { label: "Allow", action: () => this.control("grant") },
    });
    this.controlCard.dataset.session = session.id;
  },

  async control(action) {
    const session = this.session;
    this.controlCard?.remove();
    this.controlCard = null;
    if (!session) return;
    try {
      this.changed((await realtime.request({ type: "cobrowse.control", sessionId: session.id, action })).cobrowse);
    } catch (error) {
      this.notice(error.message);
    }
  },

  /** A part of the page from the brand's page, for the agent. */
  data({ kind, payload, last }) {
    if (!this.session || this.session.state !== "active" || typeof payload !== "string") return;
    if (kind !== "snapshot" && kind !== "changes") return;
    realtime.post({ type: "cobrowse.data", sessionId: this.session.id, seq: ++this.seq, kind, last: Boolean(last), payload });
  },

  /** The banner's Stop on the brand's page. */
  stop() {
    if (!this.session) return;
    realtime.request({ type: "cobrowse.end", sessionId: this.session.id }).catch(() => {});
  },

  toPage(sessionId, message) {
    if (this.session?.id !== sessionId || !parentOrigin) return;
    window.parent.postMessage({ type: "parley:cobrowse", ...message }, parentOrigin);
  },

  notice(text) {
    const note = Object.assign(document.createElement("p"), { className: "cobrowse-note", textContent: text });
    note.setAttribute("role", "status");
    $(".composer").before(note);
    setTimeout(() => note.remove(), 8000);
  },
};

/**
 * The conversation the visitor is in. A message of another one means the closed conversation was
 * followed by a new one (the visitor wrote again): the closed one stays above as the record.
 */
function follow(id) {
  if (!conversationId) { conversationId = id; return; }
  if (id === conversationId) return;
  timeline.archive();
  $(".history-open").hidden = false;
  conversationId = id;
  acknowledged.delivered = acknowledged.read = 0;
  brand.agent = null;
  renderHeader();
}

/**
 * "This conversation has been closed", and the rating card when the brand asks for one: five
 * stars, an optional comment, then thanks. Writing again starts a new conversation.
 */
function showClosed(conversation, event) {
  if (conversation.id !== conversationId) return;
  $(".queue-note").hidden = true;
  showTyping(false);
  timeline.system({ seq: event.seq, createdAt: event.createdAt ?? conversation.updatedAt }, "This conversation has been closed");
  if (conversation.survey === "offered" || conversation.rating) timeline.custom("rating", event.seq + 0.25, ratingCard(conversation));
  textarea.placeholder = "Start a new conversation…";
}

function ratingCard(conversation) {
  const card = Object.assign(document.createElement("form"), { className: "row rating-card" });
  card.setAttribute("aria-label", "Rate this conversation");
  if (conversation.rating) { thank(card, conversation.rating); return card; }
  const title = Object.assign(document.createElement("p"), { className: "rating-title", textContent: `How did ${brand.agent?.name ?? brand.name} do?` });
  const stars = Object.assign(document.createElement("div"), { className: "stars" });
  stars.setAttribute("role", "radiogroup");
  stars.setAttribute("aria-label", "Your rating, 1 (bad) to 5 (great)");
  const words = ["Bad", "Poor", "OK", "Good", "Great"];
  let score = 0;
  const comment = Object.assign(document.createElement("textarea"), { rows: 2, maxLength: 1000, placeholder: "Tell us more (optional)", hidden: true });
  comment.setAttribute("aria-label", "Comment");
  const submit = Object.assign(document.createElement("button"), { type: "submit", className: "button primary small", textContent: "Send rating", hidden: true });
  const choose = (value) => {
    score = value;
    stars.querySelectorAll("button").forEach((star, index) => {
      star.setAttribute("aria-checked", String(index + 1 === value));
      star.classList.toggle("on", index < value);
    });
    comment.hidden = submit.hidden = false;
  };
  words.forEach((word, index) => {
    const star = Object.assign(document.createElement("button"), { type: "button", innerHTML: icon("star"), title: word });
    star.setAttribute("role", "radio");
    star.setAttribute("aria-checked", "false");
    star.setAttribute("aria-label", `${index + 1} of 5: ${word}`);
    star.addEventListener("click", () => choose(index + 1));
    stars.append(star);
  });
  const error = Object.assign(document.createElement("p"), { className: "rating-error", role: "alert" });
  card.append(title, stars, comment, submit, error);
  card.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    if (!score) return;
    submit.disabled = true;
    try {
      const updated = await api.post(`/v1/consumer/conversations/${conversation.id}/rating`, { score, comment: comment.value.trim() || undefined });
      thank(card, updated.rating);
    } catch (failure) {
      error.textContent = failure.message;
      submit.disabled = false;
    }
  });
  return card;
}

function thank(card, rating) {
  const stars = Object.assign(document.createElement("div"), { className: "stars readonly" });
  stars.setAttribute("aria-label", `You rated ${rating.score} out of 5`);
  for (let index = 0; index < 5; index++) {
    stars.append(Object.assign(document.createElement("span"), { className: index < rating.score ? "on" : "", innerHTML: icon("star") }));
  }
  card.replaceChildren(Object.assign(document.createElement("p"), { className: "rating-title", textContent: "Thanks for your rating!" }), stars);
  if (rating.comment) card.append(Object.assign(document.createElement("p"), { className: "rating-comment", textContent: `“${rating.comment}”` }));
}

/** The rating arrived from elsewhere (another tab): the card says thanks. */
function rated(rating) {
  const card = document.querySelector(".rating-card");
  if (card && rating) thank(card, rating);
}

/**
 * Earlier conversations (as far back as the brand keeps them for visitors), a page at a time; one
 * opens read-only over the chat, and Back returns to the list, then to the chat.
 */
const history = { cursor: null, timeline: null };
$(".history-open").innerHTML = icon("history");
$(".history-back").innerHTML = icon("back");
$(".history-open").addEventListener("click", async () => {
  $(".history-panel").hidden = false;
  $(".history-list").replaceChildren();
  history.cursor = null;
  showHistoryList();
  await loadHistory();
  $(".history-back").focus();
});
$(".history-back").addEventListener("click", () => {
  if (!$(".history-timeline").hidden) { showHistoryList(); return; }
  $(".history-panel").hidden = true;
  $(".history-open").focus();
});
$(".history-more").addEventListener("click", () => loadHistory());

function showHistoryList() {
  $(".history-timeline").hidden = true;
  $(".history-list").hidden = false;
  $(".history-more").hidden = !history.cursor;
  $("#history-title").textContent = "Your conversations";
}

async function loadHistory() {
  const page = await api.get(`/v1/consumer/conversations?limit=20${history.cursor ? `&cursor=${encodeURIComponent(history.cursor)}` : ""}`);
  history.cursor = page.nextCursor ?? null;
  const day = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", year: "numeric" });
  $(".history-list").append(...page.items.map((conversation) => {
    const current = conversation.id === conversationId;
    const button = document.createElement("button");
    button.type = "button";
    const title = Object.assign(document.createElement("span"), { className: "history-preview", textContent: conversation.lastMessagePreview ?? "No messages" });
    const meta = Object.assign(document.createElement("span"), { className: "history-meta",
      textContent: `${day.format(new Date(conversation.updatedAt))} · ${current ? "Now" : conversation.state === "resolved" ? "Closed" : "Open"}${conversation.rating ? ` · ${"★".repeat(conversation.rating.score)}` : ""}` });
    button.append(title, meta);
    button.addEventListener("click", () => current ? $(".history-back").click() : openEarlier(conversation));
    const item = document.createElement("li");
    item.append(button);
    return item;
  }));
  $(".history-more").hidden = !history.cursor;
}

async function openEarlier(conversation) {
  const element = $(".history-timeline");
  history.timeline ??= new Timeline(element, {
    perspective: "consumer", api, nameOf: (message) => message.senderKind === "agent" ? message.senderName ?? brand.name : message.senderKind === "system" ? brand.name : null,
  });
  history.timeline.clear();
  $(".history-list").hidden = true;
  $(".history-more").hidden = true;
  element.hidden = false;
  $("#history-title").textContent = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "long", year: "numeric" }).format(new Date(conversation.createdAt));
  const messages = await api.get(`/v1/consumer/conversations/${conversation.id}/messages?limit=200`);
  messages.items.forEach((message) => history.timeline.upsert(message));
}

/** "You're number 2 in line · about 3 min" while the conversation waits for an agent. */
function showQueue(place) {
  const note = $(".queue-note");
  if (!place || place.conversationId !== (conversationId ?? place.conversationId) || !place.position) { note.hidden = true; return; }
  conversationId ??= place.conversationId;
  const minutes = place.expectedWaitSeconds ? Math.max(1, Math.round(place.expectedWaitSeconds / 60)) : null;
  note.textContent = (place.position === 1 ? "You're next in line" : `You're number ${place.position} in line`)
    + (minutes ? ` · about ${minutes} min` : "");
  note.hidden = false;
}

/** An agent took the conversation (or it was passed on): "You're now talking to Sam". */
async function introduce(event) {
  $(".queue-note").hidden = true;
  if (!event.assigneeId) return;
  const agent = await api.get(`/v1/consumer/agents/${event.assigneeId}`).catch(() => null);
  if (!agent?.name) return;
  timeline.system(event, `You're now talking to ${agent.name}`);
  brand.agent = { id: event.assigneeId, name: agent.name };
  renderHeader();
}

/** The agent who answered last is the one the header shows. */
function meetAgent(message) {
  if (message?.senderKind !== "agent" || !message.senderName || brand.agent?.id === message.senderId) return;
  brand.agent = { id: message.senderId, name: message.senderName };
  renderHeader();
}

/** "typing…" under the messages while an agent writes; it never sticks. */
function showTyping(isTyping) {
  const indicator = $(".typing-indicator");
  indicator.hidden = !isTyping;
  clearTimeout(showTyping.timer);
  if (isTyping) showTyping.timer = setTimeout(() => { indicator.hidden = true; }, 6000);
}

/**
 * Tells the agents what reached the consumer: read when the page is visible, delivered otherwise
 * (the message arrived while the chat was in the background).
 */
function acknowledge(message) {
  if (document.visibilityState === "visible" && panelOpen) {
    markRead();
  } else {
    receipt("delivered");
    if (embedded && !panelOpen) {
      window.parent.postMessage({ type: "parley:unread", count: ++unseen }, "*");
      // The first words go only to a page of the brand's own sites, and only to that origin.
      if (parentOrigin && brand.previewOrigins.includes(parentOrigin)) {
        const text = message.kind === "voice" ? "Voice message"
          : message.kind === "attachment" ? (isImage(message.attachment) ? "Image" : "File")
          : message.text.split("\n").join(" ");
        window.parent.postMessage({ type: "parley:preview", name: message.senderName ?? brand.name, text: text.slice(0, 90) }, parentOrigin);
      }
    }
  }
}

function markRead() { return panelOpen ? receipt("read") : undefined; }

const acknowledged = { delivered: 0, read: 0 };
async function receipt(state) {
  const seq = timeline?.lastIncomingSeq();
  if (!seq || !conversationId || seq <= acknowledged[state]) return;
  if (state === "read" && document.visibilityState !== "visible") return;
  acknowledged[state] = seq;
  if (state === "read") acknowledged.delivered = Math.max(acknowledged.delivered, seq);
  try {
    // Over the socket while it is up (a few dozen bytes); over HTTP otherwise.
    if (realtime?.state === "online") {
      await realtime.request({ type: "receipt", conversationId, upToSeq: seq, state });
    } else {
      await api.post(`/v1/consumer/conversations/${conversationId}/receipts`, { upToSeq: seq, state });
    }
  } catch { acknowledged[state] = 0; }
}
document.addEventListener("visibilitychange", markRead);

/**
 * Sends a text as a `send` frame while the socket is up: the ack comes after the commit, and the
 * frame costs a fraction of an HTTP request's headers. When the socket is down, or drops before the
 * ack, the same request goes over HTTP with the same client message id, so a message the server
 * already stored is answered, not stored twice. Refusals (rate limit, bad input) are final.
 */
async function sendOverBestPath(request) {
  if (realtime?.state === "online") {
    try {
      return await realtime.request({ type: "send", ...request });
    } catch (error) {
      if (error.code) throw error;  // the server answered: HTTP would get the same answer
    }
  }
  return api.post("/v1/consumer/messages", request);
}

const notifyOffer = new NotifyOffer({ element: document.querySelector(".notify-offer"), api });

const writer = new Composer({
  form: composer, textarea, recorder, timeline: () => timeline, ready: () => Boolean(timeline && realtime),
  sendText: async (text, clientMessageId) => {
    const sent = await sendOverBestPath({ clientMessageId, text, conversationId: conversationId ?? undefined });
    if (!appMode) notifyOffer.maybeOffer().catch(() => {});  // in an app, notifications are the app's
    return sent;
  },
  sendVoice: (blob, clientMessageId, onProgress) => {
    const query = new URLSearchParams({ clientMessageId });
    if (conversationId) query.set("conversationId", conversationId);
    return api.upload(`/v1/consumer/voice-messages?${query}`, blob, onProgress);
  },
  sendFile: (file, clientMessageId, onProgress) => {
    // encodeURIComponent, not URLSearchParams: a space is %20, never "+" (which stays a plus).
    const conversation = conversationId ? `&conversationId=${conversationId}` : "";
    return api.upload(`/v1/consumer/attachments?clientMessageId=${clientMessageId}&name=${encodeURIComponent(file.name || "image")}${conversation}`,
      file, onProgress);
  },
  sent: (response) => {
    follow(response.message.conversationId);
    if (response.conversation?.state !== "resolved") textarea.placeholder = "Write a message…";
    realtime.seen(conversationId, response.message.seq);
    timeline.upsert(response.message);
  },
  typing: (isTyping) => { if (conversationId) realtime.typing(conversationId, isTyping); },
});

start();
