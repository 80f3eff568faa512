// The agent workspace's controller: signs in, opens conversations, takes real-time frames and the
// agent's actions, changes the model (workspace/store.js) and asks the views to show it
// (workspace/list-view.js, details-view.js, account-view.js; the timeline, the composer and the
// call are components of their own).
import { ErrorCode } from "./error-codes.js";
import { Api } from "./api.js";
import { Realtime } from "./realtime.js";
import { Composer, configureAttachments, connectionStatusText } from "./composer.js";
import { Alerts } from "./alerts.js";
import { Timeline } from "./timeline.js";
import { icon, initials } from "./icons.js";
import { CallSession } from "./call-session.js";
import { PresenceControl } from "./presence.js";
import { ReplyPicker } from "./saved-replies.js";
import { renderActivity } from "./engagement.js";
import { TransferDialog } from "./routing.js";
import { Reports } from "./reports.js";
import { RecordsActions } from "./records.js";
import { TemplateSender } from "./channels.js";
import { WorkspaceStore, previewOf } from "./workspace/store.js";
import { ListView, SearchView } from "./workspace/list-view.js";
import { DetailsView } from "./workspace/details-view.js";
import { AccountView } from "./workspace/account-view.js";
import "./call-view.js";
import { CobrowseView } from "./workspace/cobrowse-view.js";
import "./voice-recorder.js";

const $ = (selector) => document.querySelector(selector);
const api = new Api();  // the session cookie authenticates
const store = new WorkspaceStore(api);
let realtime;
/** The co-browse dialog (once connected). */
let cobrowse;
let timeline;
let calls;
let presence;
/** Reply to the customer, or write a private note only agents see. */
let composeMode = "reply";

const icons = {
  ".logout": "logout", ".alerts": "bell", ".back": "back", ".send-text": "send", ".start-call[data-media=voice]": "phone",
  ".start-call[data-media=video]": "video", ".start-cobrowse": "cobrowse", ".shortcuts-open": "keyboard", ".reports-open": "chart", ".reports-close": "close",
  ".shortcuts-close": "close", ".details-toggle": "info", ".details-close": "close",
};
for (const [selector, name] of Object.entries(icons)) $(selector).innerHTML = icon(name);

const alerts = new Alerts({ button: $(".alerts"), onOpen: (id) => open(id) });
const list = new ListView({
  root: $(".list-pane"), store, onOpen: (id) => open(id),
  onFilter: async (filter) => {
    store.filter = filter;
    await store.loadList();
    list.render();
  },
});
const search = new SearchView({
  form: $(".search"), input: $("#search"), pane: $(".list-pane"), results: $(".search-results"), summary: $(".search-summary"), api,
  onOpen: (id, options) => open(id, options),
});
const recordsActions = new RecordsActions({
  container: $(".records-actions"), api,
  // The customer is gone: their conversations leave the list, and the page says what was deleted.
  onErased: (purge, consumerId) => {
    for (const [id, conversation] of store.conversations) if (conversation.consumerId === consumerId) store.conversations.delete(id);
    details.showPanel(false);
    $(".back").click();
    $(".workspace").classList.remove("open");
    $(".topbar .status").textContent = `Erased the customer: ${purge.conversations} conversations, ${purge.messages} messages, ${purge.voiceNotes + purge.attachments} files`;
  },
});
const details = new DetailsView({
  store, recordsActions, composeMode: () => composeMode, calls: () => calls, onOpenPast: (id, options) => open(id, options),
});
const account = new AccountView({ store, onSavedRepliesChange: () => picker.refresh(), beforeSignOut: () => realtime?.close() });
const reports = new Reports({ dialog: $(".reports"), api, me: () => store.me });
const templates = new TemplateSender({
  dialog: $(".template-dialog"), api,
  onSent: (response) => {
    realtime.seen(response.conversation.id, response.message.seq);
    if (store.current?.id === response.conversation.id) timeline.upsert(response.message);
    update(response.conversation);
  },
});
const transfer = new TransferDialog({ dialog: $(".transfer-dialog"), api, onDone: (conversation) => update(conversation) });

async function boot() {
  if (!(await store.signIn())) return showLogin();
  $(".login").hidden = true;
  $(".workspace").hidden = false;
  const brand = await store.loadBrand();
  const settings = store.settings;
  $(".brand").textContent = brand.name;
  document.title = store.title;
  $(".me").textContent = store.me.name;
  // On a phone the button shows the initials (workspace.css), and says whose account it is.
  $(".account-open").dataset.initials = initials(store.me.name);
  $(".account-open").setAttribute("aria-label", `Account and team: ${store.me.name}`);
  presence = new PresenceControl({ root: $(".presence"), api, idleMinutes: settings.autoAwayMinutes });
  presence.addEventListener("change", (event) => teamMember(event.detail));
  timeline = new Timeline($(".timeline"), {
    perspective: "agent", api,
    // The customer's name over their groups; a colleague's over theirs; none over mine.
    nameOf: (message) => message.senderKind === "consumer" ? store.currentPerson?.displayName ?? "Customer"
      : message.senderKind === "system" ? "Automatic message"
      : message.senderId !== store.me.id ? message.senderName ?? "An agent" : null,
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
    account.close();
    showLogin();
    $(".login .error-text").textContent = "You were signed out. Sign in again.";
  });
  calls = new CallSession({ realtime, api, role: "agent" });
  cobrowse = new CobrowseView({ realtime, store, dialog: $(".cobrowse-viewer") });
  const callView = Object.assign(document.createElement("parley-call"), { session: calls });
  // Co-browse from the call bar, where the conversation's own button would offer it.
  callView.cobrowseAvailable = () => Boolean(store.current) && !$(".start-cobrowse").hidden && !$(".start-cobrowse").disabled && !cobrowse?.busy;
  callView.addEventListener("cobrowse", () => $(".start-cobrowse").click());
  $(".conversation-pane").append(callView);
  for (const name of ["call", "ended"]) calls.addEventListener(name, () => store.current && details.renderCallButtons(store.current));
  realtime.connect();
  await Promise.all([
    store.loadList().then(() => list.render()),
    store.loadOpen().then(() => list.renderCounts()),
    store.loadTeam().then((team) => team.forEach(teamMember)),
  ]);
}

/** A colleague's presence changed (or mine): the top bar, and the team list when it is open. */
function teamMember(member) {
  store.team.set(member.agentId, member);
  if (member.agentId === store.me.id) presence.show(member);
  if (account.isOpen) account.renderTeam();
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

$(".logout").addEventListener("click", async () => {
  await api.post("/v1/auth/logout").catch(() => {});
  realtime?.close();
  location.reload();
});

$(".reports-open").addEventListener("click", () => reports.open());
$(".reports-close").addEventListener("click", () => $(".reports").close());
$(".send-template").addEventListener("click", () => store.current && templates.open(store.current));
$(".transfer").addEventListener("click", () => transfer.open(store.current, store.me.id));
$(".prioritise").addEventListener("click", async () => {
  const button = $(".prioritise");
  try {
    const place = await api.json("PUT", `/v1/conversations/${store.current.id}/priority`, { priority: 9 });
    button.textContent = place.position === 1 ? "First in line" : `Number ${place.position} in line`;
  } catch (error) {
    button.textContent = error.code === ErrorCode.notWaiting ? "Not waiting any more" : error.message;
  }
});

/** The microphone shows only when the brand and the agent's profile allow voice; otherwise why not. */
function configureVoice() {
  const recorder = $("parley-recorder");
  const hint = $(".voice-hint");
  recorder.hidden = !store.mayRecordVoice;
  recorder.setAttribute("max-seconds", store.settings.voiceMaxSeconds);
  recorder.setAttribute("min-seconds", store.settings.voiceMinSeconds ?? 1);
  hint.hidden = store.mayRecordVoice;
  hint.textContent = !store.settings.voiceFromAgents ? "Voice is off for this brand" : "Voice needs the send_audio permission";
}

// MARK: Conversation

/**
 * Opens a conversation. `highlight`: a message to scroll to and mark (a search hit). `readOnly`: a
 * past conversation opened from the details pane, shown without the composer, with a way back.
 */
async function open(id, { highlight, readOnly = false, focusReply = true } = {}) {
  const focusedBefore = document.activeElement;
  const conversation = store.conversations.get(id) ?? (await api.get(`/v1/conversations/${id}`));
  store.readOnlyReturn = readOnly ? store.current?.id ?? null : null;
  store.current = conversation;
  store.readOnly = readOnly;
  realtime.view(id);
  store.unread.delete(id);
  list.renderCounts();
  $(".workspace").classList.add("open");
  details.showPanel(false);
  $(".placeholder").hidden = true;
  for (const element of [".conversation-header", ".timeline"]) $(element).hidden = false;
  for (const element of [".composer", ".compose-mode"]) $(element).hidden = readOnly;
  $(".readonly-banner").hidden = !readOnly;
  $(".details-pane").hidden = false;
  store.forgetConsumer(conversation.consumerId);  // fresh: the page they are on changes
  const person = await store.consumer(conversation.consumerId);
  store.currentPerson = person;
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
  details.render(conversation, person);
  details.renderPast(conversation);
  renderActivity(api, $(".activity"), conversation.consumerId, () => store.current?.id === conversation.id);
  list.render();
  if (highlight) timeline.highlight(highlight);
  if (readOnly) { $(".back-to-current").focus(); return; }
  markRead();
  // Moving through the list with j / k keeps the keys for the list; and focus the agent moved
  // while the conversation loaded (say, to a voice note) stays where they put it.
  const untouched = document.activeElement === focusedBefore || document.activeElement === document.body;
  if (focusReply && untouched) $("#reply").focus();
}

$(".back-to-current").addEventListener("click", () => {
  if (store.readOnlyReturn) open(store.readOnlyReturn);
});
$(".details-toggle").addEventListener("click", () => details.showPanel(!$(".workspace").classList.contains("details-open")));
$(".details-close").addEventListener("click", () => { details.showPanel(false); $(".details-toggle").focus(); });
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && $(".workspace").classList.contains("details-open")) { details.showPanel(false); $(".details-toggle").focus(); }
});

$(".back").addEventListener("click", () => {
  $(".workspace").classList.remove("open");
  store.current = null;
  realtime.view(null);
  list.render();
});

for (const button of document.querySelectorAll(".start-call")) {
  button.addEventListener("click", async () => {
    if (!store.current) return;
    const person = await store.consumer(store.current.consumerId);
    const started = calls.start(store.current.id, button.dataset.media, person.displayName);
    details.renderCallButtons(store.current);
    await started;
    details.renderCallButtons(store.current);
  });
}

$(".start-cobrowse").addEventListener("click", async () => {
  if (!store.current || !cobrowse) return;
  const person = await store.consumer(store.current.consumerId);
  cobrowse.offer(store.current, person.displayName);
});

$(".assign").addEventListener("click", async () => {
  update(await api.post(`/v1/conversations/${store.current.id}/assign`, { agentId: store.me.id }));
});

$(".resolve").addEventListener("click", async () => {
  const action = store.current.state === "resolved" ? "reopen" : "resolve";
  update(await api.post(`/v1/conversations/${store.current.id}/${action}`));
});

/** A newer state of a conversation: the counts, the list, and the details when it is the one shown. */
function update(conversation) {
  if (!store.update(conversation)) return;
  list.renderCounts();
  if (store.current?.id === conversation.id) {
    store.consumer(conversation.consumerId).then((person) => details.render(conversation, person));
  }
  list.render();
}

async function markRead() {
  const conversation = store.current;
  const seq = timeline.lastIncomingSeq();
  if (!conversation || !seq || document.visibilityState !== "visible") return;
  if (store.unread.delete(conversation.id)) { list.renderCounts(); list.render(); }
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
  const watching = store.current?.id === message.conversationId && document.visibilityState === "visible";
  if (watching || !store.alertsFor(message, known)) return;
  const person = await store.consumer(known?.consumerId ?? message.senderId);
  alerts.notify({
    title: message.seq === 1 ? `New conversation: ${person.displayName}` : person.displayName,
    body: message.kind === "voice" ? "Voice message" : message.kind === "attachment" ? previewOf(message) : message.text.slice(0, 140),
    conversationId: message.conversationId,
  });
}

let typingTimer;
function receive(frame) {
  if (frame.type === "message") {
    const message = frame.message;
    const known = store.conversations.get(message.conversationId);
    const updated = store.withMessage(message);
    if (updated) {
      update(updated);
    } else {
      api.get(`/v1/conversations/${message.conversationId}`).then(update).catch(() => {});
    }
    alertIfNew(message, known);
    if (store.current?.id === message.conversationId) {
      timeline.upsert(message);
      if (message.senderKind === "consumer") {
        if (document.visibilityState === "visible") {
          markRead();
        } else {
          markDelivered(message);
          store.countUnread(message.conversationId);
          list.renderCounts();
        }
      }
    } else if (message.senderKind === "consumer") {
      store.countUnread(message.conversationId);
      list.renderCounts();
      markDelivered(message);
      list.render();
    }
  } else if (frame.type === "conversation") {
    update(frame.conversation);
  } else if (frame.type === "event") {
    const event = frame.event;
    if (store.current?.id !== event.conversationId) return;
    if (event.kind === "receipt") timeline.receipt(event);
    if ((event.kind === "voice_processed" || event.kind === "delivery") && event.message) timeline.upsert(event.message);
    if (event.kind === "call") timeline.callRecord(event);
    if (["note", "assigned", "state_changed", "rated", "cobrowse"].includes(event.kind)) showEvent(event);
  } else if (frame.type === "cobrowse") {
    cobrowse?.changed(frame.cobrowse);
  } else if (frame.type === "cobrowse.data") {
    cobrowse?.data(frame);
  } else if (frame.type === "report") {
    reports.live(frame.report);
  } else if (frame.type === "presence") {
    teamMember(frame.presence);
  } else if (frame.type === "typing" && store.current?.id === frame.conversationId && frame.participant.kind === "consumer") {
    $(".typing").textContent = frame.isTyping ? "typing…" : "";
    clearTimeout(typingTimer);
    typingTimer = setTimeout(() => { $(".typing").textContent = ""; }, 6000);
  }
}

// MARK: Composer

function setComposeMode(mode) {
  composeMode = mode;
  for (const button of document.querySelectorAll(".compose-mode button")) button.setAttribute("aria-checked", String(button.dataset.mode === mode));
  $(".composer").classList.toggle("note-mode", mode === "note");
  $(".compose-mode").classList.toggle("note-mode", mode === "note");
  const reply = $("#reply");
  if (!reply.disabled) reply.placeholder = mode === "note" ? "Private note: only agents see this" : "Reply… (/ for saved replies)";
  $(".send-text").setAttribute("aria-label", mode === "note" ? "Add note" : "Send reply");
  if (store.current) details.render(store.current, store.currentPerson);
  reply.focus();
}
for (const button of document.querySelectorAll(".compose-mode button")) button.addEventListener("click", () => setComposeMode(button.dataset.mode));

/** Notes, and system lines for assignment and state changes, in the timeline. */
async function showEvent(event) {
  if (event.kind === "note") return timeline.note(event, await store.agentName(event.actorId));
  const actor = event.actorKind === "agent" ? await store.agentName(event.actorId) : event.actorKind === "consumer" ? "The customer"
    : event.actorId === "router" ? "Routing" : "Parley";
  let line;
  if (event.kind === "assigned") {
    const target = event.assigneeId ? await store.agentName(event.assigneeId) : null;
    line = !target ? `${actor} unassigned the conversation`
      : event.assigneeId === event.actorId ? `${actor === "You" ? "You" : actor} took the conversation`
      : `${actor} assigned it to ${target === "You" ? "you" : target}`;
  } else if (event.kind === "state_changed") {
    line = event.state === "resolved" && event.actorId === "lifecycle" ? "Closed automatically: the customer had gone quiet"
      : event.state === "resolved" ? `${actor} resolved the conversation`
      : event.state === "reopened" ? `${actor} reopened the conversation`
      : null;
  } else if (event.kind === "cobrowse" && event.cobrowse) {
    const session = event.cobrowse;
    const who = await store.agentName(session.agentId);
    const minutes = session.startedAt && session.endedAt ? Math.round((Date.parse(session.endedAt) - Date.parse(session.startedAt)) / 60000) : 0;
    line = session.startedAt
      ? `${who === "You" ? "You" : who} co-browsed the customer's page for ${minutes < 1 ? "under a minute" : `${minutes} min`}${session.controlGrantedAt ? ", with control" : ""}`
      : `${who === "You" ? "Your" : `${who}'s`} co-browse offer ${session.endReason === "declined" ? "was declined" : "got no answer"}`;
  } else if (event.kind === "rated" && event.rating) {
    line = `The customer rated it ${event.rating.score} out of 5${event.rating.comment ? `: “${event.rating.comment}”` : ""}`;
  }
  if (line) timeline.system(event, line);
}

const writer = new Composer({
  form: $(".composer"), textarea: $("#reply"), recorder: $("parley-recorder"), timeline: () => timeline,
  ready: () => Boolean(store.current),
  sendText: (text, clientMessageId) => composeMode === "note"
    ? api.post(`/v1/conversations/${store.current.id}/notes`, { clientNoteId: clientMessageId, text })
    : api.post(`/v1/conversations/${store.current.id}/messages`, { clientMessageId, text }),
  sendVoice: (blob, clientMessageId, onProgress) =>
    api.upload(`/v1/conversations/${store.current.id}/voice-messages?clientMessageId=${clientMessageId}`, blob, onProgress),
  sendFile: (file, clientMessageId, onProgress) =>
    // encodeURIComponent, not URLSearchParams: a space is %20, never "+" (which stays a plus).
    api.upload(`/v1/conversations/${store.current.id}/attachments?clientMessageId=${clientMessageId}&name=${encodeURIComponent(file.name || "image")}`,
      file, onProgress),
  sent: (response, clientMessageId) => {
    if (response.kind === "note") {
      timeline.dropPending(clientMessageId);
      if (store.current?.id === response.conversationId) showEvent(response);
      return;
    }
    realtime.seen(response.conversation.id, response.message.seq);
    if (store.current?.id === response.conversation.id) timeline.upsert(response.message);
    update(response.conversation);
  },
  typing: (isTyping) => { if (composeMode === "reply") realtime.typing(store.current.id, isTyping); },
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
  const next = list.neighbour(direction);
  if (next && next.dataset.id !== store.current?.id) { open(next.dataset.id, { focusReply: false }); next.scrollIntoView({ block: "nearest" }); }
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
    r: () => { if (store.current && !store.readOnly) setComposeMode("reply"); },
    n: () => { if (store.current && !store.readOnly) setComposeMode("note"); },
    e: () => { if (store.current) $(".resolve").click(); },
    a: () => { if (store.current && !$(".assign").hidden) $(".assign").click(); },
    "/": () => $("#search").focus(),
    "?": () => $(".shortcuts").showModal(),
  };
  const action = actions[event.key];
  if (!action) return;
  event.preventDefault();
  action();
});

boot();
