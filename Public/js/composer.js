import { icon } from "./icons.js";

// The composer the widget and the workspace share: Enter sends (Shift+Enter is a new line), the text
// box grows with its text, focus comes back to it after sending or recording, typing is reported, and a text or voice note shows at once as a pending bubble, goes out with its client
// message id, and on failure offers "retry" with the same id, so that a retry is never stored twice.
// Messages go out one at a time in the order they were written. When the network is down, they wait ("Waiting for the connection…") and go out, with
// the same ids, when the page calls `flush()` (its connection is back); a refusal by the server
// (an answer with an error code) is final and offers "retry" instead.
// The page says how to send (over which route or socket) and what to do with the stored message.

/** What the connection indicator says for each state of a Realtime connection. */
export const connectionStatusText = { connecting: "Connecting…", online: "Online", offline: "Offline – retrying" };

/** What the file picker offers for each of the brand's attachment groups. */
const acceptedFiles = {
  images: "image/jpeg,image/png,image/gif,image/webp,image/heic,.heic", pdf: "application/pdf,.pdf", text: "text/plain,.txt,.csv",
  office: ".doc,.docx,.xls,.xlsx,.ppt,.pptx",
};

/** The paperclip offers what the brand accepts (`attachmentGroups`), or goes when it accepts nothing. */
export function configureAttachments(form, groups = []) {
  form.querySelector(".attach-input")?.setAttribute("accept", groups.map((group) => acceptedFiles[group]).join(","));
  const button = form.querySelector(".attach");
  if (button) button.hidden = groups.length === 0;
}

export class Composer {
  /**
   * @param form the composer's <form>; @param textarea its text box; @param recorder its <parley-recorder>
   * @param timeline () => the Timeline the pending bubbles go to
   * @param ready () => whether there is somewhere to send to (default: always)
   * @param sendText (text, clientMessageId) => Promise of a SendMessageResponse
   * @param sendVoice (blob, clientMessageId, onProgress) => Promise of a SendMessageResponse
   * @param sendFile (file, clientMessageId, onProgress) => Promise of a SendMessageResponse (absent: no attachments)
   * @param sent (response, clientMessageId) => the page takes in what was stored
   * @param typing (isTyping) => the page reports typing
   */
  constructor({ form, textarea, recorder, timeline, ready = () => true, sendText, sendVoice, sendFile, sent, typing }) {
    Object.assign(this, { form, textarea, timeline, ready, sendText, sendVoice, sendFile, sent });
    // Attachments: the paperclip's file picker, or an image pasted into the text box.
    const input = form.querySelector(".attach-input");
    const button = form.querySelector(".attach");
    if (button && input && sendFile) {
      button.innerHTML = icon("paperclip");
      button.addEventListener("click", () => input.click());
      input.addEventListener("change", () => {
        for (const file of input.files) if (ready()) this.file(file);
        input.value = "";
        textarea.focus();
      });
      textarea.addEventListener("paste", (event) => {
        const files = [...(event.clipboardData?.files ?? [])];
        if (!files.length || !ready()) return;
        event.preventDefault();
        for (const file of files) this.file(file);
      });
    } else {
      button?.remove();
    }
    /** What is still to go out, oldest first: the first is on its way unless `stalled`. */
    this.queue = [];
    /** The network failed: the queue waits for `flush()` (the page's connection is back). */
    this.stalled = false;
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

  /** A text message: shown at once, sent after everything written before it. */
  text(body, clientMessageId = crypto.randomUUID()) {
    const show = (state, extra) => this.timeline().pending({ clientMessageId, kind: "text", text: body, state, ...extra });
    this.enqueue({ clientMessageId, show, start: () => show("sending"), run: () => this.sendText(body, clientMessageId),
      retry: () => this.text(body, clientMessageId) });
  }

  /** An image or a file, shown at once as a pending bubble with its upload's progress. */
  file(file, clientMessageId = crypto.randomUUID()) {
    const show = (state, extra) => this.timeline().pending({ clientMessageId, kind: "attachment", text: file.name || "Image", state, ...extra });
    this.enqueue({ clientMessageId, show, start: () => show("uploading", { progress: 0 }),
      run: () => this.sendFile(file, clientMessageId, (progress) => show("uploading", { progress })),
      retry: () => this.file(file, clientMessageId) });
  }

  /** The recording stays in memory until it is stored: "retry" sends it again without re-recording. */
  voice(blob, durationMs, clientMessageId = crypto.randomUUID()) {
    const show = (state, extra) => this.timeline().pending({ clientMessageId, kind: "voice", durationMs, state, ...extra });
    this.enqueue({ clientMessageId, show, start: () => show("uploading", { progress: 0 }),
      run: () => this.sendVoice(blob, clientMessageId, (progress) => show("uploading", { progress })),
      retry: () => this.voice(blob, durationMs, clientMessageId) });
  }

  /** Everything goes out in the order it was written, one at a time: a message typed while an older
   * one is on its way (or waits for the network) goes after it, never beside it. */
  enqueue(job) {
    this.queue.push(job);
    job.show(this.stalled ? "queued" : "sending");
    this.pump();
  }

  /** The connection is back: what waited goes out, in order, stopping again at the first that cannot. */
  flush() {
    this.stalled = false;
    return this.pump();
  }

  async pump() {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length && !this.stalled) {
        const job = this.queue[0];
        job.start();
        try {
          this.sent(await job.run(), job.clientMessageId);
        } catch (error) {
          if (!error.code) {
            // No answer: the network. This one and everything after it wait, with the same ids.
            this.stalled = true;
            for (const waiting of this.queue) waiting.show("queued");
            break;
          }
          // An answer with an error code (or an upload the network cut): final, with "retry".
          job.show("failed", { error: error.message, onRetry: job.retry });
        }
        this.queue.shift();
      }
    } finally {
      this.pumping = false;
    }
  }
}
