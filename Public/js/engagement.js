// What the customer did in the brand's app (ParleyKit's report), in the details pane, and the
// brand's engagement rules in the account dialog (admins).

import { AdminList } from "./admin-list.js";

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });

/** "3 min ago", "yesterday": how long ago an event happened. */
export function ago(date, now = Date.now()) {
  const seconds = Math.round((date - now) / 1000);
  const steps = [[60, "second"], [3600, "minute"], [86400, "hour"], [604800, "day"], [Infinity, "week"]];
  let previous = 1;
  for (const [limit, unit] of steps) {
    if (Math.abs(seconds) < limit) return relative.format(Math.round(seconds / previous), unit);
    previous = limit;
  }
  return relative.format(Math.round(seconds / 604800), "week");
}

/** "Viewed checkout", "Cart: 129.9 EUR", or the brand's own event with its properties. */
export function describe(event) {
  const properties = event.properties ?? {};
  if (event.name === "screen_view" && properties.screen !== undefined) return `Viewed ${properties.screen}`;
  if (event.name === "cart_value" && properties.value !== undefined) return `Cart: ${properties.value}${properties.currency ? ` ${properties.currency}` : ""}`;
  const details = Object.entries(properties).map(([key, value]) => `${key}: ${value}`).join(", ");
  return details ? `${event.name.replaceAll("_", " ")} (${details})` : event.name.replaceAll("_", " ");
}

/** The customer's most recent events, newest first, into `list`; "None yet" without any. */
export async function renderActivity(api, list, consumerId, isCurrent) {
  const page = await api.get(`/v1/consumers/${consumerId}/activity?limit=15`).catch(() => ({ items: [] }));
  if (!isCurrent()) return;
  if (!page.items.length) {
    list.replaceChildren(Object.assign(document.createElement("li"), {
      className: "empty", textContent: "Nothing reported: activity comes from the brand's app (ParleyKit)." }));
    return;
  }
  list.replaceChildren(...page.items.map((event) => {
    const item = document.createElement("li");
    const when = new Date(event.occurredAt);
    const time = Object.assign(document.createElement("time"), { dateTime: event.occurredAt, textContent: ago(when), title: when.toLocaleString() });
    item.append(Object.assign(document.createElement("span"), { className: "what", textContent: describe(event) }), time);
    return item;
  }));
}

/** Admins' list of engagement rules: add, pause or resume, delete. */
export class EngagementAdmin extends AdminList {
  constructor({ section, api }) {
    super({ section, api, note: ".rule-note" });
    this.list = section.querySelector(".rule-list");
    this.form = section.querySelector(".rule-form");
    const comparison = this.form.elements.comparison;
    const toggle = () => { this.form.querySelector(".rule-condition").hidden = comparison.value === "none"; };
    comparison.addEventListener("change", toggle);
    toggle();
    this.form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(this.form);
      const rule = {
        name: data.get("name").trim(), event: data.get("event").trim(), action: data.get("action"), text: data.get("text"),
        cooldownHours: Number(data.get("cooldownHours")),
      };
      if (data.get("comparison") !== "none") {
        Object.assign(rule, { property: data.get("property").trim(), comparison: data.get("comparison"), value: data.get("value").trim() });
      }
      // Emptied as soon as the rule exists, before the note says so: the next rule starts afresh.
      await this.request(async () => {
        await this.api.post("/v1/engagement-rules", rule);
        this.form.reset();
        toggle();
      }, `Added “${rule.name}”.`);
    });
  }

  static when(rule) {
    const comparison = rule.comparison === "at_least" ? "is at least" : "is";
    const condition = rule.property ? ` where ${rule.property} ${comparison} ${rule.value}` : "";
    return `When the app reports ${rule.event}${condition}`;
  }

  async render() {
    const rules = (await this.api.get("/v1/engagement-rules")).items;
    this.list.replaceChildren(...rules.map((rule) => {
      const item = document.createElement("li");
      item.dataset.rule = rule.id;
      item.classList.toggle("paused", !rule.enabled);
      const head = document.createElement("div");
      head.className = "saved-head";
      head.append(Object.assign(document.createElement("strong"), { textContent: rule.name }));
      const actions = document.createElement("div");
      actions.className = "team-actions";
      const button = (label, handler) => AdminList.button(label, `“${rule.name}”`, handler);
      actions.append(
        button(rule.enabled ? "Pause" : "Resume", () => this.request(
          () => this.api.json("PATCH", `/v1/engagement-rules/${rule.id}`, { enabled: !rule.enabled }),
          `${rule.enabled ? "Paused" : "Resumed"} “${rule.name}”.`)),
        button("Delete", () => {
          if (confirm(`Delete “${rule.name}”?`)) this.request(() => this.api.json("DELETE", `/v1/engagement-rules/${rule.id}`), `Deleted “${rule.name}”.`);
        }));
      head.append(actions);
      const when = Object.assign(document.createElement("p"), { className: "saved-text", textContent: EngagementAdmin.when(rule) });
      const then = Object.assign(document.createElement("p"), { className: "saved-text rule-then" });
      then.append(
        Object.assign(document.createElement("span"), { className: "tag", textContent: rule.action === "message" ? "Automatic message" : "Prompt in the app" }),
        ` ${rule.text}`);
      const meta = Object.assign(document.createElement("p"), {
        className: "saved-text", textContent: `At most once per customer every ${rule.cooldownHours} h${rule.enabled ? "" : " · paused"}` });
      item.append(head, when, then, meta);
      return item;
    }));
    if (!rules.length) {
      this.list.replaceChildren(Object.assign(document.createElement("li"), { className: "empty", textContent: "No rules yet." }));
    }
  }
}
