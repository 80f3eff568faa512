// Conversations' lifecycle in the workspace: admins set when quiet conversations close on their
// own (per channel, with a warning), whether customers are asked for a rating, business hours and
// holidays, and write the automatic messages in each language.
import { AdminList } from "./admin-list.js";

const element = (tag, properties = {}, ...children) => {
  const node = Object.assign(document.createElement(tag), properties);
  node.append(...children);
  return node;
};

const channelNames = { web: "Website chat", in_app: "In-app (ParleyKit)", whatsapp: "WhatsApp", messenger: "Messenger", apple: "Apple Messages", sms: "SMS" };
const closeChoices = [["", "Never"], [60, "After 1 hour"], [240, "After 4 hours"], [720, "After 12 hours"], [1440, "After 24 hours"],
  [2880, "After 2 days"], [4320, "After 3 days"], [10080, "After 7 days"]];
const weekdays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
const kindNames = {
  welcome: ["Welcome", "After a customer's first message, within business hours."],
  outside_hours: ["Outside business hours", "After a first message while you are closed or on a holiday."],
  agent_joined: ["Agent joined", "When an agent takes the conversation. {agent} is their name."],
  transferred: ["Transferred", "When a manager passes the conversation on. {agent} is who it went to."],
  queue_position: ["Place in line", "On messaging apps, while the customer waits. {position}, {wait}."],
  close_warning: ["Close warning", "Before a quiet conversation closes. {minutes} is the time left."],
  closed: ["Closed", "On messaging apps, when a conversation closes."],
  survey: ["Rating question", "On messaging apps, after the close: answered with 1 to 5."],
  survey_thanks: ["Rating thanks", "On messaging apps, after a rating."],
};

export class LifecycleAdmin extends AdminList {
  constructor({ section, api }) {
    super({ section, api, note: ".lifecycle-note" });
    this.form = section.querySelector(".lifecycle-form");
    this.messages = section.querySelector(".automatic-messages");
    this.languagePicker = section.querySelector(".message-language");
    this.language = null;
    this.buildForm();
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.request(() => this.api.json("PATCH", "/v1/lifecycle", this.readForm()), "Saved. Open conversations follow the new times now.");
    });
    this.languagePicker.addEventListener("change", () => {
      const value = this.languagePicker.value;
      if (value === "+") {
        const typed = prompt("Language code (like “es”, “pt-BR”)")?.trim();
        this.language = typed || this.language;
      } else {
        this.language = value;
      }
      this.render();
    });
  }

  buildForm() {
    const closes = this.form.querySelector(".close-after");
    closes.replaceChildren(...Object.entries(channelNames).map(([channel, name]) => {
      const select = element("select", { name: `close-${channel}`, id: `close-${channel}` },
        ...closeChoices.map(([value, label]) => element("option", { value: String(value), textContent: label })));
      return element("div", { className: "field inline" }, element("label", { htmlFor: select.id, textContent: name }), select);
    }));
    const hours = this.form.querySelector(".opening-hours");
    hours.replaceChildren(...weekdays.map((day, index) => {
      const weekday = index + 1;
      const open = element("input", { type: "checkbox", name: `open-${weekday}` });
      const opens = element("input", { type: "time", name: `opens-${weekday}`, value: "09:00" });
      const closesAt = element("input", { type: "time", name: `closes-${weekday}`, value: "17:00" });
      opens.setAttribute("aria-label", `${day} opens`);
      closesAt.setAttribute("aria-label", `${day} closes`);
      return element("div", { className: "day-hours" },
        element("label", { className: "check" }, open, ` ${day}`), opens, element("span", { textContent: "to" }), closesAt);
    }));
    const zones = this.form.querySelector("#time-zones");
    const known = typeof Intl.supportedValuesOf === "function" ? Intl.supportedValuesOf("timeZone") : ["UTC"];
    zones.replaceChildren(...known.map((zone) => element("option", { value: zone })));
  }

  readForm() {
    const data = new FormData(this.form);
    const autoCloseMinutes = {};
    for (const channel of Object.keys(channelNames)) {
      const minutes = data.get(`close-${channel}`);
      if (minutes) autoCloseMinutes[channel] = Number(minutes);
    }
    const businessHours = [];
    for (let weekday = 1; weekday <= 7; weekday++) {
      if (data.get(`open-${weekday}`)) businessHours.push({ weekday, opens: data.get(`opens-${weekday}`), closes: data.get(`closes-${weekday}`) });
    }
    return {
      autoCloseMinutes, warningMinutes: Number(data.get("warningMinutes") || 0), survey: data.get("survey") === "on",
      timeZone: data.get("timeZone").trim() || "UTC", businessHours, defaultLanguage: data.get("defaultLanguage").trim() || "en",
      holidays: data.get("holidays").split(/[\s,]+/).map((day) => day.trim()).filter(Boolean),
    };
  }

  fillForm(settings) {
    const form = this.form.elements;
    for (const channel of Object.keys(channelNames)) {
      const minutes = settings.autoCloseMinutes[channel];
      const select = form[`close-${channel}`];
      // A time set through the API that the list does not offer is shown as it is.
      if (minutes && ![...select.options].some((option) => option.value === String(minutes))) {
        select.append(element("option", { value: String(minutes), textContent: `After ${minutes} minutes` }));
      }
      select.value = minutes ? String(minutes) : "";
    }
    form.warningMinutes.value = settings.warningMinutes ?? 0;
    form.survey.checked = settings.survey;
    form.timeZone.value = settings.timeZone;
    form.defaultLanguage.value = settings.defaultLanguage;
    form.holidays.value = settings.holidays.join("\n");
    for (let weekday = 1; weekday <= 7; weekday++) {
      const span = settings.businessHours.find((hours) => hours.weekday === weekday);
      form[`open-${weekday}`].checked = Boolean(span);
      if (span) { form[`opens-${weekday}`].value = span.opens; form[`closes-${weekday}`].value = span.closes; }
    }
  }

  async render() {
    const [settings, messages] = await Promise.all([this.api.get("/v1/lifecycle"), this.api.get("/v1/automatic-messages")]);
    if (!this.filled) { this.filled = true; this.fillForm(settings); }
    const languages = [...new Set(messages.items.map((message) => message.language))];
    if (this.language && !languages.includes(this.language)) languages.push(this.language);
    this.language ??= settings.defaultLanguage;
    this.languagePicker.replaceChildren(
      ...languages.map((language) => element("option", { value: language, textContent: language })),
      element("option", { value: "+", textContent: "Add a language…" }));
    this.languagePicker.value = this.language;
    const inLanguage = new Map(messages.items.filter((message) => message.language === this.language).map((message) => [message.kind, message]));
    const fallback = new Map(messages.items.filter((message) => message.language === settings.defaultLanguage).map((message) => [message.kind, message]));
    this.messages.replaceChildren(...Object.entries(kindNames).map(([kind, [title, hint]]) => {
      const message = inLanguage.get(kind) ?? { ...fallback.get(kind), isDefault: true };
      const id = `auto-${kind}`;
      const enabled = element("input", { type: "checkbox", checked: message.enabled });
      enabled.setAttribute("aria-label", `Send “${title}”`);
      enabled.addEventListener("change", () => this.request(
        () => this.api.json("PUT", `/v1/automatic-messages/${kind}/${this.language}`, { enabled: enabled.checked }),
        `${enabled.checked ? "Turned on" : "Turned off"} “${title}”.`));
      const text = element("textarea", { id, rows: 2, maxLength: 1000, value: message.text ?? "" });
      text.setAttribute("aria-label", `Text of “${title}” in ${this.language}`);
      const save = AdminList.button("Save", `“${title}” in ${this.language}`, () => this.request(
        () => this.api.json("PUT", `/v1/automatic-messages/${kind}/${this.language}`, { text: text.value }), `Saved “${title}” (${this.language}).`));
      const actions = element("div", { className: "team-actions" }, save);
      if (!message.isDefault) {
        actions.append(AdminList.button("Reset", `“${title}” in ${this.language}`, () => this.request(
          () => this.api.json("DELETE", `/v1/automatic-messages/${kind}/${this.language}`), `“${title}” (${this.language}) is back to the default.`)));
      }
      return element("li", { className: message.enabled ? "" : "off" },
        element("div", { className: "saved-head" },
          element("label", { className: "check" }, enabled, " ", element("strong", { textContent: title })),
          element("span", { className: "tag", textContent: message.isDefault ? "Default text" : "Your text" })),
        element("p", { className: "hint", textContent: hint }), text, actions);
    }));
  }
}
