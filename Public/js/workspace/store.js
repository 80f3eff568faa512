// The workspace's model: what the agent's page knows (who is signed in, the brand's settings, the
// conversations, their customers, unread counts, the team) and the requests that fill it. No DOM
// here: the views read it, the controller (workspace.js) changes it.
import { ApiError } from "../api.js";
import { clock, isImage } from "../icons.js";

/** The list's filters, as the API's query. */
export const filters = {
  open: "state=open,reopened",
  mine: "state=open,reopened&assignee=me",
  unassigned: "state=open,reopened&assignee=unassigned",
  resolved: "state=resolved",
};

/** Newest message first: reading, assigning or a receipt does not move a conversation. */
export function byLastMessage(a, b) {
  return (b.lastMessageAt ?? b.createdAt).localeCompare(a.lastMessageAt ?? a.createdAt) || b.id.localeCompare(a.id);
}

/**
 * A message's line in the conversation list. The server words it too (`lastMessagePreview`, from
 * MessageRules, VoiceRules and AttachmentRules) and this must say the same, or a row would change
 * when the page reloads; a message frame does not carry the server's line (docs/architecture.md,
 * "The workspace").
 */
export function previewOf(message) {
  if (message.kind === "attachment") return isImage(message.attachment) ? "Image" : `File: ${message.attachment?.fileName ?? ""}`;
  if (message.kind !== "voice") return textPreview(message.text);
  if (message.voice?.state === "blocked") return "Audio message blocked";
  const line = `Audio message ${clock(message.voice?.durationMs ?? 0)}`;
  // VoiceRules.preview(durationMs:transcript:): the words after the length, cut like a text.
  const transcript = message.voice?.transcript;
  return transcript?.state === "ready" && transcript.text ? textPreview(`${line} · ${transcript.text}`) : line;
}

const characters = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/** MessageRules.preview(of:): the lines joined by one space (blank ones dropped), 120 characters at most, "…" when cut. */
export function textPreview(text, limit = 120) {
  const oneLine = text.split(/[\n\r\v\f\u0085\u2028\u2029]+/).filter(Boolean).join(" ");
  const graphemes = [...characters.segment(oneLine)].map((part) => part.segment);
  return graphemes.length <= limit ? oneLine : graphemes.slice(0, limit - 1).join("") + "…";
}

export class WorkspaceStore {
  constructor(api) {
    this.api = api;
    /** The agent signed in (GET /v1/me), their brand's settings, and each channel's rules. */
    this.me = null;
    this.settings = null;
    this.channelRules = new Map();
    this.title = "Parley";
    /** The list as the chosen filter shows it, by id. */
    this.filter = "open";
    this.conversations = new Map();
    /** Every open conversation (the filters' counts), by id. */
    this.open = new Map();
    /** Customers by id, each a promise (fetched once, shared by everyone who asks). */
    this.consumers = new Map();
    /** Customer messages the agent has not seen, by conversation id. */
    this.unread = new Map();
    /** The team's presence, by agent id. */
    this.team = new Map();
    /** The conversation shown, its customer, whether it is shown read-only and the one to go back to. */
    this.current = null;
    this.currentPerson = null;
    this.readOnly = false;
    this.readOnlyReturn = null;
    this.teamLoaded = null;
    this.appNames = null;
  }

  /** Who is signed in; null when nobody is (401). */
  async signIn() {
    try {
      this.me = await this.api.get("/v1/me");
      return this.me;
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) return null;
      throw error;
    }
  }

  /** The brand, its settings and its channels' rules. */
  async loadBrand() {
    const [brand, settings, channels] = await Promise.all([
      this.api.get("/v1/brand"), this.api.get("/v1/brand/settings"), this.api.get("/v1/channels"),
    ]);
    this.settings = settings;
    this.channelRules = new Map(channels.items.map((rules) => [rules.channel, rules]));
    this.title = `${brand.name} · Parley`;
    return brand;
  }

  /** The conversations the filter shows, and their customers. */
  async loadList() {
    const page = await this.api.get(`/v1/conversations?${filters[this.filter]}&limit=100`);
    this.conversations = new Map(page.items.map((conversation) => [conversation.id, conversation]));
    await Promise.all(page.items.map((conversation) => this.consumer(conversation.consumerId)));
  }

  /** Every open conversation, for the counts on the filters (whichever filter is shown). */
  async loadOpen() {
    const page = await this.api.get(`/v1/conversations?${filters.open}&limit=200`);
    this.open = new Map(page.items.map((conversation) => [conversation.id, conversation]));
  }

  /** Every agent's presence. */
  async loadTeam() {
    const team = (await this.api.get("/v1/presence")).items;
    for (const member of team) this.team.set(member.agentId, member);
    return team;
  }

  consumer(id) {
    if (!this.consumers.has(id)) {
      this.consumers.set(id, this.api.get(`/v1/consumers/${id}`).catch(() => ({ displayName: "Customer" })));
    }
    return this.consumers.get(id);
  }

  /** Forgets a customer, so that the next `consumer(id)` reads them again (the page they are on changes). */
  forgetConsumer(id) {
    this.consumers.delete(id);
  }

  matchesFilter(conversation) {
    const open = conversation.state !== "resolved";
    switch (this.filter) {
      case "open": return open;
      case "mine": return open && conversation.assigneeId === this.me.id;
      case "unassigned": return open && !conversation.assigneeId;
      case "resolved": return !open;
    }
    return false;
  }

  /** The list as it is shown: the filter's conversations, newest message first. */
  visibleConversations() {
    return [...this.conversations.values()].filter((conversation) => this.matchesFilter(conversation)).sort(byLastMessage);
  }

  /** The counts on the Open, Mine and Unassigned filters. */
  counts() {
    const open = [...this.open.values()];
    return {
      open: open.length,
      mine: open.filter((conversation) => conversation.assigneeId === this.me.id).length,
      unassigned: open.filter((conversation) => !conversation.assigneeId).length,
    };
  }

  unreadTotal() {
    return [...this.unread.values()].reduce((sum, count) => sum + count, 0);
  }

  countUnread(conversationId) {
    this.unread.set(conversationId, (this.unread.get(conversationId) ?? 0) + 1);
  }

  /**
   * Takes a newer state of a conversation; false (and nothing changes) when the one known is newer.
   * The conversation shown follows it.
   */
  update(conversation) {
    const known = this.conversations.get(conversation.id);
    if (known && known.lastSeq > conversation.lastSeq) return false;
    this.conversations.set(conversation.id, conversation);
    if (conversation.state === "resolved") this.open.delete(conversation.id); else this.open.set(conversation.id, conversation);
    if (this.current?.id === conversation.id) this.current = conversation;
    return true;
  }

  /**
   * The conversation as a message that arrived in it leaves it: its last message, time and list
   * line. Null when the list does not know the conversation (the caller fetches it).
   */
  withMessage(message) {
    const known = this.conversations.get(message.conversationId);
    if (!known) return null;
    return {
      ...known, lastSeq: Math.max(known.lastSeq, message.seq), updatedAt: message.createdAt, lastMessageAt: message.createdAt,
      lastMessageKind: message.kind, lastMessagePreview: previewOf(message),
    };
  }

  /** Whether a customer's message in this conversation calls for a chime: a new conversation, or one of mine. */
  alertsFor(message, known) {
    if (message.senderKind !== "consumer") return false;
    return message.seq === 1 || known?.assigneeId === this.me.id;
  }

  /** The name to show for an agent id ("You" for me), from the team's presence (any agent may read it). */
  async agentName(id) {
    if (id === this.me.id) return "You";
    if (!this.team.has(id)) {
      this.teamLoaded ??= this.loadTeam().catch(() => {});
      await this.teamLoaded;
    }
    return this.team.get(id)?.name ?? "An agent";
  }

  /** The brand's apps by id (the web widget, the brand's own app...), fetched once. */
  async appName(id) {
    this.appNames ??= this.api.get("/v1/apps").then((page) => new Map(page.items.map((app) => [app.id, app.name]))).catch(() => new Map());
    return (await this.appNames).get(id) ?? "An app";
  }

  /** Whether the agent may record voice here: the brand allows it and their profile has send_audio. */
  get mayRecordVoice() {
    return Boolean(this.settings?.voiceFromAgents && this.me?.permissions.includes("send_audio"));
  }

  get isManager() {
    return ["manager", "admin"].includes(this.me?.role);
  }
}
