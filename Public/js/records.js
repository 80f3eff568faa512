// Records in the workspace: admins set how long conversations are kept and how far back customers
// see theirs, hold conversations or customers past the retention period, read the purge log; and,
// from a conversation's details, export a customer's data or erase it (GDPR articles 15 and 17).
import { AdminList } from "./admin-list.js";

const element = (tag, properties = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
};
const dateFormat = new Intl.DateTimeFormat(undefined, { day: "numeric", month: "short", year: "numeric" });

export class RecordsAdmin extends AdminList {
  constructor({ section, api }) {
    super({ section, api, note: ".records-note" });
    this.form = section.querySelector(".records-form");
    this.holds = section.querySelector(".hold-list");
    this.purges = section.querySelector(".purge-log");
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const data = new FormData(this.form);
      this.request(() => this.api.json("PATCH", "/v1/records", {
        retentionMonths: Number(data.get("retentionMonths")), historyMonths: Number(data.get("historyMonths")),
        historyStates: data.get("showClosed") ? ["open", "resolved", "reopened"] : ["open", "reopened"],
      }), "Saved. Retention runs every day; what is older than the period and not held is deleted.");
    });
  }

  async render() {
    const [settings, holds, purges] = await Promise.all([
      this.api.get("/v1/records"), this.api.get("/v1/legal-holds"), this.api.get("/v1/purges?limit=20"),
    ]);
    if (!this.filled) {
      this.filled = true;
      this.form.elements.retentionMonths.value = settings.retentionMonths;
      this.form.elements.historyMonths.value = settings.historyMonths;
      this.form.elements.showClosed.checked = settings.historyStates.includes("resolved");
    }
    this.holds.replaceChildren(...holds.items.map((hold) => {
      const what = hold.conversationId ? `Conversation ${hold.conversationId}` : `Customer ${hold.consumerId}`;
      return element("li", {},
        element("div", { className: "saved-head" }, element("strong", { textContent: what }),
          AdminList.button("Lift", `the hold on ${what}`, () => {
            if (confirm(`Lift the hold on ${what}? Retention will delete it once it is older than the period.`)) {
              this.request(() => this.api.json("DELETE", `/v1/legal-holds/${hold.id}`), "Lifted the hold.");
            }
          })),
        element("p", { className: "saved-text", textContent: `${hold.reason} · since ${dateFormat.format(new Date(hold.createdAt))}` }));
    }));
    if (!holds.items.length) this.holds.replaceChildren(element("li", { className: "empty", textContent: "No holds. Hold a conversation or a customer from its details." }));
    this.purges.replaceChildren(...purges.items.map((purge) => element("tr", {},
      element("td", { textContent: dateFormat.format(new Date(purge.finishedAt)) }),
      element("td", { textContent: purge.kind === "erasure" ? `Erased ${purge.subject}` : "Retention" }),
      element("td", { textContent: `${purge.conversations} conversations, ${purge.messages} messages, ${purge.voiceNotes + purge.attachments} files` }))));
    if (!purges.items.length) this.purges.replaceChildren(element("tr", {}, element("td", { colSpan: 3, textContent: "Nothing has been deleted yet." })));
  }
}

/** The details pane's records actions (admins): hold, export, erase. */
export class RecordsActions {
  constructor({ container, api, onErased }) {
    Object.assign(this, { container, api, onErased });
    this.note = container.querySelector(".records-actions-note");
    container.querySelector(".hold-conversation").addEventListener("click", () => this.hold({ conversationId: this.conversation.id }, "this conversation"));
    container.querySelector(".hold-customer").addEventListener("click", () => this.hold({ consumerId: this.conversation.consumerId }, "this customer"));
    container.querySelector(".erase-customer").addEventListener("click", () => this.erase());
  }

  show(conversation, me) {
    this.conversation = conversation;
    this.container.hidden = me.role !== "admin";
    this.note.textContent = "";
    this.container.querySelector(".export-customer").href = `/v1/consumers/${conversation.consumerId}/export`;
  }

  async hold(target, what) {
    const reason = prompt(`Why hold ${what}? (kept past the retention period until the hold is lifted)`)?.trim();
    if (!reason) return;
    try {
      await this.api.post("/v1/legal-holds", { ...target, reason });
      this.note.textContent = `Held ${what}.`;
    } catch (error) {
      this.note.textContent = error.message;
    }
  }

  async erase() {
    if (!confirm("Erase this customer? Their conversations, messages, voice notes, files and activity are deleted for good.")) return;
    try {
      const purge = await this.api.json("DELETE", `/v1/consumers/${this.conversation.consumerId}`);
      this.onErased(purge, this.conversation.consumerId);
    } catch (error) {
      this.note.textContent = error.message;
    }
  }
}
