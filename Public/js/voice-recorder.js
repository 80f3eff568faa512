import { icon, clock } from "./icons.js";
import "./voice-player.js";

/**
 * <parley-recorder max-seconds="120" min-seconds="1">: tap the microphone to record; pause and
 * resume; stop to preview; trash to discard; send. A recording shorter than `min-seconds` (an
 * accidental tap) is not offered for sending: the recorder says so. Emits `recorder-active` (detail:
 * true while it has the composer) and `voice-send` (detail: { blob, durationMs }).
 */
export class VoiceRecorder extends HTMLElement {
  connectedCallback() { if (!this.state) this.idle(); }

  get maxMs() { return Number(this.getAttribute("max-seconds") || 120) * 1000; }
  get minMs() { return Number(this.getAttribute("min-seconds") ?? 1) * 1000; }

  setActive(active) {
    this.dispatchEvent(new CustomEvent("recorder-active", { detail: active, bubbles: true }));
  }

  announce(message) { this.live.textContent = message; }

  idle(error) {
    this.state = "idle";
    this.cleanup();
    this.innerHTML = `
      <button class="icon-button mic" type="button" aria-label="Record a voice message">${icon("mic")}</button>
      <span class="sr-only" role="status" aria-live="polite"></span>`;
    this.live = this.querySelector("[role=status]");
    this.querySelector(".mic").onclick = () => this.start();
    this.setActive(Boolean(error));
    if (error) {
      this.innerHTML = `
        <div class="recorder" data-state="error">
          <span class="error-text" role="alert">${error}</span>
          <button class="icon-button" type="button" aria-label="Dismiss">${icon("close")}</button>
        </div><span class="sr-only" role="status" aria-live="polite"></span>`;
      this.live = this.querySelector("[role=status]");
      this.querySelector("button").onclick = () => this.idle();
    }
  }

  async start() {
    if (!navigator.mediaDevices?.getUserMedia || typeof MediaRecorder === "undefined") {
      this.idle("This browser cannot record audio.");
      return;
    }
    try {
      this.stream = await navigator.mediaDevices.getUserMedia({ audio: true });
    } catch (error) {
      this.idle(error.name === "NotAllowedError" || error.name === "SecurityError"
        ? "Microphone access was denied. Allow it in the browser's site settings to send voice messages."
        : error.name === "NotFoundError" ? "No microphone was found on this device." : "The microphone could not be started.");
      return;
    }
    const type = ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/mp4", "audio/webm"].find((t) => MediaRecorder.isTypeSupported(t));
    this.recorder = new MediaRecorder(this.stream, type ? { mimeType: type } : undefined);
    this.chunks = [];
    this.recorder.ondataavailable = (event) => event.data.size && this.chunks.push(event.data);
    this.elapsed = 0;
    this.resumedAt = performance.now();
    this.recorder.start(250);
    this.state = "recording";
    this.renderRecording();
    this.setActive(true);
    this.meter();
    this.ticker = setInterval(() => this.tick(), 200);
    this.announce("Recording started");
  }

  get recordedMs() {
    return this.elapsed + (this.state === "recording" ? performance.now() - this.resumedAt : 0);
  }

  renderRecording() {
    this.innerHTML = `
      <div class="recorder" data-state="${this.state}">
        <span class="dot" aria-hidden="true"></span>
        <span class="timer"><span class="now">0:00</span> <span class="limit">/ ${clock(this.maxMs)}</span></span>
        <span class="level" aria-hidden="true"><i></i></span>
        <button class="icon-button trash danger" type="button" aria-label="Discard recording">${icon("trash")}</button>
        <button class="icon-button pause" type="button" aria-label="Pause recording">${icon("pause")}</button>
        <button class="icon-button primary stop" type="button" aria-label="Stop and preview">${icon("stop")}</button>
      </div>
      <span class="sr-only" role="status" aria-live="polite"></span>`;
    this.live = this.querySelector("[role=status]");
    this.querySelector(".trash").onclick = () => { this.idle(); this.announce("Recording discarded"); };
    this.querySelector(".pause").onclick = () => this.togglePause();
    this.querySelector(".stop").onclick = () => this.stop();
    this.tick();
  }

  togglePause() {
    const box = this.querySelector(".recorder");
    const button = this.querySelector(".pause");
    if (this.state === "recording") {
      this.elapsed += performance.now() - this.resumedAt;
      this.recorder.pause();
      this.state = "paused";
      button.innerHTML = icon("mic");
      button.setAttribute("aria-label", "Resume recording");
      this.announce(`Recording paused at ${clock(this.recordedMs)}`);
    } else {
      this.resumedAt = performance.now();
      this.recorder.resume();
      this.state = "recording";
      button.innerHTML = icon("pause");
      button.setAttribute("aria-label", "Pause recording");
      this.announce(`Recording ${clock(this.recordedMs)}`);
    }
    box.dataset.state = this.state;
  }

  tick() {
    const now = this.querySelector(".now");
    if (now) now.textContent = clock(this.recordedMs);
    const seconds = Math.floor(this.recordedMs / 1000);
    if (this.state === "recording" && seconds > 0 && seconds % 10 === 0 && seconds !== this.lastAnnounced) {
      this.lastAnnounced = seconds;
      this.announce(`Recording ${clock(this.recordedMs)}`);
    }
    if (this.recordedMs >= this.maxMs && this.state === "recording") this.stop();
  }

  meter() {
    try {
      this.context = new AudioContext();
      const analyser = this.context.createAnalyser();
      analyser.fftSize = 512;
      this.context.createMediaStreamSource(this.stream).connect(analyser);
      const data = new Uint8Array(analyser.fftSize);
      const draw = () => {
        if (!this.context) return;
        analyser.getByteTimeDomainData(data);
        let peak = 0;
        for (const value of data) peak = Math.max(peak, Math.abs(value - 128));
        const bar = this.querySelector(".level i");
        if (bar) bar.style.width = `${Math.min(100, (peak / 128) * 180)}%`;
        this.frame = requestAnimationFrame(draw);
      };
      draw();
    } catch {}
  }

  async stop() {
    if (this.state === "recording") this.elapsed += performance.now() - this.resumedAt;
    this.state = "stopping";
    const stopped = new Promise((resolve) => { this.recorder.onstop = resolve; });
    this.recorder.stop();
    await stopped;
    const durationMs = Math.round(this.elapsed);
    const blob = new Blob(this.chunks, { type: this.recorder.mimeType || "audio/webm" });
    this.cleanup();
    if (durationMs < this.minMs) {
      const seconds = this.minMs / 1000;
      this.idle(`Too short to send: hold on for at least ${seconds === 1 ? "1 second" : `${seconds} seconds`}.`);
      return;
    }
    this.preview(blob, durationMs);
  }

  preview(blob, durationMs) {
    this.state = "preview";
    const url = URL.createObjectURL(blob);
    this.innerHTML = `
      <div class="recorder" data-state="preview">
        <button class="icon-button trash danger" type="button" aria-label="Discard recording">${icon("trash")}</button>
        <parley-voice class="preview"></parley-voice>
        <button class="icon-button primary send" type="button" aria-label="Send voice message">${icon("send")}</button>
      </div>
      <span class="sr-only" role="status" aria-live="polite"></span>`;
    this.live = this.querySelector("[role=status]");
    this.announce(`Recorded ${clock(durationMs)}. Play to listen, then send or discard.`);
    const player = this.querySelector("parley-voice");
    player.voice = { durationMs, waveform: [], state: "ready", renditions: [], localURL: url };
    this.querySelector(".trash").onclick = () => { URL.revokeObjectURL(url); this.idle(); this.announce("Recording discarded"); };
    this.querySelector(".send").onclick = () => {
      this.dispatchEvent(new CustomEvent("voice-send", { detail: { blob, durationMs }, bubbles: true }));
      this.idle();
    };
  }

  cleanup() {
    clearInterval(this.ticker);
    cancelAnimationFrame(this.frame);
    this.context?.close().catch(() => {});
    this.context = null;
    this.stream?.getTracks().forEach((track) => track.stop());
    this.stream = null;
  }
}
customElements.define("parley-recorder", VoiceRecorder);
