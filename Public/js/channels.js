// Messaging channels in the workspace: admins connect WhatsApp (ids and secrets, the webhook URL to
// paste at Meta, a test of the connection, the approved templates); agents send a template once the
// customer's 24-hour window has closed.

const element = (tag, properties = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
};

/** Settings → Channels: one card per app on the WhatsApp channel. */
export class ChannelsAdmin {
  constructor({ section, api }) {
    this.section = section;
    this.api = api;
    this.list = section.querySelector(".channel-list");
  }

  async render() {
    const [apps, connections] = await Promise.all([this.api.get("/v1/apps"), this.api.get("/v1/channel-connections")]);
    const connected = new Map(connections.items.map((connection) => [connection.appId, connection]));
    const cards = apps.items.filter((app) => app.channel === "whatsapp").map((app) => this.card(app, connected.get(app.id) ?? null));
    if (!cards.length) cards.push(this.createForm());
    this.list.replaceChildren(...cards);
    await this.renderFailures();
  }

  /** Work Parley gave up on (a message WhatsApp never took, a media it could not fetch): admins see why. */
  async renderFailures() {
    const failed = (await this.api.get("/v1/jobs?state=failed")).items;
    const box = this.section.querySelector(".channel-failures");
    box.hidden = !failed.length;
    const kinds = { "channel.send": "Sending a message", "whatsapp.webhook": "Reading a WhatsApp notification", "whatsapp.media": "Fetching a customer's media" };
    const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
    box.querySelector("ul").replaceChildren(...failed.slice(0, 20).map((job) => element("li", {},
      element("strong", { textContent: kinds[job.kind] ?? job.kind }),
      element("span", { className: "when", textContent: ` · ${when.format(new Date(job.updatedAt))} · ${job.attempts} attempt${job.attempts === 1 ? "" : "s"}` }),
      element("p", { className: "body", textContent: job.lastError ?? "" }))));
  }

  /** Without a WhatsApp app yet: make one (its conversations are on the WhatsApp channel). */
  createForm() {
    const form = element("form", { className: "channel-create" });
    const name = element("input", { name: "name", required: true, maxLength: 80, value: "WhatsApp", autocomplete: "off" });
    const note = element("p", { className: "form-note", role: "status" });
    form.append(
      element("p", { className: "hint", textContent: "Answer your customers' WhatsApp messages here, voice notes included. Start with an app for your WhatsApp number." }),
      element("label", {}, "App name ", name),
      element("button", { className: "button primary", type: "submit", textContent: "Add a WhatsApp app" }), note);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        await this.api.post("/v1/apps", { name: name.value, channel: "whatsapp" });
        await this.render();
      } catch (failure) {
        note.textContent = failure.message;
      }
    });
    return form;
  }

  card(app, connection) {
    const card = element("article", { className: "channel-card" });
    card.dataset.app = app.id;
    const status = element("span", {
      className: `tag ${connection ? "on" : "off"}`, textContent: connection ? "Connected" : "Not connected" });
    card.append(element("header", {}, element("h4", { textContent: app.name }), status));

    // Where Meta sends the messages: this server's address and the app's webhook path.
    const url = `${location.origin}/v1/webhooks/whatsapp/${app.id}`;
    const copy = element("button", { className: "button small", type: "button", textContent: "Copy" });
    copy.setAttribute("aria-label", "Copy the webhook URL");
    copy.addEventListener("click", async () => {
      await navigator.clipboard?.writeText(url).catch(() => {});
      copy.textContent = "Copied";
      setTimeout(() => { copy.textContent = "Copy"; }, 2000);
    });
    card.append(element("div", { className: "webhook" },
      element("span", { className: "label", textContent: "Callback URL for Meta" }), element("code", { textContent: url }), copy));

    const form = element("form", { className: "channel-form" });
    const field = (label, name, { type = "text", value = "", hint } = {}) => {
      const input = element("input", { name, type, value, required: true, autocomplete: "off", spellcheck: false });
      return element("label", {}, label, input, ...(hint ? [element("span", { className: "field-hint", textContent: hint })] : []));
    };
    form.append(
      field("Phone number ID", "phoneNumberId", { value: connection?.externalId ?? "", hint: "WhatsApp Manager → Phone numbers (the ID, not the number)" }),
      field("Verify token", "verifyToken", { type: "password", hint: "Any secret you choose; enter the same one at Meta" }),
      field("App secret", "appSecret", { type: "password", hint: "Meta app → Settings → Basic" }),
      field("Access token", "accessToken", { type: "password", hint: "A system user's permanent token" }));
    const note = element("p", { className: "form-note", role: "status" });
    const save = element("button", { className: "button primary", type: "submit", textContent: connection ? "Save new secrets" : "Connect" });
    const test = element("button", { className: "button test-connection", type: "button", textContent: "Test connection", disabled: !connection });
    form.append(element("p", { className: "hint", textContent: connection
      ? "Secrets are stored encrypted and never shown again: enter all three to change any of them."
      : "Secrets are stored encrypted and never shown again." }), element("div", { className: "row-buttons" }, save, test), note);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const values = Object.fromEntries(new FormData(form));
      try {
        await this.api.json("PUT", `/v1/apps/${app.id}/whatsapp`, values);
        note.textContent = "Connected. Paste the callback URL and your verify token in Meta's webhook settings.";
        const fresh = await this.api.get(`/v1/apps/${app.id}/whatsapp`);
        card.replaceWith(this.card(app, fresh));
      } catch (failure) {
        note.textContent = failure.message;
      }
    });
    test.addEventListener("click", async () => {
      note.textContent = "Testing…";
      try {
        const result = await this.api.post(`/v1/apps/${app.id}/whatsapp/test`);
        note.textContent = result.message;
        note.dataset.result = result.ok ? "ok" : "failed";
      } catch (failure) {
        note.textContent = failure.message;
        note.dataset.result = "failed";
      }
    });
    card.append(form);
    if (connection) card.append(this.templates(app, connection));
    return card;
  }

  /** The approved templates (as in WhatsApp Manager): what agents may send after the window. */
  templates(app, connection) {
    const section = element("section", { className: "templates" });
    let templates = [...(connection.templates ?? [])];
    const list = element("ul", { className: "template-list" });
    const note = element("p", { className: "form-note", role: "status" });
    const save = async (next, done) => {
      try {
        const saved = await this.api.json("PUT", `/v1/apps/${app.id}/whatsapp/templates`, { templates: next });
        templates = saved.templates;
        note.textContent = done;
        draw();
        return true;
      } catch (failure) {
        note.textContent = failure.message;
        return false;
      }
    };
    const draw = () => {
      list.replaceChildren(...templates.map((template, index) => {
        const remove = element("button", { className: "button small", type: "button", textContent: "Remove" });
        remove.setAttribute("aria-label", `Remove ${template.name}`);
        remove.addEventListener("click", () => save(templates.filter((_, other) => other !== index), `${template.name} removed.`));
        return element("li", {},
          element("div", {}, element("strong", { textContent: template.name }), element("span", { className: "tag", textContent: template.language }),
            element("p", { className: "body", textContent: template.body })), remove);
      }));
      if (!templates.length) list.append(element("li", { className: "empty", textContent: "No templates yet." }));
    };
    draw();
    const form = element("form", { className: "template-form" });
    const name = element("input", { name: "name", required: true, pattern: "[a-z0-9_]{1,512}", placeholder: "order_update", autocomplete: "off" });
    const language = element("input", { name: "language", required: true, pattern: "[A-Za-z_]{2,15}", defaultValue: "en_US", autocomplete: "off" });
    const body = element("textarea", { name: "body", required: true, maxLength: 1024, rows: 2, placeholder: "Hello {{1}}, your order {{2}} has an update." });
    form.append(element("label", {}, "Name ", name), element("label", {}, "Language ", language), element("label", { className: "wide" }, "Body ", body),
      element("button", { className: "button", type: "submit", textContent: "Add template" }));
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      if (await save([...templates, { name: name.value, language: language.value, body: body.value }], `${name.value} added.`)) form.reset();
    });
    section.append(element("h4", { textContent: "Message templates" }),
      element("p", { className: "hint", textContent: "Enter your templates as approved in WhatsApp Manager. After 24 hours without a message from the customer, agents can only send one of these." }),
      list, form, note);
    return section;
  }
}

/** The dialog an agent sends a template from: choose one, fill its parameters, see the message. */
export class TemplateSender {
  constructor({ dialog, api, onSent }) {
    this.dialog = dialog;
    this.api = api;
    this.onSent = onSent;
    this.form = dialog.querySelector("form");
    this.select = dialog.querySelector("select");
    this.fields = dialog.querySelector(".template-fields");
    this.preview = dialog.querySelector(".template-preview");
    this.note = dialog.querySelector(".form-note");
    dialog.querySelector(".template-cancel").addEventListener("click", () => dialog.close());
    this.select.addEventListener("change", () => this.choose());
    this.form.addEventListener("submit", (event) => { event.preventDefault(); this.send(); });
  }

  async open(conversation) {
    this.conversation = conversation;
    this.note.textContent = "";
    this.templates = (await this.api.get(`/v1/conversations/${conversation.id}/templates`)).items;
    this.select.replaceChildren(...this.templates.map((template, index) =>
      element("option", { value: String(index), textContent: `${template.name} (${template.language})` })));
    this.form.querySelector("[type=submit]").disabled = !this.templates.length;
    if (!this.templates.length) this.note.textContent = "No templates are set up for this WhatsApp number: an admin adds them in Settings.";
    this.choose();
    this.dialog.showModal();
    (this.fields.querySelector("input") ?? this.select).focus();
  }

  choose() {
    const template = this.templates?.[Number(this.select.value)];
    const count = template ? Math.max(0, ...[...template.body.matchAll(/\{\{(\d+)\}\}/g)].map((match) => Number(match[1]))) : 0;
    this.fields.replaceChildren(...Array.from({ length: count }, (_, index) => {
      const input = element("input", { required: true, maxLength: 1024, autocomplete: "off" });
      input.dataset.index = String(index + 1);
      input.addEventListener("input", () => this.render());
      return element("label", {}, `Parameter {{${index + 1}}} `, input);
    }));
    this.render();
  }

  parameters() { return [...this.fields.querySelectorAll("input")].map((input) => input.value); }

  render() {
    const template = this.templates?.[Number(this.select.value)];
    if (!template) { this.preview.textContent = ""; return; }
    const values = this.parameters();
    this.preview.textContent = template.body.replace(/\{\{(\d+)\}\}/g, (whole, n) => values[Number(n) - 1] || whole);
  }

  async send() {
    const template = this.templates?.[Number(this.select.value)];
    if (!template) return;
    try {
      const response = await this.api.post(`/v1/conversations/${this.conversation.id}/template`, {
        clientMessageId: crypto.randomUUID(), name: template.name, language: template.language, parameters: this.parameters() });
      this.dialog.close();
      this.onSent(response);
    } catch (failure) {
      this.note.textContent = failure.message;
    }
  }
}
