// The agent's presence: a menu in the top bar (online / away / offline), and "away" by itself after
// the brand's idle time without a key, a click or a touch in the workspace; back to online on the
// next activity when it was the timer that set away. Timers read Date.now(), so a test can move the
// page's clock instead of waiting.
//
// Idle means idle everywhere the agent works, not in this tab: activity in another tab of the same
// browser reaches this one over a BroadcastChannel, and presence turning online from elsewhere (the
// agent's other device) counts as activity too. Without that, a forgotten tab set its busy agent
// away every 15 s, and their conversations went back to the queue after the brand's grace period.
export const presenceLabels = { online: "Online", away: "Away", offline: "Offline" };
const hints = { online: "You get new conversations", away: "Customers see that you are away", offline: "Appear offline" };

export class PresenceControl extends EventTarget {
  constructor({ root, api, idleMinutes }) {
    super();
    this.api = api;
    this.button = root.querySelector(".presence-button");
    this.menu = root.querySelector(".presence-menu");
    this.idleMs = idleMinutes > 0 ? idleMinutes * 60_000 : 0;
    this.lastActivity = Date.now();
    this.lastShared = 0;
    this.current = { chosen: "online", automatic: false };
    // Other tabs of this workspace in this browser: a message means "the agent did something there".
    this.channel = typeof BroadcastChannel === "function" ? new BroadcastChannel("parley-agent-activity") : null;
    this.channel?.addEventListener("message", () => { this.lastActivity = Date.now(); });
    this.menu.replaceChildren(...Object.keys(presenceLabels).map((presence) => {
      const item = document.createElement("button");
      item.type = "button";
      item.setAttribute("role", "menuitemradio");
      item.dataset.presence = presence;
      const dot = Object.assign(document.createElement("span"), { className: "dot" });
      dot.setAttribute("aria-hidden", "true");
      const label = Object.assign(document.createElement("span"), { className: "label", textContent: presenceLabels[presence] });
      const hint = Object.assign(document.createElement("small"), { textContent: hints[presence] });
      item.append(dot, label, hint);
      item.addEventListener("click", () => { this.close(); this.set(presence, false); this.button.focus(); });
      return item;
    }));
    this.button.addEventListener("click", () => (this.menu.hidden ? this.openMenu() : this.close()));
    this.menu.addEventListener("keydown", (event) => {
      const items = [...this.menu.querySelectorAll("button")];
      const index = items.indexOf(document.activeElement);
      if (event.key === "ArrowDown" || event.key === "ArrowUp") {
        event.preventDefault();
        items[(index + (event.key === "ArrowDown" ? 1 : items.length - 1)) % items.length].focus();
      } else if (event.key === "Escape") {
        event.preventDefault();
        this.close();
        this.button.focus();
      }
    });
    document.addEventListener("click", (event) => { if (!this.menu.hidden && !root.contains(event.target)) this.close(); });
    for (const name of ["keydown", "pointerdown", "touchstart", "wheel"]) {
      document.addEventListener(name, () => this.activity(), { passive: true, capture: true });
    }
    document.addEventListener("visibilitychange", () => { if (document.visibilityState === "visible") this.activity(); });
    if (this.idleMs) setInterval(() => this.checkIdle(), 15_000);
  }

  /** Shows a presence as the server reported it (mine, from GET /v1/presence or a presence frame). */
  show(presence) {
    // Online again, set here or by the agent elsewhere: someone is at work, so the idle time starts
    // over (a tab that set away does not set it again 15 s after the agent came back on another device).
    if (presence.chosen === "online" && this.current.chosen !== "online") this.lastActivity = Date.now();
    this.current = presence;
    const shown = presence.chosen;
    this.button.dataset.presence = shown;
    this.button.querySelector(".presence-label").textContent = presenceLabels[shown] + (presence.automatic ? " (idle)" : "");
    this.button.setAttribute("aria-label", `Your status: ${presenceLabels[shown]}${presence.automatic ? ", set by the idle timer" : ""}. Change`);
    for (const item of this.menu.querySelectorAll("button")) item.setAttribute("aria-checked", String(item.dataset.presence === shown));
  }

  async set(presence, automatic) {
    try {
      const updated = await this.api.json("PUT", "/v1/me/presence", automatic ? { presence, automatic } : { presence });
      this.show(updated);
      this.dispatchEvent(new CustomEvent("change", { detail: updated }));
    } catch {
      // The server is unreachable; the next activity or choice tries again.
    }
  }

  openMenu() {
    this.menu.hidden = false;
    this.button.setAttribute("aria-expanded", "true");
    (this.menu.querySelector('[aria-checked="true"]') ?? this.menu.querySelector("button")).focus();
  }

  close() {
    this.menu.hidden = true;
    this.button.setAttribute("aria-expanded", "false");
  }

  activity() {
    this.lastActivity = Date.now();
    // At most one message every 5 s: pointer and wheel events come by the dozen.
    if (this.channel && this.lastActivity - this.lastShared >= 5_000) {
      this.lastShared = this.lastActivity;
      this.channel.postMessage("activity");
    }
    if (this.current.automatic && this.current.chosen === "away") {
      this.current = { ...this.current, automatic: false, chosen: "online" };
      this.set("online", false);
    }
  }

  checkIdle() {
    if (!this.idleMs || this.current.chosen !== "online") return;
    if (Date.now() - this.lastActivity >= this.idleMs) {
      this.current = { ...this.current, automatic: true, chosen: "away" };
      this.set("away", true);
    }
  }
}
