// Routing in the workspace: admins set how conversations reach agents (automatic or manual, the
// limit per agent, the grace period), keep teams (members and the apps they answer) and agents'
// own limits; managers transfer a conversation to an agent or a team with a private note.
import { AdminList } from "./admin-list.js";

const element = (tag, properties = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
};

export class RoutingAdmin extends AdminList {
  constructor({ section, api }) {
    super({ section, api, note: ".routing-note" });
    this.form = section.querySelector(".routing-form");
    this.teamForm = section.querySelector(".team-form");
    this.list = section.querySelector(".team-list-routing");
    this.loads = section.querySelector(".agent-loads");
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      const data = new FormData(this.form);
      this.request(() => this.api.json("PATCH", "/v1/routing", {
        mode: data.get("mode"), maxConversations: Number(data.get("maxConversations")),
        requeueGraceSeconds: Number(data.get("requeueGraceMinutes")) * 60,
      }), "Saved the routing settings.");
    });
    this.teamForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(this.teamForm);
      const name = data.get("name").trim();
      // Emptied as soon as the team exists, before the note says so.
      await this.request(async () => {
        await this.api.post("/v1/teams", { name, memberIds: data.getAll("member"), appIds: data.getAll("app") });
        this.teamForm.reset();
      }, `Added the team “${name}”.`);
    });
  }

  async render() {
    const [settings, teams, loads, apps] = await Promise.all([
      this.api.get("/v1/routing"), this.api.get("/v1/teams"), this.api.get("/v1/routing/agents"), this.api.get("/v1/apps"),
    ]);
    // The settings' fields are filled once: a later redraw never undoes what the admin is typing.
    if (!this.filled) {
      this.filled = true;
      this.form.elements.mode.value = settings.mode;
      this.form.elements.maxConversations.value = settings.maxConversations;
      this.form.elements.requeueGraceMinutes.value = Math.round(settings.requeueGraceSeconds / 60);
    }
    const names = new Map(loads.items.map((agent) => [agent.agentId, agent.name]));
    const appNames = new Map(apps.items.map((app) => [app.id, app.name]));
    // The new team's choices: every agent and every app.
    const choices = (name, items) => items.map(([id, label]) =>
      element("label", { className: "check" }, element("input", { type: "checkbox", name, value: id }), ` ${label}`));
    this.teamForm.querySelector(".team-members").replaceChildren(...choices("member", [...names]));
    this.teamForm.querySelector(".team-apps").replaceChildren(...choices("app", [...appNames]));
    this.list.replaceChildren(...teams.items.map((team) => {
      const who = team.memberIds.map((id) => names.get(id) ?? "An agent").join(", ") || "Nobody yet";
      const answers = team.appIds.map((id) => appNames.get(id) ?? "An app").join(", ") || "No app: only transfers";
      const actions = element("div", { className: "team-actions" },
        AdminList.button("Delete", `the team “${team.name}”`, () => {
          if (confirm(`Delete the team “${team.name}”? Its waiting conversations will wait for anyone.`)) {
            this.request(() => this.api.json("DELETE", `/v1/teams/${team.id}`), `Deleted “${team.name}”.`);
          }
        }));
      return element("li", {},
        element("div", { className: "saved-head" }, element("strong", { textContent: team.name }), actions),
        element("p", { className: "saved-text", textContent: `Members: ${who}` }),
        element("p", { className: "saved-text", textContent: `Answers: ${answers}` }));
    }));
    if (!teams.items.length) this.list.replaceChildren(element("li", { className: "empty", textContent: "No teams: every agent takes every conversation." }));
    this.loads.replaceChildren(...loads.items.map((agent) => {
      const limit = element("input", {
        type: "number", min: 1, max: 100, value: agent.ownLimit ?? "", placeholder: String(settings.maxConversations), className: "limit",
      });
      limit.setAttribute("aria-label", `Limit of ${agent.name}`);
      limit.addEventListener("change", () => this.request(
        () => this.api.json("PUT", `/v1/agents/${agent.agentId}/capacity`, { maxConversations: limit.value === "" ? null : Number(limit.value) }),
        `Saved the limit of ${agent.name}.`));
      const state = element("span", { className: `tag ${agent.available ? "available" : ""}`, textContent: agent.available ? "Available" : "Not available" });
      return element("tr", {},
        element("th", { scope: "row", textContent: agent.name }), element("td", {}, state),
        element("td", { textContent: `${agent.openConversations} / ${agent.maxConversations}` }), element("td", {}, limit));
    }));
  }
}

/** The manager's transfer dialog: to an agent or a team, with a note for the next agent. */
export class TransferDialog {
  constructor({ dialog, api, onDone }) {
    Object.assign(this, { dialog, api, onDone });
    this.form = dialog.querySelector("form");
    this.note = dialog.querySelector(".form-note");
    dialog.querySelector(".transfer-cancel").addEventListener("click", () => dialog.close());
    this.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(this.form);
      const [kind, id] = String(data.get("target")).split(":");
      try {
        const conversation = await this.api.post(`/v1/conversations/${this.conversationId}/transfer`, {
          [kind === "team" ? "teamId" : "agentId"]: id, note: data.get("note").trim() || undefined,
        });
        dialog.close();
        this.onDone(conversation);
      } catch (error) {
        this.note.textContent = error.message;
      }
    });
  }

  async open(conversation, me) {
    this.conversationId = conversation.id;
    this.note.textContent = "";
    this.form.reset();
    const [loads, teams] = await Promise.all([this.api.get("/v1/routing/agents"), this.api.get("/v1/teams")]);
    const select = this.form.elements.target;
    const agents = element("optgroup", { label: "Agents" }, ...loads.items.filter((agent) => agent.agentId !== conversation.assigneeId).map((agent) =>
      element("option", {
        value: `agent:${agent.agentId}`,
        textContent: `${agent.agentId === me ? "Me" : agent.name} · ${agent.available ? `${agent.openConversations}/${agent.maxConversations} open` : "not available"}`,
      })));
    const groups = [agents];
    if (teams.items.length) {
      groups.push(element("optgroup", { label: "Back to the queue of a team" },
        ...teams.items.map((team) => element("option", { value: `team:${team.id}`, textContent: team.name }))));
    }
    select.replaceChildren(...groups);
    this.dialog.showModal();
    select.focus();
  }
}
