import { icon, clock } from "./icons.js";

const speeds = [1, 1.5, 2];

/** Peak-preserving resampling of a waveform to `count` bars. */
function resample(levels, count) {
  if (levels.length <= count) return levels;
  return Array.from({ length: count }, (_, bar) => {
    const start = Math.floor((bar * levels.length) / count);
    const end = Math.max(start + 1, Math.floor(((bar + 1) * levels.length) / count));
    return Math.max(...levels.slice(start, end));
  });
}

/**
 * <parley-voice>: a voice note player. Set `.voice` (the API's VoiceDTO, or a local preview with
 * `localURL`) and `.api`. The waveform is the seek bar: click, drag, or use the arrow keys.
 * The rendition is chosen for the browser: Opus where it plays, AAC otherwise, the original while
 * renditions are still being made.
 */
export class VoicePlayer extends HTMLElement {
  set voice(value) { this._voice = value; this.render(); }
  get voice() { return this._voice; }

  connectedCallback() { if (!this.rendered) this.render(); }

  disconnectedCallback() { this.audio?.pause(); }

  get duration() {
    const measured = this.audio && Number.isFinite(this.audio.duration) ? this.audio.duration * 1000 : 0;
    return this._voice?.durationMs || measured;
  }

  render() {
    const voice = this._voice;
    if (!voice) return;
    this.rendered = true;
    // Fewer, wider bars on phones, so each stays visible beside the controls.
    const bars = matchMedia("(max-width: 420px)").matches ? 28 : 64;
    const levels = resample(voice.waveform?.length ? voice.waveform : new Array(bars).fill(90), bars);
    const original = voice.renditions?.find((r) => r.format === "original");
    this.innerHTML = `
      <div class="voice" role="group" aria-label="Voice message, ${clock(voice.durationMs)}">
        <button class="icon-button play" type="button" aria-label="Play voice message">${icon("play")}</button>
        <div class="wave" role="slider" tabindex="0" aria-label="Seek" aria-valuemin="0"
             aria-valuemax="${Math.round(voice.durationMs / 1000)}" aria-valuenow="0" aria-valuetext="0:00 of ${clock(voice.durationMs)}"></div>
        <span class="time" aria-hidden="true">0:00 / ${clock(voice.durationMs)}</span>
        <button class="speed" type="button" aria-label="Playback speed 1 times">1x</button>
        ${original ? `<button class="icon-button download" type="button" aria-label="Download the original recording">${icon("download")}</button>` : ""}
      </div>
      ${voice.state === "failed" ? `<div class="voice-note" role="note">Could not be converted for every device; the original plays here.</div>` : ""}`;
    this.playButton = this.querySelector(".play");
    this.wave = this.querySelector(".wave");
    // Heights through the CSSOM: the pages' Content-Security-Policy refuses inline style attributes.
    for (const level of levels) {
      const bar = document.createElement("span");
      bar.style.height = `${Math.max(12, Math.round((level / 255) * 100))}%`;
      this.wave.append(bar);
    }
    this.time = this.querySelector(".time");
    this.speedButton = this.querySelector(".speed");
    this.playButton.onclick = () => this.toggle();
    this.speedButton.onclick = () => this.cycleSpeed();
    this.querySelector(".download")?.addEventListener("click", () => this.download());
    this.wave.addEventListener("pointerdown", (event) => this.startSeek(event));
    this.wave.addEventListener("keydown", (event) => this.keySeek(event));
    this.dataset.state = "idle";
    this.update();
  }

  /** Which file to play in this browser. */
  source() {
    const voice = this._voice;
    if (voice.localURL) return { url: voice.localURL, local: true };
    const byFormat = Object.fromEntries((voice.renditions ?? []).map((r) => [r.format, r]));
    const probe = document.createElement("audio");
    if (byFormat.opus && probe.canPlayType('audio/ogg; codecs="opus"')) return { url: byFormat.opus.url };
    if (byFormat.aac && probe.canPlayType("audio/mp4")) return { url: byFormat.aac.url };
    return { url: byFormat.original?.url };
  }

  async ensureAudio() {
    if (this.audio) return this.audio;
    this.dataset.state = "loading";
    const { url, local } = this.source();
    const src = local ? url : await this.api.mediaURL(url);
    const audio = new Audio();
    audio.preload = "auto";
    audio.src = src;
    audio.playbackRate = this.speed ?? 1;
    audio.addEventListener("timeupdate", () => this.update());
    audio.addEventListener("play", () => { this.dataset.state = "playing"; this.update(); });
    audio.addEventListener("pause", () => { this.dataset.state = "paused"; this.update(); });
    audio.addEventListener("ended", () => { this.dataset.state = "ended"; audio.currentTime = 0; this.update(); });
    this.audio = audio;
    if (this.pendingSeek !== undefined) { audio.currentTime = this.pendingSeek; this.pendingSeek = undefined; }
    return audio;
  }

  async toggle() {
    try {
      const audio = await this.ensureAudio();
      if (audio.paused) {
        for (const other of document.querySelectorAll("parley-voice")) if (other !== this) other.audio?.pause();
        await audio.play();
      } else {
        audio.pause();
      }
    } catch (error) {
      this.dataset.state = "error";
      this.time.textContent = "Cannot play";
    }
  }

  seekTo(fraction) {
    const seconds = Math.min(1, Math.max(0, fraction)) * (this.duration / 1000);
    if (this.audio) this.audio.currentTime = seconds;
    else this.pendingSeek = seconds;
    this.update(seconds * 1000);
  }

  startSeek(event) {
    event.preventDefault();
    this.wave.setPointerCapture(event.pointerId);
    const move = (e) => {
      const box = this.wave.getBoundingClientRect();
      this.seekTo((e.clientX - box.left) / box.width);
    };
    move(event);
    this.wave.onpointermove = move;
    this.wave.onpointerup = () => { this.wave.onpointermove = null; };
  }

  keySeek(event) {
    const position = this.audio ? this.audio.currentTime * 1000 : (this.pendingSeek ?? 0) * 1000;
    const step = event.key === "ArrowRight" ? 5000 : event.key === "ArrowLeft" ? -5000 : null;
    if (event.key === " " || event.key === "Enter") { event.preventDefault(); this.toggle(); return; }
    if (step === null) return;
    event.preventDefault();
    this.seekTo((position + step) / this.duration);
  }

  cycleSpeed() {
    const next = speeds[(speeds.indexOf(this.speed ?? 1) + 1) % speeds.length];
    this.speed = next;
    if (this.audio) this.audio.playbackRate = next;
    this.speedButton.textContent = `${next}x`;
    this.speedButton.setAttribute("aria-label", `Playback speed ${next} times`);
  }

  async download() {
    const original = this._voice.renditions.find((r) => r.format === "original");
    const url = await this.api.mediaURL(`${original.url}?download=1`);
    const link = document.createElement("a");
    link.href = url;
    link.download = `voice-message.${({ "audio/webm": "webm", "audio/ogg": "ogg", "audio/mp4": "m4a", "audio/mpeg": "mp3", "audio/wav": "wav" })[original.contentType] ?? "audio"}`;
    document.body.append(link);
    link.click();
    link.remove();
  }

  update(positionMs) {
    const total = this.duration;
    const position = positionMs ?? (this.audio ? this.audio.currentTime * 1000 : 0);
    const playing = this.audio && !this.audio.paused;
    this.playButton.innerHTML = icon(playing ? "pause" : "play");
    this.playButton.setAttribute("aria-label", playing ? "Pause voice message" : "Play voice message");
    this.time.textContent = `${clock(position)} / ${clock(total)}`;
    const fraction = total ? position / total : 0;
    const bars = this.wave.children;
    for (let index = 0; index < bars.length; index++) bars[index].classList.toggle("played", (index + 0.5) / bars.length <= fraction);
    this.wave.setAttribute("aria-valuenow", String(Math.round(position / 1000)));
    this.wave.setAttribute("aria-valuetext", `${clock(position)} of ${clock(total)}`);
  }
}
customElements.define("parley-voice", VoicePlayer);
