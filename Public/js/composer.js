// The composer the widget and the workspace share: Enter sends (Shift+Enter is a new line), the text
// box grows with its text, focus comes back to it after sending or recording, typing is reported, and a text or voice note shows at once as a pending bubble, goes out with its client
// message id, and on failure offers "retry" with the same id, so that a retry is never stored twice.
// The page says how to send (over which route or socket) and what to do with the stored message.

/** What the connection indicator says for each state of a Realtime connection. */
export const connectionStatusText = { connecting: "Connecting…", online: "Online", offline: "Offline – retrying" };

export class Composer {
  /**
   * @param form the composer's <form>; @param textarea its text box; @param recorder its <parley-recorder>
   * @param timeline () => the Timeline the pending bubbles go to
   * @param ready () => whether there is somewhere to send to (default: always)
   * @param sendText (text, clientMessageId) => Promise of a SendMessageResponse
   * @param sendVoice (blob, clientMessageId, onProgress) => Promise of a SendMessageResponse
   * @param sent (response, clientMessageId) => the page takes in what was stored
   * @param typing (isTyping) => the page reports typing
   */
  constructor({ form, textarea, recorder, timeline, ready = () => true, sendText, sendVoice, sent, typing }) {
    Object.assign(this, { form, textarea, timeline, ready, sendText, sendVoice, sent });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const body = textarea.value;
      if (!body.trim() || !ready()) return;
      textarea.value = "";
      this.fit();
      textarea.focus();
      this.text(body);
    });
    textarea.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); form.requestSubmit(); }
    });
    textarea.addEventListener("input", () => {
      this.fit();
      if (ready()) typing?.(textarea.value.length > 0);
    });
    recorder?.addEventListener("recorder-active", (event) => {
      form.classList.toggle("recording", event.detail);
      // Back to typing once a recording is sent or discarded (its buttons are gone by then).
      const lost = () => document.activeElement === document.body || form.contains(document.activeElement);
      if (!event.detail) requestAnimationFrame(() => { if (lost()) textarea.focus(); });
    });
    recorder?.addEventListener("voice-send", (event) => this.voice(event.detail.blob, event.detail.durationMs));
  }

  /** The text box grows with its text up to a limit, then scrolls. */
  fit() {
    const box = this.textarea;
    box.style.height = "auto";
    const borders = box.offsetHeight - box.clientHeight;
    if (box.value) box.style.height = `${Math.min(box.scrollHeight + borders, Composer.maxHeight)}px`;
  }

  /** The CSS max-height of `.composer textarea`. */
  static maxHeight = 140;

  async text(body, clientMessageId = crypto.randomUUID()) {
    const timeline = this.timeline();
    timeline.pending({ clientMessageId, kind: "text", text: body, state: "sending" });
    try {
      this.sent(await this.sendText(body, clientMessageId), clientMessageId);
    } catch (error) {
      timeline.pending({
        clientMessageId, kind: "text", text: body, state: "failed", error: error.message,
        onRetry: () => this.text(body, clientMessageId),
      });
    }
  }

  /** The recording stays in memory until it is stored: "retry" sends it again without re-recording. */
  async voice(blob, durationMs, clientMessageId = crypto.randomUUID()) {
    const timeline = this.timeline();
    const pending = (state, extra) => timeline.pending({ clientMessageId, kind: "voice", durationMs, state, ...extra });
    pending("uploading", { progress: 0 });
    try {
      this.sent(await this.sendVoice(blob, clientMessageId, (progress) => pending("uploading", { progress })), clientMessageId);
    } catch (error) {
      pending("failed", { error: error.message, onRetry: () => this.voice(blob, durationMs, clientMessageId) });
    }
  }
}
