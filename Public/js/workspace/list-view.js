// The conversation list: the filters with their counts, the rows, and search results in its place
// while the search box holds a query. Reads the store; says what the agent chose through `onOpen`
// and `onFilter`.
import { icon, text } from "../icons.js";
import { channelNames, dateFormat, timeFormat } from "./format.js";

export class ListView {
  constructor({ root, store, onOpen, onFilter }) {
    this.root = root;
    this.store = store;
    this.onOpen = onOpen;
    this.list = root.querySelector(".conversations");
    this.tabs = [...root.querySelectorAll(".filters button")];
    for (const tab of this.tabs) {
      tab.addEventListener("click", () => {
        for (const other of this.tabs) other.setAttribute("aria-selected", String(other === tab));
        onFilter(tab.dataset.filter);
      });
    }
  }

  /** Counts on the Open, Mine and Unassigned filters, and unread messages in the tab's title. */
  renderCounts() {
    const counts = this.store.counts();
    for (const tab of this.tabs) {
      const count = counts[tab.dataset.filter];
      if (count === undefined) continue;
      let badge = tab.querySelector(".count");
      if (!badge) { badge = Object.assign(document.createElement("span"), { className: "count" }); tab.append(badge); }
      badge.textContent = String(count);
      badge.setAttribute("aria-label", `${count} conversation${count === 1 ? "" : "s"}`);
    }
    const unread = this.store.unreadTotal();
    document.title = unread ? `(${unread}) ${this.store.title}` : this.store.title;
  }

  async render() {
    const store = this.store;
    const rows = await Promise.all(store.visibleConversations().map(async (conversation) => {
      const person = await store.consumer(conversation.consumerId);
      const item = document.createElement("li");
      const button = document.createElement("button");
      button.type = "button";
      button.dataset.id = conversation.id;
      if (store.current?.id === conversation.id) button.setAttribute("aria-current", "true");
      const who = Object.assign(document.createElement("span"), { className: "who", textContent: person.displayName });
      const when = Object.assign(document.createElement("span"), {
        className: "when", textContent: conversation.lastMessageAt ? timeFormat.format(new Date(conversation.lastMessageAt)) : "" });
      const preview = Object.assign(document.createElement("span"), { className: "preview" });
      if (conversation.lastMessageKind === "voice") preview.insertAdjacentHTML("afterbegin", icon("mic"));
      if (conversation.lastMessageKind === "attachment") preview.insertAdjacentHTML("afterbegin", icon("paperclip"));
      preview.append(text(conversation.lastMessagePreview ?? ""));
      const tags = Object.assign(document.createElement("span"), { className: "tags" });
      tags.append(tag(channelNames[conversation.channel] ?? conversation.channel));
      if (conversation.state === "reopened") tags.append(tag("reopened"));
      if (conversation.assigneeId === store.me.id) tags.append(tag("mine"));
      const unread = store.unread.get(conversation.id);
      if (unread) {
        const badge = tag(String(unread), "tag unread");
        badge.setAttribute("aria-label", `${unread} unread`);
        tags.append(badge);
      }
      button.append(who, when, preview, tags);
      button.onclick = () => this.onOpen(conversation.id);
      item.append(button);
      return item;
    }));
    this.list.replaceChildren(...rows);
  }

  /** The conversation before or after the open one, in the list as it is shown. */
  neighbour(direction) {
    const buttons = [...this.list.querySelectorAll("li button")];
    if (!buttons.length) return null;
    const index = buttons.findIndex((button) => button.dataset.id === this.store.current?.id);
    return buttons[index < 0 ? 0 : Math.min(buttons.length - 1, Math.max(0, index + direction))];
  }
}

function tag(label, className = "tag") {
  return Object.assign(document.createElement("span"), { className, textContent: label });
}

/** Results replace the list while the box holds a query: matches in message text, then names. */
export class SearchView {
  constructor({ form, input, pane, results, summary, api, onOpen }) {
    Object.assign(this, { form, input, pane, results, summary, api, onOpen });
    this.serial = 0;
    this.timer = null;
    input.addEventListener("input", () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.search(), 200);
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") { input.value = ""; this.search(); input.blur(); }
      if (event.key === "ArrowDown") { event.preventDefault(); results.querySelector(".results button")?.focus(); }
    });
    form.addEventListener("submit", (event) => { event.preventDefault(); clearTimeout(this.timer); this.search(); });
  }

  async search() {
    const query = this.input.value.trim();
    const serial = ++this.serial;
    const showing = query.length > 0;
    this.results.hidden = !showing;
    this.pane.classList.toggle("searching", showing);
    if (!showing) return;
    const list = this.results.querySelector(".results");
    let hits;
    try {
      hits = (await this.api.get(`/v1/search?q=${encodeURIComponent(query)}&limit=30`)).items;
    } catch (failure) {
      if (serial !== this.serial) return;
      this.summary.textContent = failure.message;
      list.replaceChildren();
      return;
    }
    if (serial !== this.serial) return;  // a newer query is on its way
    this.summary.textContent = hits.length ? `${hits.length} conversation${hits.length === 1 ? "" : "s"}` : `Nothing matches “${query}”.`;
    list.replaceChildren(...hits.map((hit) => {
      const item = document.createElement("li");
      const button = Object.assign(document.createElement("button"), { type: "button" });
      const who = Object.assign(document.createElement("span"), { className: "who", textContent: hit.consumerName });
      const when = Object.assign(document.createElement("span"), {
        className: "when", textContent: dateFormat.format(new Date(hit.message?.createdAt ?? hit.conversation.updatedAt)) });
      const snippet = Object.assign(document.createElement("span"), { className: "preview" });
      snippet.append(hit.message ? highlighted(hit.message.text, query) : text(hit.conversation.lastMessagePreview ?? ""));
      // Found in what a voice note said (its transcript): marked as spoken.
      if (hit.message?.kind === "voice") {
        snippet.insertAdjacentHTML("afterbegin", icon("mic"));
        snippet.prepend(Object.assign(document.createElement("span"), { className: "sr-only", textContent: "Said in a voice message: " }));
      }
      const tags = Object.assign(document.createElement("span"), { className: "tags" });
      tags.append(tag(hit.conversation.state));
      button.append(who, when, snippet, tags);
      button.addEventListener("click", () => this.onOpen(hit.conversation.id, { highlight: hit.message?.id }));
      item.append(button);
      return item;
    }));
  }
}

/** The text around the first matched word, with the words that match marked. */
export function highlighted(value, query) {
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
