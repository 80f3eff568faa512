// The widget's offer to notify the consumer of replies while they are away: Web Push through a
// service worker (/sw.js), subscribed with the server's VAPID key and registered with Parley.
// Offered once the consumer has written, and only where the browser can do it.

const base64UrlToBytes = (text) => {
  const padded = (text + "=".repeat((4 - (text.length % 4)) % 4)).replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(padded), (char) => char.charCodeAt(0));
};

export class NotifyOffer {
  constructor({ element, api }) {
    this.element = element;
    this.api = api;
    this.text = element.querySelector(".notify-text");
    this.button = element.querySelector("button");
    this.button.addEventListener("click", () => this.subscribe());
  }

  /** Shows the offer after the consumer's first message, unless it was answered before. */
  async maybeOffer() {
    if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) return;
    // Browsers refuse notifications to pages framed on another site (the embedded widget).
    if (window.parent !== window) return;
    if (Notification.permission === "denied" || localStorage.getItem("parley.notify") === "done") return;
    const registration = await navigator.serviceWorker.getRegistration("/");
    if (registration && await registration.pushManager.getSubscription()) return;
    this.element.hidden = false;
  }

  async subscribe() {
    this.button.disabled = true;
    try {
      if (Notification.permission !== "granted" && await Notification.requestPermission() !== "granted") {
        this.done("Notifications are off: you'll see replies here when you come back.");
        return;
      }
      const registration = await navigator.serviceWorker.register("/sw.js", { scope: "/" });
      await navigator.serviceWorker.ready;
      const { publicKey } = await this.api.get("/v1/push/web-key");
      const subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: base64UrlToBytes(publicKey) });
      const { endpoint, keys } = subscription.toJSON();
      await this.api.post("/v1/consumer/push", { provider: "webpush", token: endpoint, keys });
      this.done("We'll notify you when we reply.");
    } catch {
      this.done("This browser can't show notifications from this chat: you'll see replies here.");
    }
  }

  done(sentence) {
    localStorage.setItem("parley.notify", "done");
    this.text.textContent = sentence;
    this.button.hidden = true;
    setTimeout(() => { this.element.hidden = true; }, 6000);
  }
}
