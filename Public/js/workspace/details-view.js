// The conversation's details pane and what its header and composer allow: the customer, the
// channel's rules (the reply window), the call buttons, the customer's other conversations.
import { CallSession } from "../call-session.js";
import { initials } from "../icons.js";
import { browserName, channelNames, dateFormat, timeLeft } from "./format.js";

const $ = (selector) => document.querySelector(selector);

export class DetailsView {
  /**
   * `composeMode()`: "reply" or "note"; `calls()`: the call session once there is one;
   * `onOpenPast(id, options)`: the agent opened one of the customer's other conversations.
   */
  constructor({ store, recordsActions, composeMode, calls, onOpenPast }) {
    Object.assign(this, { store, recordsActions, composeMode, calls, onOpenPast });
    this.windowTimer = null;
  }

  /** Below 1000 px the details are a panel over the conversation, opened from its header. */
  showPanel(open) {
    $(".workspace").classList.toggle("details-open", open);
    $(".details-toggle").setAttribute("aria-expanded", String(open));
    if (open) $(".details-close").focus();
  }

  render(conversation, person) {
    const store = this.store;
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
    store.appName(conversation.appId).then((name) => { if (store.current?.id === conversation.id) $(".d-app").textContent = name; });
    this.recordsActions.show(conversation, store.me);
    for (const link of document.querySelectorAll(".d-transcript")) {
      link.href = `/v1/conversations/${conversation.id}/transcript?format=${link.dataset.format}`;
      link.setAttribute("aria-label", `Download the transcript as ${link.textContent}`);
    }
    const stars = conversation.rating ? ` · rated ${"★".repeat(conversation.rating.score)}${"☆".repeat(5 - conversation.rating.score)}` : "";
    $(".d-state").textContent = conversation.state + stars;
    $(".d-state").title = conversation.rating?.comment ?? "";
    const assignee = conversation.assigneeId;
    $(".d-assignee").textContent = !assignee ? "Nobody" : assignee === store.me.id ? "You" : (store.team.get(assignee)?.name ?? "Another agent");
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
    $(".assign").hidden = conversation.assigneeId === store.me.id;
    $(".transfer").hidden = conversation.state === "resolved" || !store.isManager;
    // A waiting conversation (nobody has it) can be moved to the front of the queue by a manager.
    $(".prioritise").hidden = conversation.state === "resolved" || Boolean(conversation.assigneeId) || !store.isManager;
    $(".prioritise").textContent = "Put first in line";
    const resolved = conversation.state === "resolved";
    $(".resolve").textContent = resolved ? "Reopen" : "Resolve";
    // A resolved conversation takes no replies until it is reopened.
    const reply = $("#reply");
    reply.disabled = resolved;
    reply.placeholder = resolved ? "Resolved: reopen to reply" : this.composeMode() === "note" ? "Private note: only agents see this" : "Reply… (/ for saved replies)";
    $(".send-text").disabled = resolved;
    $(".composer .attach")?.toggleAttribute("disabled", resolved);
    $("parley-recorder").hidden = resolved || !store.mayRecordVoice;
    this.renderWindow(conversation);
    this.renderCallButtons(conversation);
  }

  /**
   * What the conversation's channel allows (from GET /v1/channels): voice and files where the
   * channel carries them, and on WhatsApp the 24-hour window: how long is left, and once it has
   * closed, a template instead of the text box and the microphone.
   */
  renderWindow(conversation) {
    const store = this.store;
    const rules = store.channelRules.get(conversation.channel);
    const banner = $(".window-banner");
    clearTimeout(this.windowTimer);
    if (!rules) { banner.hidden = true; return; }
    if (!rules.voiceFromAgent) $("parley-recorder").hidden = true;
    if (!rules.attachmentsFromAgent) $(".composer .attach").hidden = true;
    const end = conversation.replyWindowEndsAt ? new Date(conversation.replyWindowEndsAt) : null;
    if (!rules.replyWindowHours || !end || conversation.state === "resolved" || store.readOnly) { banner.hidden = true; return; }
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
      $(".window-text").textContent = `${name} reply window: ${timeLeft(left)} left`;
      this.windowTimer = setTimeout(() => store.current?.id === conversation.id && this.render(store.current, store.currentPerson), 60_000);
    }
    $(".send-template").hidden = !closed || !rules.templates;
    const reply = $("#reply");
    if (closed && this.composeMode() === "reply") {
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

  /** The customer's other conversations, newest first; each opens read-only. */
  async renderPast(conversation) {
    const store = this.store;
    const list = $(".past");
    const page = await store.api.get(`/v1/conversations?consumer=${conversation.consumerId}&limit=20`).catch(() => ({ items: [] }));
    if (store.current?.id !== conversation.id) return;
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
      button.addEventListener("click", () => this.onOpenPast(other.id, { readOnly: other.state === "resolved" }));
      item.append(button);
      return item;
    }));
  }

  /** Call buttons show only for the kinds of call the agent's profile allows, on channels that carry calls. */
  renderCallButtons(conversation) {
    const store = this.store;
    const channelCalls = store.channelRules.get(conversation.channel)?.calls ?? false;
    const hint = $(".call-hint");
    let reason = "";
    if (!CallSession.supported) reason = CallSession.unsupportedReason;
    else if (conversation.state === "resolved") reason = "Reopen to call";
    for (const button of document.querySelectorAll(".start-call")) {
      const permission = button.dataset.media === "video" ? "initiate_video_call" : "initiate_voice_call";
      button.hidden = !channelCalls || !store.me.permissions.includes(permission);
      button.disabled = Boolean(reason) || Boolean(this.calls()?.busy);
    }
    // Co-browse: web conversations (the widget runs on the brand's page), with the permission and
    // the brand's switch.
    const cobrowse = $(".start-cobrowse");
    cobrowse.hidden = conversation.channel !== "web" || !store.me.permissions.includes("cobrowse") || store.settings?.cobrowseEnabled === false;
    cobrowse.disabled = conversation.state === "resolved";
    const anyButton = [...document.querySelectorAll(".start-call")].some((button) => !button.hidden);
    hint.hidden = !anyButton || !reason;
    hint.textContent = reason;
  }
}
