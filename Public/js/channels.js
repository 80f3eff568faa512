// Messaging channels in the workspace: admins connect WhatsApp, Messenger, Apple Messages and SMS (ids and secrets,
// the webhook URL to paste at the provider, a test of the connection, WhatsApp's approved
// templates); agents send a template once a WhatsApp customer's 24-hour window has closed.

const element = (tag, properties = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
};

/** What each provider's card asks for and where the values come from. */
const providers = {
  whatsapp: {
    name: "WhatsApp", path: "whatsapp", pitch: "Answer your customers' WhatsApp messages here, voice notes included.",
    fields: [
      { label: "Phone number ID", name: "phoneNumberId", hint: "WhatsApp Manager → Phone numbers (the ID, not the number)", external: true },
      { label: "Verify token", name: "verifyToken", secret: true, hint: "Any secret you choose; enter the same one at Meta" },
      { label: "App secret", name: "appSecret", secret: true, hint: "Meta app → Settings → Basic" },
      { label: "Access token", name: "accessToken", secret: true, hint: "A system user's permanent token" },
    ],
    urlLabel: "Callback URL for Meta",
    where: "Paste the callback URL and your verify token in Meta's App Dashboard → WhatsApp → Configuration, and subscribe to messages.",
    templates: true,
  },
  messenger: {
    name: "Messenger", path: "messenger", pitch: "Answer the messages your Facebook Page receives, voice notes included.",
    fields: [
      { label: "Page ID", name: "pageId", hint: "Your Facebook Page → About → Page transparency", external: true },
      { label: "Verify token", name: "verifyToken", secret: true, hint: "Any secret you choose; enter the same one at Meta" },
      { label: "App secret", name: "appSecret", secret: true, hint: "Meta app → Settings → Basic" },
      { label: "Page access token", name: "pageAccessToken", secret: true, hint: "Meta app → Messenger → Settings (with pages_messaging)" },
    ],
    urlLabel: "Callback URL for Meta",
    where: "Paste the callback URL and your verify token in Meta's App Dashboard → Messenger → Settings → Webhooks, and subscribe to messages, message_deliveries and message_reads.",
    templates: false,
  },
  apple: {
    name: "Apple Messages", path: "apple", pitch: "Answer your customers in Apple's Messages app, voice notes included, with Parley as your messaging service provider.",
    fields: [
      { label: "Business ID", name: "businessId", hint: "Apple Business Register → your Messages for Business account", external: true },
      { label: "MSP ID", name: "mspId", hint: "Apple Business Register → Messaging Service Provider → MSP ID" },
      { label: "Messaging API secret", name: "secret", secret: true, hint: "Apple Business Register → Messaging Service Provider → API secret (base64)" },
    ],
    urlLabel: "MSP endpoint URL for Apple",
    where: "In Apple Business Register, enter this URL as your messaging service provider's endpoint (Apple adds /message) and connect the business account to it.",
    templates: false,
  },
  sms: {
    name: "SMS", path: "sms", pitch: "Answer the text messages your Twilio number receives; your voice notes reach customers as audio or a link.",
    fields: [
      { label: "Twilio phone number", name: "phoneNumber", hint: "In international format, like +15557122661", external: true },
      { label: "Account SID", name: "accountSid", hint: "Twilio Console → Account info (starts with AC)" },
      { label: "Auth token", name: "authToken", secret: true, hint: "Twilio Console → Account info" },
    ],
    urlLabel: "Webhook URL for Twilio",
    where: "In Twilio Console → Phone numbers → your number → Messaging, set “A message comes in” to Webhook, this URL, HTTP POST.",
    templates: false,
  },
};

/** How an SMS number carries agents' voice notes, as its last connection test found. */
const mmsHint = (mms) => mms === true
  ? "Voice notes go as MMS audio to US and Canadian numbers, as a link to a player page elsewhere."
  : mms === false
    ? "This number has no MMS: voice notes go as a text with a link to a player page."
    : "Test the connection to find out whether voice notes can go as MMS audio.";

/** Settings → Channels: one card per app on a messaging channel. */
export class ChannelsAdmin {
  constructor({ section, api }) {
    this.section = section;
    this.api = api;
    this.list = section.querySelector(".channel-list");
  }

  async render() {
    const [apps, connections] = await Promise.all([this.api.get("/v1/apps"), this.api.get("/v1/channel-connections")]);
    const connected = new Map(connections.items.map((connection) => [connection.appId, connection]));
    const cards = apps.items.filter((app) => providers[app.channel]).map((app) => this.card(app, connected.get(app.id) ?? null));
    const missing = Object.keys(providers).filter((channel) => !apps.items.some((app) => app.channel === channel));
    if (missing.length) cards.push(this.createForm(missing));
    this.list.replaceChildren(...cards);
    await this.renderFailures();
  }

  /** Work Parley gave up on (a message WhatsApp never took, a media it could not fetch): admins see why. */
  async renderFailures() {
    const failed = (await this.api.get("/v1/jobs?state=failed")).items;
    const box = this.section.querySelector(".channel-failures");
    box.hidden = !failed.length;
    const kinds = {
      "channel.send": "Sending a message", "whatsapp.webhook": "Reading a WhatsApp notification", "whatsapp.media": "Fetching a customer's media",
      "messenger.webhook": "Reading a Messenger notification", "messenger.media": "Fetching a customer's attachment",
      "sms.webhook": "Reading a Twilio webhook", "sms.media": "Fetching a customer's MMS media",
      "apple.webhook": "Reading an Apple Messages message", "apple.media": "Fetching a customer's Apple Messages attachment",
    };
    const when = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
    box.querySelector("ul").replaceChildren(...failed.slice(0, 20).map((job) => element("li", {},
      element("strong", { textContent: kinds[job.kind] ?? job.kind }),
      element("span", { className: "when", textContent: ` · ${when.format(new Date(job.updatedAt))} · ${job.attempts} attempt${job.attempts === 1 ? "" : "s"}` }),
      element("p", { className: "body", textContent: job.lastError ?? "" }))));
  }

  /** For each provider without an app yet: make one (its conversations are on that channel). */
  createForm(channels) {
    const box = element("div", { className: "channel-create" });
    const note = element("p", { className: "form-note", role: "status" });
    for (const channel of channels) {
      const provider = providers[channel];
      const add = element("button", { className: "button", type: "button", textContent: `Add ${provider.name}` });
      add.addEventListener("click", async () => {
        try {
          await this.api.post("/v1/apps", { name: provider.name, channel });
          await this.render();
        } catch (failure) {
          note.textContent = failure.message;
        }
      });
      box.append(element("div", { className: "channel-offer" }, element("p", { className: "hint", textContent: provider.pitch }), add));
    }
    box.append(note);
    return box;
  }

  card(app, connection) {
    const provider = providers[app.channel];
    const card = element("article", { className: "channel-card" });
    card.dataset.app = app.id;
    card.dataset.channel = app.channel;
    const status = element("span", {
      className: `tag state ${connection ? "on" : "off"}`, textContent: connection ? "Connected" : "Not connected" });
    const named = app.name === provider.name ? [] : [element("span", { className: "tag", textContent: provider.name })];
    card.append(element("header", {}, element("h4", { textContent: app.name }), ...named, status));

    // Where the provider sends the messages: this server's address and the app's webhook path
    // (Twilio signs the exact URL it was given, so the server says which one that is).
    const url = connection?.webhookURL ?? `${location.origin}/v1/webhooks/${provider.path}/${app.id}`;
    const copy = element("button", { className: "button small", type: "button", textContent: "Copy" });
    copy.setAttribute("aria-label", "Copy the webhook URL");
    copy.addEventListener("click", async () => {
      await navigator.clipboard?.writeText(url).catch(() => {});
      copy.textContent = "Copied";
      setTimeout(() => { copy.textContent = "Copy"; }, 2000);
    });
    card.append(element("div", { className: "webhook" },
      element("span", { className: "label", textContent: provider.urlLabel }), element("code", { textContent: url }), copy,
      element("span", { className: "field-hint", textContent: provider.where })));

    const form = element("form", { className: "channel-form" });
    const field = (label, name, { type = "text", value = "", hint } = {}) => {
      const input = element("input", { name, type, value, required: true, autocomplete: "off", spellcheck: false });
      return element("label", {}, label, input, ...(hint ? [element("span", { className: "field-hint", textContent: hint })] : []));
    };
    form.append(...provider.fields.map((spec) => field(spec.label, spec.name, {
      type: spec.secret ? "password" : "text", value: spec.external ? connection?.externalId ?? "" : "", hint: spec.hint })));
    const note = element("p", { className: "form-note", role: "status" });
    const save = element("button", { className: "button primary", type: "submit", textContent: connection ? "Save new secrets" : "Connect" });
    const test = element("button", { className: "button test-connection", type: "button", textContent: "Test connection", disabled: !connection });
    if (connection && app.channel === "sms") {
      form.append(element("p", { className: "hint mms", textContent: mmsHint(connection.mms) }));
    }
    form.append(element("p", { className: "hint", textContent: connection
      ? "Secrets are stored encrypted and never shown again: enter them all to change any of them."
      : "Secrets are stored encrypted and never shown again." }), element("div", { className: "row-buttons" }, save, test), note);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const values = Object.fromEntries(new FormData(form));
      try {
        await this.api.json("PUT", `/v1/apps/${app.id}/${provider.path}`, values);
        const fresh = await this.api.get(`/v1/apps/${app.id}/${provider.path}`);
        card.replaceWith(this.card(app, fresh));
      } catch (failure) {
        note.textContent = failure.message;
      }
    });
    test.addEventListener("click", async () => {
      note.textContent = "Testing…";
      try {
        const result = await this.api.post(`/v1/apps/${app.id}/${provider.path}/test`);
        note.textContent = result.message;
        note.dataset.result = result.ok ? "ok" : "failed";
        if (result.ok && app.channel === "sms") {
          const fresh = await this.api.get(`/v1/apps/${app.id}/sms`);
          card.querySelector(".hint.mms").textContent = mmsHint(fresh.mms);
        }
      } catch (failure) {
        note.textContent = failure.message;
        note.dataset.result = "failed";
      }
    });
    card.append(form);
    if (connection && provider.templates) card.append(this.templates(app, connection));
    if (connection && app.channel === "messenger") card.append(this.humanAgent(app, connection));
    return card;
  }

  /** Messenger's Human Agent window: 7 days instead of 24 hours, where Meta granted the permission. */
  humanAgent(app, connection) {
    const toggle = element("input", { type: "checkbox", name: "humanAgent", checked: connection.humanAgent === true });
    const note = element("p", { className: "form-note", role: "status" });
    toggle.addEventListener("change", async () => {
      toggle.disabled = true;
      try {
        const saved = await this.api.json("PUT", `/v1/apps/${app.id}/messenger/settings`, { humanAgent: toggle.checked });
        toggle.checked = saved.humanAgent === true;
        note.textContent = saved.humanAgent
          ? "Agents can answer for 7 days after the customer's last message."
          : "Agents can answer for 24 hours after the customer's last message.";
      } catch (failure) {
        toggle.checked = !toggle.checked;
        note.textContent = failure.message;
      } finally {
        toggle.disabled = false;
      }
    });
    return element("section", { className: "human-agent" },
      element("label", { className: "switch-row" }, toggle, element("span", {},
        element("strong", { textContent: "Human Agent window" }),
        element("span", { className: "field-hint", textContent:
          "Turn on only if Meta approved your app for the Human Agent permission: agents may then answer up to 7 days after the customer's last message." }))),
      note);
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
