// The account dialog: the agent's password and sessions, which Parley this is, and for admins the
// team, the widget's look, saved replies, engagement, routing, lifecycle, records and channels.
import { ErrorCode } from "../error-codes.js";
import { icon } from "../icons.js";
import { presenceLabels } from "../presence.js";
import { SavedRepliesAdmin } from "../saved-replies.js";
import { EngagementAdmin } from "../engagement.js";
import { RoutingAdmin } from "../routing.js";
import { LifecycleAdmin } from "../lifecycle.js";
import { RecordsAdmin } from "../records.js";
import { ChannelsAdmin } from "../channels.js";

const $ = (selector) => document.querySelector(selector);

export class AccountView {
  /** `onSavedRepliesChange`: the composer's picker reloads; `beforeSignOut`: the socket closes first. */
  constructor({ store, onSavedRepliesChange, beforeSignOut }) {
    const api = store.api;
    this.store = store;
    this.dialog = $(".account");
    this.started = false;
    this.admins = [
      new SavedRepliesAdmin({ section: $(".saved-replies"), api, onChange: onSavedRepliesChange }),
      new EngagementAdmin({ section: $(".engagement"), api }),
      new RoutingAdmin({ section: $(".routing"), api }),
      new LifecycleAdmin({ section: $(".lifecycle"), api }),
      new RecordsAdmin({ section: $(".records"), api }),
      new ChannelsAdmin({ section: $(".channel-settings"), api }),
    ];
    $(".account-close").innerHTML = icon("close");
    $(".account-open").addEventListener("click", () => {
      this.dialog.showModal();
      this.renderTeam();
      this.showVersion();
    });
    $(".account-close").addEventListener("click", () => this.dialog.close());
    this.dialog.addEventListener("close", () => { this.started = false; });
    this.wireWidgetForm();
    this.wirePasswordForm();
    $(".sign-out-everywhere").addEventListener("click", async () => {
      // The socket closes first: the server's "signed out" close would show the sign-in form while the
      // page reloads into it anyway (two renders, and a page caught between them).
      beforeSignOut();
      await api.post("/v1/auth/logout-all").catch(() => {});
      location.reload();
    });
  }

  get isOpen() { return this.dialog.open; }

  close() { this.dialog.close(); }

  /** Which Parley this is (from /health): what an admin quotes in a support request. */
  async showVersion() {
    const line = $(".about-version");
    if (line.textContent) return;
    try {
      const response = await fetch("/health", { headers: { Accept: "application/json" } });
      const health = await response.json();
      line.textContent = `Parley ${health.version}` + (health.commit ? ` · commit ${health.commit.slice(0, 7)}` : "");
    } catch {}
  }

  /** Admins see the team: each agent with what their profile allows, enable/disable, a password reset and delete. */
  async renderTeam() {
    const store = this.store;
    const team = $(".team");
    const admin = store.me.role === "admin";
    team.hidden = !admin;
    for (const section of [".saved-replies", ".engagement", ".routing", ".lifecycle", ".records", ".widget-settings", ".channel-settings"]) {
      $(section).hidden = !admin;
    }
    if (team.hidden) return;
    if (!this.started) {
      this.started = true;
      for (const section of this.admins) section.render();
      this.fillWidgetForm();
      store.loadTeam().then(() => this.renderTeam());
    }
    const agents = (await store.api.get("/v1/agents")).items;
    $(".team-list").replaceChildren(...agents.map((agent) => this.teamRow(agent)));
  }

  teamRow(agent) {
    const store = this.store;
    const item = document.createElement("li");
    item.dataset.agent = agent.id;
    const who = document.createElement("div");
    who.className = "who";
    const name = Object.assign(document.createElement("strong"), { textContent: agent.name });
    const detail = Object.assign(document.createElement("span"), { textContent: `${agent.email} · ${agent.role}` });
    const status = Object.assign(document.createElement("span"), {
      className: `tag ${agent.disabled ? "off" : "on"}`, textContent: agent.disabled ? "Disabled" : "Active" });
    const member = store.team.get(agent.id);
    const shown = agent.disabled ? null : (member?.presence ?? "offline");
    const availability = Object.assign(document.createElement("span"), { className: "presence-tag", textContent: shown ? presenceLabels[shown] : "" });
    if (shown) availability.dataset.presence = shown;
    const open = member?.openConversations ?? 0;
    const load = Object.assign(document.createElement("span"), { className: "load", textContent: `${open} open conversation${open === 1 ? "" : "s"}` });
    who.append(name, availability, status, load, detail);
    item.append(who, this.permissionsEditor(agent));
    if (agent.id === store.me.id) return item;
    const actions = document.createElement("div");
    actions.className = "team-actions";
    const button = (label, handler) => {
      const element = Object.assign(document.createElement("button"), { className: "button small", type: "button", textContent: label });
      element.setAttribute("aria-label", `${label} ${agent.name}`);
      element.addEventListener("click", handler);
      return element;
    };
    const change = (body, done) => this.teamRequest(() => store.api.json("PATCH", `/v1/agents/${agent.id}`, body), done);
    actions.append(
      button(agent.disabled ? "Enable" : "Disable", () => change({ disabled: !agent.disabled },
        agent.disabled ? `${agent.name} can sign in again.` : `${agent.name} is signed out and cannot sign in.`)),
      button("Reset password", () => {
        const password = prompt(`New password for ${agent.name} (at least 10 characters). Their sessions end.`);
        if (password) change({ password }, `${agent.name}'s password was reset; they were signed out.`);
      }),
      button("Delete", async () => {
        if (!confirm(`Delete ${agent.name}? They are signed out and cannot sign in again.`)) return;
        await this.teamRequest(() => store.api.json("DELETE", `/v1/agents/${agent.id}`), `${agent.name} was deleted.`);
      }));
    item.append(actions);
    return item;
  }

  /** What an agent's profile allows, as checkboxes saved as they change (an admin's own too). */
  permissionsEditor(agent) {
    const labels = {
      send_audio: "Send voice notes", initiate_voice_call: "Voice calls", initiate_video_call: "Video calls",
      share_screen: "Share their screen in calls", cobrowse: "Co-browse: see the customer's page",
      cobrowse_control: "Co-browse control: click and type on it, with the customer's yes",
    };
    const granted = new Set(agent.permissions ?? []);
    const details = Object.assign(document.createElement("details"), { className: "team-permissions" });
    details.open = this.openPermissions === agent.id;
    details.addEventListener("toggle", () => { if (details.open) this.openPermissions = agent.id; else if (this.openPermissions === agent.id) this.openPermissions = null; });
    const summary = document.createElement("summary");
    const names = Object.keys(labels).filter((key) => granted.has(key));
    summary.textContent = `Allowed: ${names.length ? names.map((key) => labels[key].split(":")[0].toLowerCase()).join(", ") : "messages only"}`;
    summary.setAttribute("aria-label", `What ${agent.name} may do`);
    const boxes = Object.assign(document.createElement("div"), { className: "checks" });
    for (const [key, label] of Object.entries(labels)) {
      const box = Object.assign(document.createElement("input"), { type: "checkbox", name: key, checked: granted.has(key) });
      box.addEventListener("change", () => {
        const permissions = [...boxes.querySelectorAll("input:checked")].map((input) => input.name);
        this.teamRequest(() => this.store.api.json("PATCH", `/v1/agents/${agent.id}`, { permissions }),
          `${agent.name}'s profile was saved; it applies from their next sign-in or reload.`);
      });
      const row = Object.assign(document.createElement("label"), { className: "check" });
      row.append(box, ` ${label}`);
      boxes.append(row);
    }
    details.append(summary, boxes);
    return details;
  }

  async teamRequest(request, done) {
    const note = $(".team-note");
    try {
      await request();
      note.textContent = done;
    } catch (failure) {
      note.textContent = failure.message;
    }
    await this.renderTeam();
  }

  /** The brand's widget: colour, what it says while agents are there or away, and the idle time. */
  fillWidgetForm() {
    const settings = this.store.settings;
    const form = $(".widget-form");
    for (const name of ["widgetColor", "availableText", "awayText", "autoAwayMinutes"]) form.elements[name].value = settings[name];
    form.elements.previewOrigins.value = (settings.previewOrigins ?? []).join("\n");
    form.elements.cobrowseEnabled.checked = settings.cobrowseEnabled !== false;
    form.elements.cobrowseOrigins.value = (settings.cobrowseOrigins ?? []).join("\n");
    form.elements.cobrowseMaskSelectors.value = (settings.cobrowseMaskSelectors ?? []).join("\n");
    form.elements.screenShareFromConsumers.checked = Boolean(settings.screenShareFromConsumers);
    form.elements.transcription.checked = Boolean(settings.transcription);
    form.elements.transcription.disabled = !settings.transcriberAvailable && !settings.transcription;
    form.elements.transcriptionLanguage.value = settings.transcriptionLanguage ?? "en";
    $(".transcription-note").textContent = settings.transcriberAvailable
      ? "Transcripts are made on your server; the words never leave it unless your operator set an outside engine."
      : "This server has no transcriber; your operator can set one up (PARLEY_TRANSCRIBER).";
    this.renderLogo();
  }

  renderLogo() {
    const url = this.store.settings.logoUrl;
    $(".logo-preview").replaceChildren(url ? Object.assign(document.createElement("img"), { src: url, alt: "" }) : "No logo");
    $(".remove-logo").hidden = !url;
  }

  wireWidgetForm() {
    const store = this.store;
    $(".logo-input").addEventListener("change", async (event) => {
      const file = event.target.files[0];
      event.target.value = "";
      if (!file) return;
      try {
        store.settings = await store.api.upload("/v1/brand/logo", file, null, "PUT");
        $(".widget-note").textContent = "Logo saved. Visitors see it the next time the chat opens.";
      } catch (failure) {
        $(".widget-note").textContent = failure.message;
      }
      this.renderLogo();
    });
    $(".remove-logo").addEventListener("click", async () => {
      store.settings = await store.api.json("DELETE", "/v1/brand/logo");
      this.renderLogo();
    });
    $(".widget-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const form = event.target;
      const note = $(".widget-note");
      try {
        store.settings = await store.api.json("PATCH", "/v1/brand/settings", {
          widgetColor: form.elements.widgetColor.value, availableText: form.elements.availableText.value,
          awayText: form.elements.awayText.value, autoAwayMinutes: Number(form.elements.autoAwayMinutes.value),
          previewOrigins: form.elements.previewOrigins.value.split(/\s+/).filter(Boolean),
          cobrowseEnabled: form.elements.cobrowseEnabled.checked,
          cobrowseOrigins: form.elements.cobrowseOrigins.value.split(/\s+/).filter(Boolean),
          cobrowseMaskSelectors: form.elements.cobrowseMaskSelectors.value.split("\n").map((line) => line.trim()).filter(Boolean),
          screenShareFromConsumers: form.elements.screenShareFromConsumers.checked,
          transcription: form.elements.transcription.checked,
          transcriptionLanguage: form.elements.transcriptionLanguage.value,
        });
        this.fillWidgetForm();
        note.textContent = "Saved. Visitors see it the next time the chat opens.";
      } catch (failure) {
        note.textContent = failure.message;
      }
    });
  }

  wirePasswordForm() {
    $(".password-form").addEventListener("submit", async (event) => {
      event.preventDefault();
      const form = new FormData(event.target);
      const note = $(".password-form .form-note");
      try {
        await this.store.api.post("/v1/me/password", { currentPassword: form.get("current"), newPassword: form.get("next") });
        event.target.reset();
        note.textContent = "Password changed. Your other devices are signed out.";
      } catch (failure) {
        note.textContent = failure.code === ErrorCode.wrongPassword ? "The current password is wrong." : failure.message;
      }
    });
  }
}
