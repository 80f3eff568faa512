// Saved replies: in the composer, "/" at the start opens a list filtered by what follows it
// (shortcut or text); arrows move, Enter or Tab inserts, Escape closes. Admins keep the list in the
// account dialog.

import { AdminList } from "./admin-list.js";

export class ReplyPicker {
  constructor({ form, textarea, list, load, onInsert }) {
    Object.assign(this, { form, textarea, list, load, onInsert });
    this.replies = [];
    this.matches = [];
    this.active = 0;
    this.list.id ||= "reply-picker";
    textarea.setAttribute("aria-autocomplete", "list");
    textarea.setAttribute("aria-controls", this.list.id);
    textarea.addEventListener("input", () => this.update());
    textarea.addEventListener("blur", () => setTimeout(() => this.close(), 150));
    // Capture: the picker takes Enter, Tab, arrows and Escape before the composer sends.
    form.addEventListener("keydown", (event) => {
      if (this.list.hidden || event.target !== textarea) return;
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        if (!this.matches.length) return;
        this.active = (this.active + (event.key === "ArrowDown" ? 1 : this.matches.length - 1)) % this.matches.length;
        this.render();
      } else if ((event.key === "Enter" && !event.shiftKey) || event.key === "Tab") {
        if (!this.matches.length) return;
        this.insert(this.matches[this.active]);
      } else if (event.key === "Escape") {
        this.close();
      } else {
        return;
      }
      event.preventDefault();
      event.stopPropagation();
    }, true);
  }

  async refresh() {
    try { this.replies = await this.load(); } catch { this.replies = []; }
  }

  /** The query: the text after a "/" that starts the text box, while it is one word. */
  query() {
    const match = /^\/(\S*)$/.exec(this.textarea.value);
    return match ? match[1].toLowerCase() : null;
  }

  async update() {
    const query = this.query();
    if (query === null) return this.close();
    if (!this.loaded) { this.loaded = true; await this.refresh(); }
    this.matches = this.replies
      .filter((reply) => reply.shortcut.includes(query) || reply.text.toLowerCase().includes(query))
      .sort((a, b) => Number(!a.shortcut.startsWith(query)) - Number(!b.shortcut.startsWith(query)))
      .slice(0, 8);
    this.active = 0;
    this.list.hidden = false;
    this.textarea.setAttribute("aria-expanded", "true");
    this.render(query);
  }

  render(query = this.query() ?? "") {
    if (!this.matches.length) {
      const empty = document.createElement("li");
      empty.className = "empty";
      empty.textContent = this.replies.length ? `No saved reply matches “/${query}”` : "No saved replies yet. Admins add them under Account and team.";
      this.list.replaceChildren(empty);
      this.textarea.removeAttribute("aria-activedescendant");
      return;
    }
    this.list.replaceChildren(...this.matches.map((reply, index) => {
      const item = document.createElement("li");
      item.id = `reply-option-${index}`;
      item.setAttribute("role", "option");
      item.setAttribute("aria-selected", String(index === this.active));
      const shortcut = Object.assign(document.createElement("strong"), { textContent: `/${reply.shortcut}` });
      const preview = Object.assign(document.createElement("span"), { textContent: reply.text.split("\n").join(" ") });
      item.append(shortcut, preview);
      item.addEventListener("mousedown", (event) => { event.preventDefault(); this.insert(reply); });
      return item;
    }));
    this.textarea.setAttribute("aria-activedescendant", `reply-option-${this.active}`);
    this.list.querySelector('[aria-selected="true"]')?.scrollIntoView({ block: "nearest" });
  }

  insert(reply) {
    this.textarea.value = reply.text;
    this.close();
    this.textarea.focus();
    this.textarea.setSelectionRange(reply.text.length, reply.text.length);
    this.textarea.dispatchEvent(new Event("input"));
    this.onInsert?.(reply);
  }

  close() {
    if (this.list.hidden) return;
    this.list.hidden = true;
    this.textarea.setAttribute("aria-expanded", "false");
    this.textarea.removeAttribute("aria-activedescendant");
  }
}

/** The admin's list of saved replies: add, edit in place, delete. */
export class SavedRepliesAdmin extends AdminList {
  constructor({ section, api, onChange }) {
    super({ section, api, note: ".saved-note" });
    this.onChange = onChange;
    this.list = section.querySelector(".saved-list");
    this.form = section.querySelector(".saved-form");
    this.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(this.form);
      await this.request(async () => {
        await this.api.post("/v1/saved-replies", { shortcut: data.get("shortcut").trim(), text: data.get("text") });
        this.form.reset();
      }, `Saved /${data.get("shortcut").trim()}.`);
    });
  }

  async render() {
    const replies = (await this.api.get("/v1/saved-replies")).items;
    this.list.replaceChildren(...replies.map((reply) => {
      const item = document.createElement("li");
      item.dataset.shortcut = reply.shortcut;
      const head = document.createElement("div");
      head.className = "saved-head";
      head.append(Object.assign(document.createElement("strong"), { textContent: `/${reply.shortcut}` }));
      const actions = document.createElement("div");
      actions.className = "team-actions";
      const button = (label, handler) => AdminList.button(label, `/${reply.shortcut}`, handler);
      const body = Object.assign(document.createElement("p"), { className: "saved-text", textContent: reply.text });
      actions.append(
        button("Edit", () => {
          const text = prompt(`Text of /${reply.shortcut}`, reply.text);
          if (text !== null && text !== reply.text) {
            this.request(() => this.api.json("PATCH", `/v1/saved-replies/${reply.id}`, { text }), `Changed /${reply.shortcut}.`);
          }
        }),
        button("Delete", () => {
          if (confirm(`Delete /${reply.shortcut}?`)) this.request(() => this.api.json("DELETE", `/v1/saved-replies/${reply.id}`), `Deleted /${reply.shortcut}.`);
        }));
      head.append(actions);
      item.append(head, body);
      return item;
    }));
    if (!replies.length) {
      this.list.replaceChildren(Object.assign(document.createElement("li"), { className: "empty", textContent: "No saved replies yet." }));
    }
  }
}
