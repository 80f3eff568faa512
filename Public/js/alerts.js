// How the workspace gets an agent's attention: a short chime and, once the agent has allowed it, a
// desktop notification, for a new conversation or a customer's message in a conversation assigned
// to them, unless they are looking at it. The chime is synthesised (Web Audio), not a sound file.

export class Alerts {
  constructor({ button, onOpen }) {
    this.button = button;
    this.onOpen = onOpen;
    this.render();
    // Browsers ask for notification permission only from a click.
    button.addEventListener("click", async () => {
      if (!("Notification" in window)) return;
      await Notification.requestPermission();
      this.render();
    });
  }

  get permission() { return "Notification" in window ? Notification.permission : "unsupported"; }

  render() {
    const allowed = this.permission === "granted";
    this.button.hidden = this.permission === "unsupported";
    this.button.setAttribute("aria-pressed", String(allowed));
    const label = allowed ? "Desktop notifications are on" : this.permission === "denied"
      ? "Desktop notifications are blocked in this browser's settings" : "Turn on desktop notifications";
    this.button.setAttribute("aria-label", label);
    this.button.title = label;
    this.button.disabled = this.permission === "denied";
  }

  /** Something new for this agent: `title` and `body` describe it; `conversationId` is opened on a click. */
  notify({ title, body, conversationId }) {
    this.chime();
    if (this.permission !== "granted" || document.visibilityState === "visible") return;
    const notification = new Notification(title, { body, tag: conversationId });
    notification.onclick = () => {
      window.focus();
      this.onOpen(conversationId);
      notification.close();
    };
  }

  /** Two soft notes, about a third of a second. */
  chime() {
    try {
      this.audio ??= new AudioContext();
      const audio = this.audio;
      if (audio.state === "suspended") audio.resume().catch(() => {});
      const now = audio.currentTime;
      for (const [offset, frequency] of [[0, 880], [0.12, 1320]]) {
        const tone = audio.createOscillator();
        const volume = audio.createGain();
        tone.frequency.value = frequency;
        volume.gain.setValueAtTime(0.0001, now + offset);
        volume.gain.exponentialRampToValueAtTime(0.15, now + offset + 0.02);
        volume.gain.exponentialRampToValueAtTime(0.0001, now + offset + 0.2);
        tone.connect(volume).connect(audio.destination);
        tone.start(now + offset);
        tone.stop(now + offset + 0.22);
      }
    } catch {
      // No audio output: the list and the title still show what is new.
    }
  }
}
