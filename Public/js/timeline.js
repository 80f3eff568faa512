import { icon, clock, text, linkedText, initials, isImage } from "./icons.js";
import { describeCall } from "./call-session.js";
import "./voice-player.js";

const dayFormat = new Intl.DateTimeFormat(undefined, { weekday: "short", day: "numeric", month: "short" });
const timeFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
/** Delivery states only move forward: sent, then delivered, then read. */
const deliveryRank = { sent: 0, delivered: 1, read: 2 };
/** Messages of one sender less than this apart form a group: one name and avatar, one time. */
const groupGapMs = 5 * 60_000;

function fileSize(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

function fileKind(file) {
  return { pdf: "PDF", text: "Text", docx: "Word", xlsx: "Excel", pptx: "PowerPoint", ms_office: "Office" }[file.type] ?? "File";
}

/** Downloads an attachment under its name (through the API: the widget authenticates with a token). */
async function save(api, file) {
  const url = await api.mediaURL(`${file.url}?download`);
  const link = Object.assign(document.createElement("a"), { href: url, download: file.fileName });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** The full image over the page, with a download and a close button (Escape closes it too). */
async function openLightbox(api, file) {
  const dialog = Object.assign(document.createElement("dialog"), { className: "lightbox" });
  dialog.setAttribute("aria-label", file.fileName || "Image");
  const image = Object.assign(document.createElement("img"), { alt: file.fileName || "Image" });
  const bar = Object.assign(document.createElement("div"), { className: "lightbox-bar" });
  const name = Object.assign(document.createElement("span"), { textContent: file.fileName });
  const download = Object.assign(document.createElement("button"), { type: "button", className: "icon-button" });
  download.innerHTML = icon("download");
  download.setAttribute("aria-label", `Download ${file.fileName}`);
  download.addEventListener("click", () => save(api, file));
  const close = Object.assign(document.createElement("button"), { type: "button", className: "icon-button close-lightbox" });
  close.innerHTML = icon("close");
  close.setAttribute("aria-label", "Close image");
  close.addEventListener("click", () => dialog.close());
  bar.append(name, download, close);
  dialog.append(bar, image);
  dialog.addEventListener("close", () => { if (image.src) URL.revokeObjectURL(image.src); dialog.remove(); });
  dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); });
  document.body.append(dialog);
  dialog.showModal();
  close.focus();
  // HEIC shows as its thumbnail: browsers other than Safari cannot draw HEIC.
  const url = file.type === "heic" && file.thumbnailUrl ? file.thumbnailUrl : file.url;
  image.src = await api.mediaURL(url).catch(() => "");
}



/**
 * A conversation's messages as bubbles. `perspective` is the side whose messages are "out"
 * (right, accent colour): "consumer" in the widget, "agent" in the workspace.
 */
export class Timeline {
  /** `nameOf(message)`: the name to show over a group of messages (with initials), or null for none. */
  constructor(element, { perspective, api, nameOf = () => null, onRetryDelivery = null }) {
    this.onRetryDelivery = onRetryDelivery;
    this.element = element;
    this.perspective = perspective;
    this.api = api;
    this.nameOf = nameOf;
    this.rows = new Map();  // message id or pending client id -> { message, element }
    this.receipts = {};  // actor kind -> { delivered: up to seq, read: up to seq }
  }

  clear() {
    this.rows.clear();
    this.receipts = {};
    this.element.replaceChildren();
  }

  /** Mine: the consumer's own messages in the widget; in the workspace the brand's, agents' and automatic. */
  isOut(message) {
    return message.senderKind === this.perspective || (this.perspective === "agent" && message.senderKind === "system");
  }

  /** Adds or updates a stored message; it replaces its pending twin (same client message id). */
  upsert(stored) {
    const message = this.withReceipts(stored);
    const pendingKey = `pending:${message.clientMessageId}`;
    const pending = this.rows.get(pendingKey);
    if (pending && this.isOut(message)) {
      this.rows.delete(pendingKey);
      pending.element.remove();
    }
    const existing = this.rows.get(message.id);
    if (existing) {
      // A transcript arrives with the note's own event; the player keeps playing through it.
      const known = existing.message.deliveryState;
      const channel = existing.message.channelDelivery;
      const voice = existing.message.voice;
      existing.message = { ...existing.message, ...message };
      // A late copy (the history read before the note's renditions were done, answered after its
      // voice_processed event) never takes a ready note back to processing: it would show
      // "Processing…" for good, as no event follows.
      if (voice?.state === "ready" && message.voice?.state === "processing") existing.message.voice = voice;
      const voiceChanged = existing.message.voice && voice?.state !== existing.message.voice.state;
      // Copies cross (an HTTP answer after the real-time event): the later channel delivery wins.
      if (channel && message.channelDelivery && new Date(channel.updatedAt) > new Date(message.channelDelivery.updatedAt)) {
        existing.message.channelDelivery = channel;
      }
      // A late copy (an HTTP answer, a replay) never takes a message back from read to sent.
      if ((deliveryRank[known] ?? -1) > (deliveryRank[message.deliveryState] ?? -1)) existing.message.deliveryState = known;
      this.fill(existing.element, existing.message, { voiceChanged });
      this.groups();
      return;
    }
    const element = document.createElement("div");
    this.rows.set(message.id, { message, element });
    this.fill(element, message, { voiceChanged: true });
    this.place(element, message);
  }

  /** A call's record, from a `call` event: a centred row at the call's place in the timeline. */
  callRecord(event) {
    const call = event.call;
    if (!call) return;
    const key = `call:${call.id}`;
    let row = this.rows.get(key);
    if (!row) {
      row = { element: document.createElement("div"), message: { seq: event.seq, callId: call.id } };
      this.rows.set(key, row);
    }
    const element = row.element;
    element.className = "row call-row";
    element.dataset.seq = event.seq;
    element.dataset.time = call.endedAt ?? event.createdAt;
    element.dataset.kind = "call";
    const { title, detail } = describeCall(call, this.perspective);
    const pill = document.createElement("div");
    pill.className = "call-record";
    pill.dataset.outcome = call.outcome;
    pill.innerHTML = icon(call.media === "video" ? "video" : "phone");
    pill.append(text(title));
    const when = Object.assign(document.createElement("span"), { className: "when", textContent: timeFormat.format(new Date(call.invitedAt)) });
    pill.append(when);
    element.replaceChildren(pill);
    if (detail) {
      const meta = document.createElement("div");
      meta.className = "meta";
      meta.append(text(detail));
      element.append(meta);
    }
    if (!element.isConnected) this.place(element, { seq: event.seq });
  }

  /** An agent's private note (a `note` event): agents only, set apart from the conversation. */
  note(event, authorName) {
    const key = `note:${event.seq}`;
    let row = this.rows.get(key);
    if (!row) {
      row = { element: document.createElement("div"), message: { seq: event.seq } };
      this.rows.set(key, row);
    }
    const element = row.element;
    element.className = "row note-row";
    element.dataset.seq = event.seq;
    element.dataset.time = event.createdAt;
    element.dataset.kind = "note";
    const note = document.createElement("div");
    note.className = "note";
    const head = document.createElement("div");
    head.className = "note-head";
    head.innerHTML = icon("lock");
    head.append(text(`Private note · ${authorName}`), Object.assign(document.createElement("span"), {
      className: "when", textContent: timeFormat.format(new Date(event.createdAt)) }));
    note.append(head, linkedText(event.text));
    element.replaceChildren(note);
    if (!element.isConnected) this.place(element, { seq: event.seq });
  }

  /** A system line (assigned, resolved, reopened) at its place in the timeline. */
  system(event, line) {
    const key = `system:${event.seq}`;
    let row = this.rows.get(key);
    if (!row) {
      row = { element: document.createElement("div"), message: { seq: event.seq } };
      this.rows.set(key, row);
    }
    const element = row.element;
    element.className = "row system";
    element.dataset.seq = event.seq;
    element.dataset.time = event.createdAt;
    element.dataset.kind = "system";
    element.replaceChildren(text(line), Object.assign(document.createElement("span"), {
      className: "when", textContent: ` · ${timeFormat.format(new Date(event.createdAt))}` }));
    if (!element.isConnected) this.place(element, { seq: event.seq });
  }

  /** Any row of the page's own (the widget's rating card) at a sequence number, keyed to replace it later. */
  custom(key, seq, node) {
    const existing = this.rows.get(key);
    if (existing) existing.element.remove();
    node.dataset.seq = seq;
    this.rows.set(key, { element: node, message: { seq } });
    this.place(node, { seq });
  }

  /**
   * A closed conversation's rows become the record above a new conversation's (whose sequence
   * numbers start again at 1): they move into one block that sorts first, and only the new
   * conversation's rows are live. Rows still being sent stay live.
   */
  archive() {
    const block = Object.assign(document.createElement("div"), { className: "earlier" });
    block.dataset.seq = "0";
    const moved = [...this.element.children].filter((child) => !child.classList.contains("pending"));
    if (!moved.length) return;
    block.append(...moved);
    this.element.prepend(block);
    for (const key of [...this.rows.keys()]) if (!key.startsWith("pending:")) this.rows.delete(key);
    this.receipts = {};
  }

  /** Scrolls to a message and marks it for a moment (a search hit). */
  highlight(messageId) {
    const row = this.rows.get(messageId);
    if (!row) return;
    row.element.classList.add("highlight");
    row.element.scrollIntoView({ block: "center" });
    setTimeout(() => row.element.classList.remove("highlight"), 4000);
  }

  /** A message being sent or uploaded; `state` is sending, uploading or failed. */
  pending({ clientMessageId, kind, text: body, durationMs, state, progress, error, onRetry }) {
    const key = `pending:${clientMessageId}`;
    let row = this.rows.get(key);
    if (!row) {
      row = { element: document.createElement("div"), message: {} };
      this.rows.set(key, row);
      this.element.append(row.element);
    }
    row.message = { clientMessageId, kind, text: body, durationMs, pendingState: state };
    const element = row.element;
    element.className = "row out pending";
    element.dataset.state = state;
    const bubble = document.createElement("div");
    bubble.className = "bubble";
    if (kind === "voice") {
      bubble.append(text(`Voice message ${clock(durationMs)}`));
    } else if (kind === "attachment") {
      bubble.classList.add("file-pending");
      bubble.insertAdjacentHTML("afterbegin", icon("paperclip"));
      bubble.append(text(body));
    } else {
      bubble.append(text(body));
    }
    const meta = document.createElement("div");
    meta.className = "meta";
    if (state === "failed") {
      const reason = document.createElement("span");
      reason.className = "failed";
      reason.textContent = error || "Not sent";
      const retry = document.createElement("button");
      retry.type = "button";
      retry.className = "retry";
      retry.textContent = "Retry";
      retry.onclick = onRetry;
      meta.append(reason, retry);
    } else {
      meta.append(text(state === "uploading" ? `Uploading ${Math.round((progress ?? 0) * 100)}%`
        : state === "queued" ? "Waiting for the connection…" : "Sending…"));
    }
    element.replaceChildren(bubble, meta);
    this.scroll();
  }

  dropPending(clientMessageId) {
    const key = `pending:${clientMessageId}`;
    this.rows.get(key)?.element.remove();
    this.rows.delete(key);
  }

  /**
   * A message with the receipts already seen applied: a receipt can arrive before the sender's own
   * copy of the message does (the other side is quick, the sender's answer is late).
   */
  withReceipts(message) {
    let state = message.deliveryState;
    for (const [actor, upTo] of Object.entries(this.receipts)) {
      if (actor === message.senderKind) continue;
      for (const candidate of ["delivered", "read"]) {
        if ((upTo[candidate] ?? 0) >= message.seq && deliveryRank[candidate] > (deliveryRank[state] ?? -1)) state = candidate;
      }
    }
    return state === message.deliveryState ? message : { ...message, deliveryState: state };
  }

  /** Every message of `senderKind` up to `upToSeq` is now at least `state`. */
  receipt({ actorKind, upToSeq, deliveryState }) {
    const seen = (this.receipts[actorKind] ??= {});
    seen[deliveryState] = Math.max(seen[deliveryState] ?? 0, upToSeq);
    for (const row of this.rows.values()) {
      const message = row.message;
      if (!message.id || message.senderKind === actorKind || message.seq > upToSeq) continue;
      if (deliveryRank[deliveryState] > deliveryRank[message.deliveryState]) {
        message.deliveryState = deliveryState;
        this.fill(row.element, message, { voiceChanged: false });
      }
    }
  }

  place(element, message) {
    const later = [...this.element.children].find((child) => Number(child.dataset.seq) > message.seq || child.classList.contains("pending"));
    this.element.insertBefore(element, later ?? null);
    this.days();
    this.groups();
    this.scroll();
  }

  /**
   * Consecutive messages of one sender, less than five minutes apart, form a group: the first
   * carries the sender's name and initials (where the page names them), the last the time.
   */
  groups() {
    let previous = null;
    for (const child of this.element.children) {
      const row = child.dataset.id ? this.rows.get(child.dataset.id) : null;
      if (!row || !row.message.senderKind) { if (previous) previous.element.classList.add("group-end"); previous = null; continue; }
      const message = row.message;
      const joins = previous && previous.message.senderKind === message.senderKind && previous.message.senderId === message.senderId
        && new Date(message.createdAt) - new Date(previous.message.createdAt) < groupGapMs;
      if (previous) previous.element.classList.toggle("group-end", !joins);
      child.classList.toggle("group-start", !joins);
      const name = joins ? null : this.nameOf(message);
      let sender = child.querySelector(":scope > .sender");
      if (name) {
        if (!sender) { sender = Object.assign(document.createElement("div"), { className: "sender" }); child.prepend(sender); }
        const avatar = Object.assign(document.createElement("span"), { className: "avatar", textContent: initials(name) });
        avatar.setAttribute("aria-hidden", "true");
        sender.replaceChildren(avatar, text(name));
      } else {
        sender?.remove();
      }
      previous = row;
    }
    if (previous) previous.element.classList.add("group-end");
  }

  /** Day separators between messages of different days. */
  days() {
    for (const separator of this.element.querySelectorAll(":scope > .day")) separator.remove();
    let last = "";
    for (const child of [...this.element.children]) {
      if (!child.dataset.time) continue;
      const day = dayFormat.format(new Date(child.dataset.time));
      if (day !== last) {
        const separator = document.createElement("div");
        separator.className = "day";
        separator.textContent = day;
        child.before(separator);
        last = day;
      }
    }
  }

  fill(element, message, { voiceChanged }) {
    const out = this.isOut(message);
    element.classList.remove("in", "out", "pending");
    element.classList.add("row", out ? "out" : "in");
    element.dataset.id = message.id;
    element.dataset.seq = message.seq;
    element.dataset.time = message.createdAt;
    element.dataset.kind = message.kind;
    let bubble = element.querySelector(".bubble");
    if (!bubble) {
      bubble = document.createElement("div");
      bubble.className = "bubble";
      element.prepend(bubble);
    }
    const voice = message.voice;
    // A note the malware scan blocked, or one still waiting for its scan, is not playable by the
    // recipient: a notice takes the player's place.
    const withheld = voice && (voice.state === "blocked" || (voice.scan === "pending" && !out));
    if (message.kind === "voice" && withheld) {
      const notice = document.createElement("div");
      notice.className = "voice-withheld";
      notice.dataset.scan = voice.scan;
      notice.innerHTML = icon("shield");
      notice.append(text(voice.state === "blocked"
        ? (out ? "Blocked by the malware scan: this voice message was not delivered." : "A voice message was blocked by the malware scan.")
        : `Voice message ${clock(voice.durationMs)} · waiting for the malware scan`));
      bubble.replaceChildren(notice);
    } else if (message.kind === "voice" && message.voice) {
      let player = bubble.querySelector("parley-voice");
      if (!player) {
        player = document.createElement("parley-voice");
        player.api = this.api;
        bubble.replaceChildren(player);
        voiceChanged = true;
      }
      if (voiceChanged && (!player.audio || player.audio.paused)) {
        player.audio = undefined;
        player.voice = message.voice;
      }
      this.transcript(bubble, message.voice.transcript);
    } else if (message.kind === "attachment" && message.attachment) {
      if (!bubble.querySelector(".attachment")) bubble.replaceChildren(this.attachmentView(message));
    } else {
      bubble.replaceChildren(linkedText(message.text));
    }
    let meta = element.querySelector(".meta");
    if (!meta) {
      meta = document.createElement("div");
      meta.className = "meta";
      element.append(meta);
    }
    const stamp = text(timeFormat.format(new Date(message.createdAt)));
    stamp.className = "stamp";
    const parts = [stamp];
    if (voice?.scan === "pending" && out) parts.push(text("Waiting for the malware scan…"));
    else if (message.kind === "voice" && voice?.state === "processing" && voice?.scan !== "pending") parts.push(text("Processing…"));
    // Scan state is for agents: a consumer is never shown anything alarming about a note.
    if (voice?.scan === "unscanned" && !out && this.perspective === "agent") {
      const flag = Object.assign(document.createElement("span"), { className: "unscanned", textContent: "Not scanned for malware" });
      parts.push(flag);
    }
    // On a messaging channel (WhatsApp...): on its way to the provider, or refused by it.
    const channel = message.channelDelivery;
    element.classList.toggle("delivery-failed", channel?.state === "failed");
    if (out && channel?.state === "queued") {
      parts.push(Object.assign(document.createElement("span"), { className: "sending", textContent: "Sending…" }));
    } else if (out && channel?.state === "failed") {
      const reason = Object.assign(document.createElement("span"), { className: "failed", textContent: channel.errorMessage || "Not delivered" });
      if (channel.errorCode) reason.title = `Error ${channel.errorCode}`;
      parts.push(reason);
      if (channel.retryable && this.onRetryDelivery) {
        const retry = Object.assign(document.createElement("button"), { type: "button", className: "retry", textContent: "Retry" });
        retry.addEventListener("click", () => { retry.disabled = true; this.onRetryDelivery(message); });
        parts.push(retry);
      }
    } else if (out && voice?.state !== "blocked") {  // a blocked note was never delivered: no delivery marks
      const mark = document.createElement("span");
      mark.className = "delivery";
      mark.dataset.state = message.deliveryState;
      mark.innerHTML = icon(message.deliveryState === "sent" ? "check" : "checks");
      mark.style.color = message.deliveryState === "read" ? "var(--accent)" : "";
      mark.append(Object.assign(document.createElement("span"), { className: "sr-only", textContent: message.deliveryState }));
      parts.push(mark);
    }
    meta.replaceChildren(...parts);
  }

  /**
   * A voice note's transcript under its player: two lines, "Show more" when there is more; what
   * it is while there is none yet, or none at all. A guess (music, noise) says so.
   */
  transcript(bubble, transcript) {
    let view = bubble.querySelector(".transcript");
    if (!transcript) { view?.remove(); return; }
    if (!view) {
      view = document.createElement("div");
      view.className = "transcript";
      bubble.append(view);
    }
    const key = `${transcript.state}|${transcript.lowConfidence}|${transcript.text}`;
    if (view.dataset.key === key) return;
    view.dataset.key = key;
    view.dataset.state = transcript.state;
    const words = transcript.text?.trim();
    if (transcript.state !== "ready" || !words) {
      const status = transcript.state === "pending" ? "Transcribing…"
        : transcript.state === "unavailable" ? "Transcript unavailable" : "No speech recognised";
      view.replaceChildren(Object.assign(document.createElement("span"), { className: "transcript-status", textContent: status }));
      return;
    }
    const body = Object.assign(document.createElement("p"), { className: "transcript-text", textContent: words });
    if (transcript.lowConfidence) body.prepend(Object.assign(document.createElement("span"), { className: "transcript-guess", textContent: "Unclear audio · " }));
    const more = Object.assign(document.createElement("button"), { type: "button", className: "transcript-more", textContent: "Show more", hidden: true });
    more.setAttribute("aria-expanded", "false");
    more.addEventListener("click", () => {
      const open = view.classList.toggle("open");
      more.textContent = open ? "Show less" : "Show more";
      more.setAttribute("aria-expanded", String(open));
    });
    view.classList.remove("open");
    view.replaceChildren(body, more);
    // Only a transcript longer than its two lines offers more (measured once it is laid out).
    requestAnimationFrame(() => { more.hidden = body.scrollHeight <= body.clientHeight + 1; });
  }

  /** An image (its thumbnail, opening full size) or a file (name, size, download). */
  attachmentView(message) {
    const file = message.attachment;
    const api = this.api;
    if (isImage(file)) {
      const button = Object.assign(document.createElement("button"), { type: "button", className: "attachment image" });
      button.setAttribute("aria-label", `Image${file.fileName ? `: ${file.fileName}` : ""}. Open full size`);
      const image = document.createElement("img");
      image.alt = "";
      if (file.width && file.height) {
        const width = Math.min(260, file.width);
        image.width = width;
        image.height = Math.round((width * file.height) / file.width);
      }
      api.mediaURL(file.thumbnailUrl ?? file.url).then((url) => { image.src = url; }).catch(() => { button.classList.add("broken"); });
      button.append(image);
      button.addEventListener("click", () => openLightbox(api, file));
      return button;
    }
    const card = Object.assign(document.createElement("div"), { className: "attachment file" });
    card.insertAdjacentHTML("afterbegin", icon("file"));
    const about = Object.assign(document.createElement("div"), { className: "about" });
    about.append(Object.assign(document.createElement("strong"), { textContent: file.fileName }),
      Object.assign(document.createElement("span"), { textContent: `${fileKind(file)} · ${fileSize(file.bytes)}` }));
    const download = Object.assign(document.createElement("button"), { type: "button", className: "icon-button download" });
    download.innerHTML = icon("download");
    download.setAttribute("aria-label", `Download ${file.fileName}`);
    download.addEventListener("click", () => save(api, file));
    card.append(about, download);
    return card;
  }

  lastSeq() {
    let seq = 0;
    for (const { message } of this.rows.values()) if (message.seq > seq) seq = message.seq;
    return seq;
  }

  /** Highest sequence of a message from the other side, for read receipts. */
  lastIncomingSeq() {
    let seq = 0;
    for (const { message } of this.rows.values()) if (message.id && message.seq > seq && !this.isOut(message)) seq = message.seq;
    return seq;
  }

  scroll() {
    this.element.scrollTop = this.element.scrollHeight;
  }
}
