import { ErrorCode } from "./error-codes.js";
import { Api, ApiError } from "./api.js";
import { Realtime } from "./realtime.js";
import { Composer, configureAttachments, connectionStatusText } from "./composer.js";
import { Alerts } from "./alerts.js";
import { Timeline } from "./timeline.js";
import { icon, initials, isImage, text } from "./icons.js";
import { CallSession } from "./call-session.js";
import { PresenceControl, presenceLabels } from "./presence.js";
import { ReplyPicker, SavedRepliesAdmin } from "./saved-replies.js";
import { EngagementAdmin, renderActivity } from "./engagement.js";
import { RoutingAdmin, TransferDialog } from "./routing.js";
import { LifecycleAdmin } from "./lifecycle.js";
import { Reports } from "./reports.js";
import { RecordsAdmin, RecordsActions } from "./records.js";
import { ChannelsAdmin, TemplateSender } from "./channels.js";
import "./call-view.js";
import "./voice-recorder.js";

// The agent workspace: sign in, conversation list, conversation, details.
const $ = (selector) => document.querySelector(selector);
const api = new Api();  // the session cookie authenticates
const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const dateFormat = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", year: "numeric" });
const state = {
  me: null, settings: null, filter: "open", conversations: new Map(), consumers: new Map(), current: null, unread: new Map(),
  open: new Map(), title: "Parley", team: new Map(), readOnlyReturn: null, channelRules: new Map(),
};
let realtime;
let timeline;
let calls;
let presence;

$(".logout").innerHTML = icon("logout");
$(".alerts").innerHTML = icon("bell");
const alerts = new Alerts({ button: $(".alerts"), onOpen: (id) => open(id) });
$(".back").innerHTML = icon("back");
$(".send-text").innerHTML = icon("send");
$(".start-call[data-media=voice]").innerHTML = icon("phone");
$(".start-call[data-media=video]").innerHTML = icon("video");
$(".shortcuts-open").innerHTML = icon("keyboard");
$(".reports-open").innerHTML = icon("chart");
$(".reports-close").innerHTML = icon("close");
$(".shortcuts-close").innerHTML = icon("close");

async function boot() {
  try {
    state.me = await api.get("/v1/me");
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) return showLogin();
    throw error;
  }
  $(".login").hidden = true;
  $(".workspace").hidden = false;
  const [brand, settings, channels] = await Promise.all([api.get("/v1/brand"), api.get("/v1/brand/settings"), api.get("/v1/channels")]);
  state.settings = settings;
  state.channelRules = new Map(channels.items.map((rules) => [rules.channel, rules]));
  $(".brand").textContent = brand.name;
  state.title = `${brand.name} · Parley`;
  document.title = state.title;
  $(".me").textContent = state.me.name;
  presence = new PresenceControl({ root: $(".presence"), api, idleMinutes: settings.autoAwayMinutes });
  presence.addEventListener("change", (event) => teamMember(event.detail));
  timeline = new Timeline($(".timeline"), {
    perspective: "agent", api,
    // The customer's name over their groups; a colleague's over theirs; none over mine.
    nameOf: (message) => message.senderKind === "consumer" ? state.currentPerson?.displayName ?? "Customer"
      : message.senderKind === "system" ? "Automatic message"
      : message.senderId !== state.me.id ? message.senderName ?? "An agent" : null,
    onRetryDelivery: async (message) => {
      try {
        timeline.upsert(await api.post(`/v1/messages/${message.id}/retry`));
      } catch (failure) {
        timeline.upsert(message);
        alert(failure.message);
      }
    },
  });
  configureVoice();
  configureAttachments($(".composer"), settings.attachmentGroups);
  realtime = new Realtime();
  realtime.addEventListener("status", (event) => {
    const status = $(".topbar .status");
    status.dataset.state = event.detail;
    status.textContent = connectionStatusText[event.detail];
    if (event.detail === "online") writer.flush();
  });
  realtime.addEventListener("frame", (event) => receive(event.detail));
  // The session ended elsewhere (signed out everywhere, a new password, disabled by an admin).
  realtime.addEventListener("signedout", () => {
    $(".account").close();
    showLogin();
    $(".login .error-text").textContent = "You were signed out. Sign in again.";
  });
  calls = new CallSession({ realtime, api, role: "agent" });
  $(".conversation-pane").append(Object.assign(document.createElement("parley-call"), { session: calls }));
  for (const name of ["call", "ended"]) calls.addEventListener(name, () => state.current && renderCallButtons(state.current));
  realtime.connect();
  await Promise.all([loadList(), loadOpen(), loadTeam()]);
}

/** Every agent's presence; mine drives the top bar's control. */
async function loadTeam() {
  const team = (await api.get("/v1/presence")).items;
  for (const member of team) teamMember(member);
}

/** A colleague's presence changed (or mine): the top bar, and the team list when it is open. */
function teamMember(member) {
  state.team.set(member.agentId, member);
  if (member.agentId === state.me.id) presence.show(member);
  if ($(".account").open) renderTeam();
}

/** Every open conversation, for the counts on the filters (whichever filter is shown). */
async function loadOpen() {
  const page = await api.get(`/v1/conversations?${filters.open}&limit=200`);
  state.open = new Map(page.items.map((conversation) => [conversation.id, conversation]));
  renderCounts();
}

/** One more customer message the agent has not seen in a conversation. */
function countUnread(conversationId) {
  state.unread.set(conversationId, (state.unread.get(conversationId) ?? 0) + 1);
  renderCounts();
}

/** Counts on the Open, Mine and Unassigned filters, and unread messages in the tab's title. */
function renderCounts() {
  const open = [...state.open.values()];
  const counts = {
    open: open.length,
    mine: open.filter((conversation) => conversation.assigneeId === state.me.id).length,
    unassigned: open.filter((conversation) => !conversation.assigneeId).length,
  };
  for (const tab of document.querySelectorAll(".filters button")) {
    let badge = tab.querySelector(".count");
    const count = counts[tab.dataset.filter];
    if (count === undefined) continue;
    if (!badge) { badge = Object.assign(document.createElement("span"), { className: "count" }); tab.append(badge); }
    badge.textContent = String(count);
    badge.setAttribute("aria-label", `${count} conversation${count === 1 ? "" : "s"}`);
  }
  const unread = [...state.unread.values()].reduce((sum, count) => sum + count, 0);
  document.title = unread ? `(${unread}) ${state.title}` : state.title;
}

function showLogin() {
  $(".workspace").hidden = true;
  $(".login").hidden = false;
  $(".login input[name=email]").focus();
}

$(".login form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const error = $(".login .error-text");
  error.textContent = "";
  try {
    await api.post("/v1/auth/login", { email: form.get("email"), password: form.get("password") });
    await boot();
  } catch (failure) {
    error.textContent = failure.code === ErrorCode.invalidCredentials ? "The email or the password is wrong." : failure.message;
  }
});

// MARK: Account and team

$(".account-close").innerHTML = icon("close");
$(".account-open").addEventListener("click", () => {
  $(".account").showModal();
  renderTeam();
  showVersion();
});

/** Which Parley this is (from /health): what an admin quotes in a support request. */
async function showVersion() {
  const line = $(".about-version");
  if (line.textContent) return;
  try {
    const response = await fetch("/health", { headers: { Accept: "application/json" } });
    const health = await response.json();
    line.textContent = `Parley ${health.version}` + (health.commit ? ` · commit ${health.commit.slice(0, 7)}` : "");
  } catch {}
}
$(".account-close").addEventListener("click", () => $(".account").close());
const reports = new Reports({ dialog: $(".reports"), api, me: () => state.me });
$(".reports-open").addEventListener("click", () => reports.open());
$(".reports-close").addEventListener("click", () => $(".reports").close());
$(".account").addEventListener("close", () => { renderTeam.started = false; });

const channelsAdmin = new ChannelsAdmin({ section: $(".channel-settings"), api });
const templates = new TemplateSender({
  dialog: $(".template-dialog"), api,
  onSent: (response) => {
    realtime.seen(response.conversation.id, response.message.seq);
    if (state.current?.id === response.conversation.id) timeline.upsert(response.message);
    update(response.conversation);
  },
});
$(".send-template").addEventListener("click", () => state.current && templates.open(state.current));

const savedAdmin = new SavedRepliesAdmin({ section: $(".saved-replies"), api, onChange: () => picker.refresh() });
const engagementAdmin = new EngagementAdmin({ section: $(".engagement"), api });
const routingAdmin = new RoutingAdmin({ section: $(".routing"), api });
const lifecycleAdmin = new LifecycleAdmin({ section: $(".lifecycle"), api });
const recordsAdmin = new RecordsAdmin({ section: $(".records"), api });
const recordsActions = new RecordsActions({
  container: $(".records-actions"), api,
  // The customer is gone: their conversations leave the list, and the page says what was deleted.
  onErased: (purge, consumerId) => {
    for (const [id, conversation] of state.conversations) if (conversation.consumerId === consumerId) state.conversations.delete(id);
    showDetails(false);
    $(".back").click();
    $(".workspace").classList.remove("open");
    $(".topbar .status").textContent = `Erased the customer: ${purge.conversations} conversations, ${purge.messages} messages, ${purge.voiceNotes + purge.attachments} files`;
  },
});
const transfer = new TransferDialog({ dialog: $(".transfer-dialog"), api, onDone: (conversation) => update(conversation) });
$(".transfer").addEventListener("click", () => transfer.open(state.current, state.me.id));
$(".prioritise").addEventListener("click", async () => {
  const button = $(".prioritise");
  try {
    const place = await api.json("PUT", `/v1/conversations/${state.current.id}/priority`, { priority: 9 });
    button.textContent = place.position === 1 ? "First in line" : `Number ${place.position} in line`;
  } catch (error) {
    button.textContent = error.code === ErrorCode.notWaiting ? "Not waiting any more" : error.message;
  }
});

/** The brand's widget: colour, what it says while agents are there or away, and the idle time. */
function fillWidgetForm() {
  const form = $(".widget-form");
  for (const name of ["widgetColor", "availableText", "awayText", "autoAwayMinutes"]) form.elements[name].value = state.settings[name];
  form.elements.previewOrigins.value = (state.settings.previewOrigins ?? []).join("\n");
  renderLogo();
}

function renderLogo() {
  const url = state.settings.logoUrl;
  $(".logo-preview").replaceChildren(url ? Object.assign(document.createElement("img"), { src: url, alt: "" }) : "No logo");
  $(".remove-logo").hidden = !url;
}
$(".logo-input").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  event.target.value = "";
  if (!file) return;
  try {
    state.settings = await api.upload("/v1/brand/logo", file, null, "PUT");
    $(".widget-note").textContent = "Logo saved. Visitors see it the next time the chat opens.";
  } catch (failure) {
    $(".widget-note").textContent = failure.message;
  }
  renderLogo();
});
$(".remove-logo").addEventListener("click", async () => {
  state.settings = await api.json("DELETE", "/v1/brand/logo");
  renderLogo();
});
$(".widget-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = event.target;
  const note = $(".widget-note");
  try {
    state.settings = await api.json("PATCH", "/v1/brand/settings", {
      widgetColor: form.elements.widgetColor.value, availableText: form.elements.availableText.value,
      awayText: form.elements.awayText.value, autoAwayMinutes: Number(form.elements.autoAwayMinutes.value),
      previewOrigins: form.elements.previewOrigins.value.split(/\s+/).filter(Boolean),
    });
    note.textContent = "Saved. Visitors see it the next time the chat opens.";
  } catch (failure) {
    note.textContent = failure.message;
  }
});

$(".password-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  const note = $(".password-form .form-note");
  try {
    await api.post("/v1/me/password", { currentPassword: form.get("current"), newPassword: form.get("next") });
    event.target.reset();
    note.textContent = "Password changed. Your other devices are signed out.";
  } catch (failure) {
    note.textContent = failure.code === ErrorCode.wrongPassword ? "The current password is wrong." : failure.message;
  }
});

$(".sign-out-everywhere").addEventListener("click", async () => {
  // The socket closes first: the server's "signed out" close would show the sign-in form while the
  // page reloads into it anyway (two renders, and a page caught between them).
  realtime?.close();
  await api.post("/v1/auth/logout-all").catch(() => {});
  location.reload();
});

/** Admins see the team: each agent with enable/disable, a password reset and delete. */
async function renderTeam() {
  const team = $(".team");
  const admin = state.me.role === "admin";
  team.hidden = !admin;
  $(".saved-replies").hidden = !admin;
  $(".engagement").hidden = !admin;
  $(".routing").hidden = !admin;
  $(".lifecycle").hidden = !admin;
  $(".records").hidden = !admin;
  $(".widget-settings").hidden = !admin;
  $(".channel-settings").hidden = !admin;
  if (team.hidden) return;
  if (!renderTeam.started) {
    renderTeam.started = true;
    savedAdmin.render();
    engagementAdmin.render();
    routingAdmin.render();
    lifecycleAdmin.render();
    recordsAdmin.render();
    channelsAdmin.render();
    fillWidgetForm();
    api.get("/v1/presence").then((page) => page.items.forEach((member) => state.team.set(member.agentId, member))).then(() => renderTeam());
  }
  const list = $(".team-list");
  const agents = (await api.get("/v1/agents")).items;
  list.replaceChildren(...agents.map((agent) => {
    const item = document.createElement("li");
    item.dataset.agent = agent.id;
    const who = document.createElement("div");
    who.className = "who";
    const name = Object.assign(document.createElement("strong"), { textContent: agent.name });
    const detail = Object.assign(document.createElement("span"), { textContent: `${agent.email} · ${agent.role}` });
    const status = Object.assign(document.createElement("span"), {
      className: `tag ${agent.disabled ? "off" : "on"}`, textContent: agent.disabled ? "Disabled" : "Active" });
    const member = state.team.get(agent.id);
    const shown = agent.disabled ? null : (member?.presence ?? "offline");
    const availability = Object.assign(document.createElement("span"), { className: "presence-tag", textContent: shown ? presenceLabels[shown] : "" });
    if (shown) availability.dataset.presence = shown;
    const open = member?.openConversations ?? 0;
    const load = Object.assign(document.createElement("span"), { className: "load", textContent: `${open} open conversation${open === 1 ? "" : "s"}` });
    who.append(name, availability, status, load, detail);
    item.append(who);
    if (agent.id !== state.me.id) {
      const actions = document.createElement("div");
      actions.className = "team-actions";
      const button = (label, handler) => {
        const element = Object.assign(document.createElement("button"), { className: "button small", type: "button", textContent: label });
        element.setAttribute("aria-label", `${label} ${agent.name}`);
        element.addEventListener("click", handler);
        return element;
      };
      actions.append(
        button(agent.disabled ? "Enable" : "Disable", () => teamChange(agent, { disabled: !agent.disabled },
          agent.disabled ? `${agent.name} can sign in again.` : `${agent.name} is signed out and cannot sign in.`)),
        button("Reset password", () => {
          const password = prompt(`New password for ${agent.name} (at least 10 characters). Their sessions end.`);
          if (password) teamChange(agent, { password }, `${agent.name}'s password was reset; they were signed out.`);
        }),
        button("Delete", async () => {
          if (!confirm(`Delete ${agent.name}? They are signed out and cannot sign in again.`)) return;
          await teamRequest(() => api.json("DELETE", `/v1/agents/${agent.id}`), `${agent.name} was deleted.`);
        }));
      item.append(actions);
    }
    return item;
  }));
}

async function teamChange(agent, change, done) {
  await teamRequest(() => api.json("PATCH", `/v1/agents/${agent.id}`, change), done);
}

async function teamRequest(request, done) {
  const note = $(".team-note");
  try {
    await request();
    note.textContent = done;
  } catch (failure) {
    note.textContent = failure.message;
  }
  await renderTeam();
}

$(".logout").addEventListener("click", async () => {
  await api.post("/v1/auth/logout").catch(() => {});
  realtime?.close();
  location.reload();
});

/** The microphone shows only when the brand and the agent's profile allow voice; otherwise why not. */
function configureVoice() {
  const recorder = $("parley-recorder");
  const hint = $(".voice-hint");
  const allowed = state.settings.voiceFromAgents && state.me.permissions.includes("send_audio");
  recorder.hidden = !allowed;
  recorder.setAttribute("max-seconds", state.settings.voiceMaxSeconds);
  recorder.setAttribute("min-seconds", state.settings.voiceMinSeconds ?? 1);
  hint.hidden = allowed;
  hint.textContent = !state.settings.voiceFromAgents ? "Voice is off for this brand" : "Voice needs the send_audio permission";
}

// MARK: List

const filters = {
  open: "state=open,reopened",
  mine: "state=open,reopened&assignee=me",
  unassigned: "state=open,reopened&assignee=unassigned",
  resolved: "state=resolved",
};

async function loadList() {
  const page = await api.get(`/v1/conversations?${filters[state.filter]}&limit=100`);
  state.conversations = new Map(page.items.map((conversation) => [conversation.id, conversation]));
  await Promise.all(page.items.map((conversation) => consumer(conversation.consumerId)));
  renderList();
}

async function consumer(id) {
  if (!state.consumers.has(id)) state.consumers.set(id, api.get(`/v1/consumers/${id}`).catch(() => ({ displayName: "Customer" })));
  return state.consumers.get(id);
}

function matchesFilter(conversation) {
  const open = conversation.state !== "resolved";
  switch (state.filter) {
    case "open": return open;
    case "mine": return open && conversation.assigneeId === state.me.id;
    case "unassigned": return open && !conversation.assigneeId;
    case "resolved": return !open;
  }
}

/** Newest message first: reading, assigning or a receipt does not move a conversation. */
function byLastMessage(a, b) {
  return (b.lastMessageAt ?? b.createdAt).localeCompare(a.lastMessageAt ?? a.createdAt) || b.id.localeCompare(a.id);
}

async function renderList() {
  const list = $(".conversations");
  const items = [...state.conversations.values()].filter(matchesFilter).sort(byLastMessage);
  const rows = await Promise.all(items.map(async (conversation) => {
    const person = await consumer(conversation.consumerId);
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.dataset.id = conversation.id;
    if (state.current?.id === conversation.id) button.setAttribute("aria-current", "true");
    const who = Object.assign(document.createElement("span"), { className: "who", textContent: person.displayName });
    const when = Object.assign(document.createElement("span"), { className: "when", textContent: conversation.lastMessageAt ? timeFormat.format(new Date(conversation.lastMessageAt)) : "" });
    const preview = Object.assign(document.createElement("span"), { className: "preview" });
    const isVoice = conversation.lastMessageKind === "voice";
    if (isVoice) preview.insertAdjacentHTML("afterbegin", icon("mic"));
    if (conversation.lastMessageKind === "attachment") preview.insertAdjacentHTML("afterbegin", icon("paperclip"));
    preview.append(text(conversation.lastMessagePreview ?? ""));
    const tags = Object.assign(document.createElement("span"), { className: "tags" });
    tags.append(Object.assign(document.createElement("span"), { className: "tag", textContent: channelNames[conversation.channel] ?? conversation.channel }));
    if (conversation.state === "reopened") tags.append(Object.assign(document.createElement("span"), { className: "tag", textContent: "reopened" }));
    if (conversation.assigneeId === state.me.id) tags.append(Object.assign(document.createElement("span"), { className: "tag", textContent: "mine" }));
    const unread = state.unread.get(conversation.id);
    if (unread) {
      const badge = Object.assign(document.createElement("span"), { className: "tag unread", textContent: String(unread) });
      badge.setAttribute("aria-label", `${unread} unread`);
      tags.append(badge);
    }
    button.append(who, when, preview, tags);
    button.onclick = () => open(conversation.id);
    item.append(button);
    return item;
  }));
  list.replaceChildren(...rows);
}

// MARK: Search

let searchTimer;
let searchSerial = 0;
$("#search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(search, 200);
});
$("#search").addEventListener("keydown", (event) => {
  if (event.key === "Escape") { event.target.value = ""; search(); event.target.blur(); }
  if (event.key === "ArrowDown") { event.preventDefault(); $(".search-results .results button")?.focus(); }
});
$(".search").addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(searchTimer); search(); });

/** Results replace the list while the box holds a query: matches in message text, then names. */
async function search() {
  const query = $("#search").value.trim();
  const serial = ++searchSerial;
  const showing = query.length > 0;
  $(".search-results").hidden = !showing;
  $(".list-pane").classList.toggle("searching", showing);
  if (!showing) return;
  let hits;
  try {
    hits = (await api.get(`/v1/search?q=${encodeURIComponent(query)}&limit=30`)).items;
  } catch (failure) {
    if (serial !== searchSerial) return;
    $(".search-summary").textContent = failure.message;
    $(".search-results .results").replaceChildren();
    return;
  }
  if (serial !== searchSerial) return;  // a newer query is on its way
  $(".search-summary").textContent = hits.length ? `${hits.length} conversation${hits.length === 1 ? "" : "s"}` : `Nothing matches “${query}”.`;
  $(".search-results .results").replaceChildren(...hits.map((hit) => {
    const item = document.createElement("li");
    const button = Object.assign(document.createElement("button"), { type: "button" });
    const who = Object.assign(document.createElement("span"), { className: "who", textContent: hit.consumerName });
    const when = Object.assign(document.createElement("span"), {
      className: "when", textContent: dateFormat.format(new Date(hit.message?.createdAt ?? hit.conversation.updatedAt)) });
    const snippet = Object.assign(document.createElement("span"), { className: "preview" });
    snippet.append(hit.message ? highlighted(hit.message.text, query) : text(hit.conversation.lastMessagePreview ?? ""));
    const tags = Object.assign(document.createElement("span"), { className: "tags" });
    tags.append(Object.assign(document.createElement("span"), { className: "tag", textContent: hit.conversation.state }));
    button.append(who, when, snippet, tags);
    button.addEventListener("click", () => open(hit.conversation.id, { highlight: hit.message?.id }));
    item.append(button);
    return item;
  }));
}

/** The text around the first matched word, with the words that match marked. */
function highlighted(value, query) {
  const words = query.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  const flat = value.split("\n").join(" ");
  const lower = flat.toLowerCase();
  const first = Math.min(flat.length, ...words.map((word) => lower.indexOf(word)).filter((index) => index >= 0));
  const start = Math.max(0, first - 30);
  const excerpt = (start > 0 ? "…" : "") + flat.slice(start, start + 140);
  const span = document.createElement("span");
  const escaped = words.map((word) => word.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${escaped.join("|")})[\\p{L}\\p{N}]*`, "giu");
  let last = 0;
  for (const match of excerpt.matchAll(pattern)) {
    span.append(document.createTextNode(excerpt.slice(last, match.index)));
    span.append(Object.assign(document.createElement("mark"), { textContent: match[0] }));
    last = match.index + match[0].length;
  }
  span.append(document.createTextNode(excerpt.slice(last)));
  return span;
}

for (const tab of document.querySelectorAll(".filters button")) {
  tab.addEventListener("click", async () => {
    state.filter = tab.dataset.filter;
    for (const other of document.querySelectorAll(".filters button")) other.setAttribute("aria-selected", String(other === tab));
    await loadList();
  });
}

// MARK: Conversation

/**
 * Opens a conversation. `highlight`: a message to scroll to and mark (a search hit). `readOnly`: a
 * past conversation opened from the details pane, shown without the composer, with a way back.
 */
async function open(id, { highlight, readOnly = false, focusReply = true } = {}) {
  const focusedBefore = document.activeElement;
  const conversation = state.conversations.get(id) ?? (await api.get(`/v1/conversations/${id}`));
  state.readOnlyReturn = readOnly ? state.current?.id ?? null : null;
  state.current = conversation;
  state.readOnly = readOnly;
  realtime.view(id);
  state.unread.delete(id);
  renderCounts();
  $(".workspace").classList.add("open");
  showDetails(false);
  $(".placeholder").hidden = true;
  for (const element of [".conversation-header", ".timeline"]) $(element).hidden = false;
  for (const element of [".composer", ".compose-mode"]) $(element).hidden = readOnly;
  $(".readonly-banner").hidden = !readOnly;
  $(".details-pane").hidden = false;
  state.consumers.delete(conversation.consumerId);  // fresh: the page they are on changes
  const person = await consumer(conversation.consumerId);
  state.currentPerson = person;
  $(".consumer-name").textContent = person.displayName;
  timeline.clear();
  const [history, callHistory, events] = await Promise.all([
    api.get(`/v1/conversations/${id}/messages?limit=200`),
    api.get(`/v1/conversations/${id}/calls?limit=50`),
    api.get(`/v1/conversations/${id}/events?limit=200`),
  ]);
  history.items.forEach((message) => timeline.upsert(message));
  callHistory.items.filter((call) => call.seq).forEach((call) => timeline.callRecord({ seq: call.seq, call, createdAt: call.endedAt }));
  await Promise.all(events.items.map(showEvent));
  realtime.seen(id, conversation.lastSeq);
  renderDetails(conversation, person);
  renderPast(conversation);
  renderActivity(api, $(".activity"), conversation.consumerId, () => state.current?.id === conversation.id);
  renderList();
  if (highlight) timeline.highlight(highlight);
  if (readOnly) { $(".back-to-current").focus(); return; }
  markRead();
  // Moving through the list with j / k keeps the keys for the list; and focus the agent moved
  // while the conversation loaded (say, to a voice note) stays where they put it.
  const untouched = document.activeElement === focusedBefore || document.activeElement === document.body;
  if (focusReply && untouched) $("#reply").focus();
}

$(".back-to-current").addEventListener("click", () => {
  if (state.readOnlyReturn) open(state.readOnlyReturn);
});

/** Below 1000 px the details are a panel over the conversation, opened from its header. */
function showDetails(open) {
  $(".workspace").classList.toggle("details-open", open);
  $(".details-toggle").setAttribute("aria-expanded", String(open));
  if (open) $(".details-close").focus();
}
$(".details-toggle").innerHTML = icon("info");
$(".details-close").innerHTML = icon("close");
$(".details-toggle").addEventListener("click", () => showDetails(!$(".workspace").classList.contains("details-open")));
$(".details-close").addEventListener("click", () => { showDetails(false); $(".details-toggle").focus(); });
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && $(".workspace").classList.contains("details-open")) { showDetails(false); $(".details-toggle").focus(); }
});

$(".back").addEventListener("click", () => {
  $(".workspace").classList.remove("open");
  state.current = null;
  realtime.view(null);
  renderList();
});

function renderDetails(conversation, person) {
  $(".d-avatar").textContent = initials(person.displayName);
  $(".d-name").textContent = person.displayName;
  // Customers from a messaging app are known by their number there, not signed in.
  const messagingApp = /^(whatsapp|messenger|apple|sms):/.exec(person.externalId ?? "");
  $(".d-identity").textContent = person.anonymous ? "Anonymous visitor"
    : messagingApp ? `Writes from ${channelNames[messagingApp[1]]}` : `Signed in as ${person.externalId}`;
  $(".d-email").textContent = person.email ?? "—";
  $(".d-phone").textContent = person.phone ?? "—";
  $(".d-channel").textContent = channelNames[conversation.channel] ?? conversation.channel;
  $(".d-app").textContent = "…";
  appName(conversation.appId).then((name) => { if (state.current?.id === conversation.id) $(".d-app").textContent = name; });
  recordsActions.show(conversation, state.me);
  for (const link of document.querySelectorAll(".d-transcript")) {
    link.href = `/v1/conversations/${conversation.id}/transcript?format=${link.dataset.format}`;
    link.setAttribute("aria-label", `Download the transcript as ${link.textContent}`);
  }
  const stars = conversation.rating ? ` · rated ${"★".repeat(conversation.rating.score)}${"☆".repeat(5 - conversation.rating.score)}` : "";
  $(".d-state").textContent = conversation.state + stars;
  $(".d-state").title = conversation.rating?.comment ?? "";
  const assignee = conversation.assigneeId;
  $(".d-assignee").textContent = !assignee ? "Nobody" : assignee === state.me.id ? "You" : (state.team.get(assignee)?.name ?? "Another agent");
  $(".d-first-seen").textContent = dateFormat.format(new Date(person.createdAt));
  const page = $(".d-page");
  if (person.lastPageUrl) {
    const link = Object.assign(document.createElement("a"), {
      href: person.lastPageUrl, target: "_blank", rel: "noopener noreferrer", textContent: person.lastPageTitle || person.lastPageUrl });
    link.title = person.lastPageUrl;
    page.replaceChildren(link);
  } else {
    page.textContent = "—";
  }
  $(".d-browser").textContent = person.lastBrowser ? browserName(person.lastBrowser) : "—";
  const attributes = Object.entries(person.attributes ?? {});
  $(".d-attributes").hidden = $(".d-attributes-title").hidden = attributes.length === 0;
  $(".d-attributes").replaceChildren(...attributes.flatMap(([name, value]) => [
    Object.assign(document.createElement("dt"), { textContent: name }), Object.assign(document.createElement("dd"), { textContent: value }),
  ]));
  $(".assign").hidden = conversation.assigneeId === state.me.id;
  $(".transfer").hidden = conversation.state === "resolved" || !["manager", "admin"].includes(state.me.role);
  // A waiting conversation (nobody has it) can be moved to the front of the queue by a manager.
  $(".prioritise").hidden = conversation.state === "resolved" || Boolean(conversation.assigneeId) || !["manager", "admin"].includes(state.me.role);
  $(".prioritise").textContent = "Put first in line";
  const resolve = $(".resolve");
  const resolved = conversation.state === "resolved";
  resolve.textContent = resolved ? "Reopen" : "Resolve";
  // A resolved conversation takes no replies until it is reopened.
  const reply = $("#reply");
  reply.disabled = resolved;
  reply.placeholder = resolved ? "Resolved: reopen to reply" : composeMode === "note" ? "Private note: only agents see this" : "Reply… (/ for saved replies)";
  $(".send-text").disabled = resolved;
  $(".composer .attach")?.toggleAttribute("disabled", resolved);
  $("parley-recorder").hidden = resolved || !(state.settings.voiceFromAgents && state.me.permissions.includes("send_audio"));
  renderWindow(conversation);
  renderCallButtons(conversation);
}

/**
 * What the conversation's channel allows (from GET /v1/channels): voice and files where the
 * channel carries them, and on WhatsApp the 24-hour window: how long is left, and once it has
 * closed, a template instead of the text box and the microphone.
 */
function renderWindow(conversation) {
  const rules = state.channelRules.get(conversation.channel);
  const banner = $(".window-banner");
  clearTimeout(renderWindow.timer);
  if (!rules) { banner.hidden = true; return; }
  if (!rules.voiceFromAgent) $("parley-recorder").hidden = true;
  if (!rules.attachmentsFromAgent) $(".composer .attach").hidden = true;
  const end = conversation.replyWindowEndsAt ? new Date(conversation.replyWindowEndsAt) : null;
  if (!rules.replyWindowHours || !end || conversation.state === "resolved" || state.readOnly) { banner.hidden = true; return; }
  const left = end - Date.now();
  const closed = left <= 0;
  banner.hidden = false;
  banner.dataset.state = closed ? "closed" : left < 3600_000 ? "closing" : "open";
  const name = channelNames[conversation.channel] ?? conversation.channel;
  if (closed) {
    $(".window-text").textContent = rules.templates
      ? `The reply window has closed: ${name} only takes a template until the customer writes again.`
      : `The reply window has closed: ${name} takes no reply until the customer writes again.`;
  } else {
    const total = Math.ceil(left / 60_000);
    const days = Math.floor(total / 1440);
    const minutes = total % 60;
    // "5 d 3 h" for more than two days (Messenger's Human Agent window), "23 h 20 min" below.
    const parts = days >= 2
      ? [`${days} d`, Math.floor((total % 1440) / 60) ? `${Math.floor((total % 1440) / 60)} h` : ""].filter(Boolean)
      : [Math.floor(total / 60) ? `${Math.floor(total / 60)} h` : "", minutes || total < 60 ? `${minutes} min` : ""].filter(Boolean);
    $(".window-text").textContent = `${name} reply window: ${parts.join(" ")} left`;
    renderWindow.timer = setTimeout(() => state.current?.id === conversation.id && renderDetails(state.current, state.currentPerson), 60_000);
  }
  $(".send-template").hidden = !closed || !rules.templates;
  const reply = $("#reply");
  if (closed && composeMode === "reply") {
    reply.disabled = true;
    reply.placeholder = rules.templates ? "The reply window has closed: send a template" : "The reply window has closed";
    $(".send-text").disabled = true;
    $("parley-recorder").hidden = true;
    $(".composer .attach").hidden = true;
    for (const element of [$("parley-recorder"), $(".composer .attach")]) element.title = "Not allowed after the reply window";
  } else {
    $(".composer .attach").hidden = !rules.attachmentsFromAgent;
  }
}

let appNames;
/** The brand's apps by id (the web widget, the brand's own app...), fetched once. */
async function appName(id) {
  appNames ??= api.get("/v1/apps").then((page) => new Map(page.items.map((app) => [app.id, app.name]))).catch(() => new Map());
  return (await appNames).get(id) ?? "An app";
}

const channelNames = { web: "Web chat", in_app: "In-app", whatsapp: "WhatsApp", messenger: "Messenger", apple: "Apple Messages", sms: "SMS" };

/** "Chrome on Android" from a User-Agent: enough for an agent to picture the customer's screen. */
function browserName(agent) {
  const browser = /Edg\//.test(agent) ? "Edge" : /OPR\//.test(agent) ? "Opera" : /Firefox\//.test(agent) ? "Firefox"
    : /Chrome\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : "A browser";
  const system = /iPhone|iPad/.test(agent) ? "iOS" : /Android/.test(agent) ? "Android" : /Mac OS X/.test(agent) ? "macOS"
    : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : "";
  return system ? `${browser} on ${system}` : browser;
}

/** The customer's other conversations, newest first; each opens read-only. */
async function renderPast(conversation) {
  const list = $(".past");
  const page = await api.get(`/v1/conversations?consumer=${conversation.consumerId}&limit=20`).catch(() => ({ items: [] }));
  if (state.current?.id !== conversation.id) return;
  const others = page.items.filter((other) => other.id !== conversation.id);
  if (!others.length) {
    list.replaceChildren(Object.assign(document.createElement("li"), { className: "empty", textContent: "None: this is their first." }));
    return;
  }
  list.replaceChildren(...others.map((other) => {
    const item = document.createElement("li");
    const button = Object.assign(document.createElement("button"), { type: "button" });
    const when = Object.assign(document.createElement("span"), { className: "when", textContent: dateFormat.format(new Date(other.createdAt)) });
    const status = Object.assign(document.createElement("span"), { className: "tag", textContent: other.state });
    const preview = Object.assign(document.createElement("span"), { className: "preview", textContent: other.lastMessagePreview ?? "" });
    button.append(when, status, preview);
    button.setAttribute("aria-label", `Conversation of ${when.textContent}, ${other.state}: ${preview.textContent}`);
    button.addEventListener("click", () => open(other.id, { readOnly: other.state === "resolved" }));
    item.append(button);
    return item;
  }));
}

/** Call buttons show only for the kinds of call the agent's profile allows, on channels that carry calls. */
function renderCallButtons(conversation) {
  const channelCalls = state.channelRules.get(conversation.channel)?.calls ?? false;
  const hint = $(".call-hint");
  let reason = "";
  if (!CallSession.supported) reason = CallSession.unsupportedReason;
  else if (conversation.state === "resolved") reason = "Reopen to call";
  for (const button of document.querySelectorAll(".start-call")) {
    const permission = button.dataset.media === "video" ? "initiate_video_call" : "initiate_voice_call";
    button.hidden = !channelCalls || !state.me.permissions.includes(permission);
    button.disabled = Boolean(reason) || Boolean(calls?.busy);
  }
  const anyButton = [...document.querySelectorAll(".start-call")].some((button) => !button.hidden);
  hint.hidden = !anyButton || !reason;
  hint.textContent = reason;
}

for (const button of document.querySelectorAll(".start-call")) {
  button.addEventListener("click", async () => {
    if (!state.current) return;
    const person = await consumer(state.current.consumerId);
    const started = calls.start(state.current.id, button.dataset.media, person.displayName);
    renderCallButtons(state.current);
    await started;
    renderCallButtons(state.current);
  });
}

$(".assign").addEventListener("click", async () => {
  const updated = await api.post(`/v1/conversations/${state.current.id}/assign`, { agentId: state.me.id });
  update(updated);
});

$(".resolve").addEventListener("click", async () => {
  const action = state.current.state === "resolved" ? "reopen" : "resolve";
  update(await api.post(`/v1/conversations/${state.current.id}/${action}`));
});

function update(conversation) {
  const known = state.conversations.get(conversation.id);
  if (known && known.lastSeq > conversation.lastSeq) return;
  state.conversations.set(conversation.id, conversation);
  if (conversation.state === "resolved") state.open.delete(conversation.id); else state.open.set(conversation.id, conversation);
  renderCounts();
  if (state.current?.id === conversation.id) {
    state.current = conversation;
    consumer(conversation.consumerId).then((person) => renderDetails(conversation, person));
  }
  renderList();
}

async function markRead() {
  const conversation = state.current;
  const seq = timeline.lastIncomingSeq();
  if (!conversation || !seq || document.visibilityState !== "visible") return;
  if (state.unread.delete(conversation.id)) { renderCounts(); renderList(); }
  await api.post(`/v1/conversations/${conversation.id}/receipts`, { upToSeq: seq, state: "read" }).catch(() => {});
}

/** A customer's message reached this agent's screen without being read (another conversation, or the tab in the background). */
function markDelivered(message) {
  const request = { type: "receipt", conversationId: message.conversationId, upToSeq: message.seq, state: "delivered" };
  realtime.request(request).catch(() => {});
}
document.addEventListener("visibilitychange", markRead);

// MARK: Real-time

/**
 * A chime (and a desktop notification while the tab is in the background) for the first message of
 * a new conversation, or a customer's message in one assigned to me, unless I am looking at it.
 */
async function alertIfNew(message, known) {
  if (message.senderKind !== "consumer") return;
  const watching = state.current?.id === message.conversationId && document.visibilityState === "visible";
  const mine = known?.assigneeId === state.me.id;
  if (watching || !(message.seq === 1 || mine)) return;
  const person = await consumer(known?.consumerId ?? message.senderId);
  alerts.notify({
    title: message.seq === 1 ? `New conversation: ${person.displayName}` : person.displayName,
    body: message.kind === "voice" ? "Voice message" : message.kind === "attachment" ? attachmentPreview(message) : message.text.slice(0, 140),
    conversationId: message.conversationId,
  });
}

let typingTimer;
function receive(frame) {
  if (frame.type === "message") {
    const message = frame.message;
    const known = state.conversations.get(message.conversationId);
    if (known) {
      update({
        ...known, lastSeq: Math.max(known.lastSeq, message.seq), updatedAt: message.createdAt, lastMessageAt: message.createdAt,
        lastMessageKind: message.kind,
        lastMessagePreview: message.kind === "attachment" ? attachmentPreview(message)
          : message.kind !== "voice" ? message.text.split("\n").join(" ").slice(0, 120)
          : message.voice?.state === "blocked" ? "Audio message blocked" : `Audio message ${clockOf(message)}`,
      });
    } else {
      api.get(`/v1/conversations/${message.conversationId}`).then(update).catch(() => {});
    }
    alertIfNew(message, known);
    if (state.current?.id === message.conversationId) {
      timeline.upsert(message);
      if (message.senderKind === "consumer") {
        if (document.visibilityState === "visible") {
          markRead();
        } else {
          markDelivered(message);
          countUnread(message.conversationId);
        }
      }
    } else if (message.senderKind === "consumer") {
      countUnread(message.conversationId);
      markDelivered(message);
      renderList();
    }
  } else if (frame.type === "conversation") {
    update(frame.conversation);
  } else if (frame.type === "event") {
    const event = frame.event;
    if (state.current?.id !== event.conversationId) return;
    if (event.kind === "receipt") timeline.receipt(event);
    if ((event.kind === "voice_processed" || event.kind === "delivery") && event.message) timeline.upsert(event.message);
    if (event.kind === "call") timeline.callRecord(event);
    if (["note", "assigned", "state_changed", "rated"].includes(event.kind)) showEvent(event);
  } else if (frame.type === "report") {
    reports.live(frame.report);
  } else if (frame.type === "presence") {
    teamMember(frame.presence);
  } else if (frame.type === "typing" && state.current?.id === frame.conversationId && frame.participant.kind === "consumer") {
    $(".typing").textContent = frame.isTyping ? "typing…" : "";
    clearTimeout(typingTimer);
    typingTimer = setTimeout(() => { $(".typing").textContent = ""; }, 6000);
  }
}

function attachmentPreview(message) {
  const file = message.attachment;
  return isImage(file) ? "Image" : `File: ${file?.fileName ?? ""}`;
}

function clockOf(message) {
  const seconds = Math.round((message.voice?.durationMs ?? 0) / 1000);
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

// MARK: Composer

/** Reply to the customer, or write a private note only agents see. */
let composeMode = "reply";
function setComposeMode(mode) {
  composeMode = mode;
  for (const button of document.querySelectorAll(".compose-mode button")) button.setAttribute("aria-checked", String(button.dataset.mode === mode));
  $(".composer").classList.toggle("note-mode", mode === "note");
  $(".compose-mode").classList.toggle("note-mode", mode === "note");
  const reply = $("#reply");
  if (!reply.disabled) reply.placeholder = mode === "note" ? "Private note: only agents see this" : "Reply… (/ for saved replies)";
  $(".send-text").setAttribute("aria-label", mode === "note" ? "Add note" : "Send reply");
  if (state.current) renderDetails(state.current, state.currentPerson);
  reply.focus();
}
for (const button of document.querySelectorAll(".compose-mode button")) button.addEventListener("click", () => setComposeMode(button.dataset.mode));

let teamLoaded;
/** The name to show for an agent id ("You" for me), from the team's presence (any agent may read it). */
async function agentName(id) {
  if (id === state.me.id) return "You";
  if (!state.team.has(id)) {
    teamLoaded ??= loadTeam().catch(() => {});
    await teamLoaded;
  }
  return state.team.get(id)?.name ?? "An agent";
}

/** Notes, and system lines for assignment and state changes, in the timeline. */
async function showEvent(event) {
  if (event.kind === "note") return timeline.note(event, await agentName(event.actorId));
  const actor = event.actorKind === "agent" ? await agentName(event.actorId) : event.actorKind === "consumer" ? "The customer"
    : event.actorId === "router" ? "Routing" : "Parley";
  let line;
  if (event.kind === "assigned") {
    const target = event.assigneeId ? await agentName(event.assigneeId) : null;
    line = !target ? `${actor} unassigned the conversation`
      : event.assigneeId === event.actorId ? `${actor === "You" ? "You" : actor} took the conversation`
      : `${actor} assigned it to ${target === "You" ? "you" : target}`;
  } else if (event.kind === "state_changed") {
    line = event.state === "resolved" && event.actorId === "lifecycle" ? "Closed automatically: the customer had gone quiet"
      : event.state === "resolved" ? `${actor} resolved the conversation`
      : event.state === "reopened" ? `${actor} reopened the conversation`
      : null;
  } else if (event.kind === "rated" && event.rating) {
    line = `The customer rated it ${event.rating.score} out of 5${event.rating.comment ? `: “${event.rating.comment}”` : ""}`;
  }
  if (line) timeline.system(event, line);
}

const writer = new Composer({
  form: $(".composer"), textarea: $("#reply"), recorder: $("parley-recorder"), timeline: () => timeline,
  ready: () => Boolean(state.current),
  sendText: (text, clientMessageId) => composeMode === "note"
    ? api.post(`/v1/conversations/${state.current.id}/notes`, { clientNoteId: clientMessageId, text })
    : api.post(`/v1/conversations/${state.current.id}/messages`, { clientMessageId, text }),
  sendVoice: (blob, clientMessageId, onProgress) =>
    api.upload(`/v1/conversations/${state.current.id}/voice-messages?clientMessageId=${clientMessageId}`, blob, onProgress),
  sendFile: (file, clientMessageId, onProgress) =>
    // encodeURIComponent, not URLSearchParams: a space is %20, never "+" (which stays a plus).
    api.upload(`/v1/conversations/${state.current.id}/attachments?clientMessageId=${clientMessageId}&name=${encodeURIComponent(file.name || "image")}`,
      file, onProgress),
  sent: (response, clientMessageId) => {
    if (response.kind === "note") {
      timeline.dropPending(clientMessageId);
      if (state.current?.id === response.conversationId) showEvent(response);
      return;
    }
    realtime.seen(response.conversation.id, response.message.seq);
    if (state.current?.id === response.conversation.id) timeline.upsert(response.message);
    update(response.conversation);
  },
  typing: (isTyping) => { if (composeMode === "reply") realtime.typing(state.current.id, isTyping); },
});

const picker = new ReplyPicker({
  form: $(".composer"), textarea: $("#reply"), list: $(".reply-picker"),
  load: async () => (await api.get("/v1/saved-replies")).items,
});

// MARK: Keyboard shortcuts

$(".shortcuts-open").addEventListener("click", () => $(".shortcuts").showModal());
$(".shortcuts-close").addEventListener("click", () => $(".shortcuts").close());

/** The conversation before or after the open one in the list as it is shown. */
function step(direction) {
  const buttons = [...document.querySelectorAll(".conversations li button")];
  if (!buttons.length) return;
  const index = buttons.findIndex((button) => button.dataset.id === state.current?.id);
  const next = buttons[index < 0 ? 0 : Math.min(buttons.length - 1, Math.max(0, index + direction))];
  if (next && next.dataset.id !== state.current?.id) { open(next.dataset.id, { focusReply: false }); next.scrollIntoView({ block: "nearest" }); }
}

document.addEventListener("keydown", (event) => {
  if ($(".workspace").hidden || document.querySelector("dialog[open]")) return;
  const typing = event.target.closest?.("input, textarea, select, [contenteditable]");
  if (event.altKey && (event.key === "ArrowDown" || event.key === "ArrowUp")) {
    event.preventDefault();
    step(event.key === "ArrowDown" ? 1 : -1);
    return;
  }
  if (typing) {
    if (event.key === "Escape" && event.target.id === "reply" && $(".reply-picker").hidden) event.target.blur();
    return;
  }
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const actions = {
    j: () => step(1),
    k: () => step(-1),
    r: () => { if (state.current && !state.readOnly) setComposeMode("reply"); },
    n: () => { if (state.current && !state.readOnly) setComposeMode("note"); },
    e: () => { if (state.current) $(".resolve").click(); },
    a: () => { if (state.current && !$(".assign").hidden) $(".assign").click(); },
    "/": () => $("#search").focus(),
    "?": () => $(".shortcuts").showModal(),
  };
  const action = actions[event.key];
  if (!action) return;
  event.preventDefault();
  action();
});

boot();
