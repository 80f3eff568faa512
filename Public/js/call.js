import { icon, clock } from "./icons.js";

// Voice and video calls over WebRTC, for the agent workspace and the consumer widget.
//
// Signalling goes through the page's real-time connection (call.* frames); the server relays it
// to the other side only. Negotiation follows WebRTC's "perfect negotiation" pattern: the agent is
// the impolite peer (its offer wins a collision), the consumer the polite one.

const outcomeTitle = {
  completed: "Call ended",
  rejected: "Call declined",
  missed: "No answer",
  cancelled: "Call cancelled",
  failed: "Call failed",
};
const reasonText = {
  ice_failed: "The connection could not be set up.",
  media_unavailable: "A microphone or camera could not be opened.",
  connect_timeout: "The connection took too long.",
  agent_disconnected: "The agent's connection was lost.",
  consumer_disconnected: "The customer's connection was lost.",
  server_shutdown: "The service restarted.",
};

/** How a call record reads in a timeline: "Video call · 1:23", "Missed voice call", ... */
export function describeCall(call, perspective) {
  const kind = call.media === "video" ? "video call" : "voice call";
  const Kind = kind[0].toUpperCase() + kind.slice(1);
  const duration = clock((call.durationSeconds ?? 0) * 1000);
  switch (call.outcome) {
    case "completed": return { title: `${Kind} · ${duration}`, detail: "" };
    case "rejected": return { title: `Declined ${kind}`, detail: "" };
    case "missed": return { title: perspective === "consumer" ? `Missed ${kind}` : `Unanswered ${kind}`, detail: "" };
    case "cancelled": return { title: `Cancelled ${kind}`, detail: call.endReason === "cancelled" ? "" : (reasonText[call.endReason] ?? "") };
    case "failed": return { title: call.connectedAt ? `${Kind} · ${duration}` : `${Kind} failed`, detail: reasonText[call.endReason] ?? "" };
    default: return { title: Kind, detail: "" };
  }
}

function element(tag, className, attributes = {}) {
  return Object.assign(document.createElement(tag), { className, ...attributes });
}

function iconButton(className, name, label) {
  const button = element("button", `icon-button call-button ${className}`, { type: "button" });
  button.innerHTML = icon(name);
  button.setAttribute("aria-label", label);
  button.title = label;
  return button;
}

export class Calls extends EventTarget {
  /**
   * @param realtime the page's Realtime connection
   * @param api the page's Api (agents start calls over HTTP)
   * @param role "agent" or "consumer"
   * @param root the element the call UI is shown in
   */
  constructor({ realtime, api, role, root }) {
    super();
    this.realtime = realtime;
    this.api = api;
    this.role = role;
    this.polite = role === "consumer";
    this.root = root;
    this.call = null;
    this.peerName = "";
    this.incoming = null;
    this.build();
    realtime.addEventListener("frame", (event) => this.onFrame(event.detail));
  }

  get busy() { return Boolean(this.call && this.call.state !== "ended") || Boolean(this.incoming); }

  static get supported() { return Boolean(window.isSecureContext && navigator.mediaDevices && window.RTCPeerConnection); }

  static get unsupportedReason() {
    if (!window.isSecureContext) return "Calls need a secure (HTTPS) connection.";
    return "This browser cannot make calls.";
  }

  // MARK: Starting, answering, ending

  /** The agent calls the consumer of `conversationId`. */
  async start(conversationId, media, peerName) {
    if (this.busy) return;
    this.reset();
    this.peerName = peerName;
    this.call = { id: null, state: "starting", media, videoAllowed: media === "video", version: 0 };
    this.render();
    try {
      await this.openMedia(media === "video");
      const response = await this.api.post(`/v1/conversations/${conversationId}/calls`, { media, connectionId: this.realtime.connectionId });
      this.ice = response.ice;
      this.adopt(response.call);
    } catch (error) {
      this.fail(error.code === "NotAllowedError" || error.name === "NotAllowedError"
        ? "Allow the microphone and camera to make calls." : error.message);
    }
  }

  /** The consumer answers the ringing call on this device. */
  async accept() {
    const call = this.incoming;
    if (!call) return;
    if (!Calls.supported) {
      await this.decline();
      this.call = { ...call, state: "ended", outcome: "failed" };
      this.peerName = call.inviterName;
      this.fail(Calls.unsupportedReason);
      return;
    }
    this.incoming = null;
    this.reset();
    this.peerName = call.inviterName;
    this.call = { ...call, state: "connecting" };
    this.render();
    let mediaError = null;
    try {
      await this.openMedia(call.media === "video");
    } catch (error) {
      mediaError = error;
    }
    try {
      const ack = await this.realtime.request({ type: "call.accept", callId: call.id });
      this.ice = ack.ice;
      this.adopt(ack.call);
      if (mediaError) {
        await this.realtime.request({ type: "call.report", callId: call.id, report: "failed", reason: "media_unavailable" }).catch(() => {});
        this.fail("Allow the microphone to take calls.");
        return;
      }
      this.createPeer();
    } catch (error) {
      this.fail(error.code === "call_ended" ? "The call has ended." : error.message);
    }
  }

  async decline() {
    const call = this.incoming;
    this.incoming = null;
    this.render();
    if (call) await this.realtime.request({ type: "call.reject", callId: call.id }).catch(() => {});
  }

  async hangUp() {
    if (!this.call?.id) { this.teardown(); this.hide(); return; }
    try {
      const ack = await this.realtime.request({ type: "call.hangup", callId: this.call.id });
      this.adopt(ack.call);
    } catch {
      this.teardown();
      this.hide();
    }
  }

  // MARK: Real-time frames

  onFrame(frame) {
    if (frame.type === "call") {
      const call = frame.call;
      if (this.call?.id === call.id) { this.adopt(call); return; }
      if (this.role === "consumer") {
        if (call.state === "ringing" && !this.busy) {
          this.incoming = call;
          this.render();
          this.dispatchEvent(new CustomEvent("ringing", { detail: call }));
        } else if (this.incoming?.id === call.id && call.state !== "ringing") {
          // Answered on another device, cancelled, or missed.
          this.incoming = null;
          this.render();
        }
      }
      this.dispatchEvent(new CustomEvent("call", { detail: call }));
    } else if (frame.type === "call.signal" && frame.callId === this.call?.id) {
      this.signals = (this.signals ?? Promise.resolve()).then(() => this.onSignal(frame.signal)).catch((error) => console.warn("call signal", error));
    } else if (frame.type === "call.media" && frame.callId === this.call?.id) {
      this.remoteMedia = frame.media;
      this.render();
    }
  }

  adopt(call) {
    if (this.call?.id === call.id && call.version <= (this.call.version ?? 0)) return;
    const previous = this.call?.state;
    this.call = call;
    if (call.state === "active" && previous !== "active") this.activeSince = Date.now();
    if (this.role === "agent" && call.state === "connecting" && !this.pc) this.createPeer();
    if (call.state === "ended") {
      this.teardown();
      this.render();
      clearTimeout(this.hideTimer);
      this.hideTimer = setTimeout(() => this.hide(), 2500);
      this.dispatchEvent(new CustomEvent("ended", { detail: call }));
      return;
    }
    this.render();
  }

  // MARK: WebRTC

  async openMedia(video) {
    this.local = await navigator.mediaDevices.getUserMedia({ audio: true, video });
    this.muted = false;
    this.cameraOn = video;
    this.attachLocal();
    const devices = await navigator.mediaDevices.enumerateDevices().catch(() => []);
    this.cameras = devices.filter((device) => device.kind === "videoinput");
  }

  createPeer() {
    const pc = new RTCPeerConnection({ iceServers: this.ice?.iceServers ?? [], iceTransportPolicy: this.ice?.iceTransportPolicy ?? "all" });
    this.pc = pc;
    this.makingOffer = false;
    this.ignoreOffer = false;
    this.remote = new MediaStream();
    this.ui.remoteAudio.srcObject = this.remote;
    this.ui.remoteVideo.srcObject = this.remote;
    pc.ontrack = ({ track }) => {
      this.remote.addTrack(track);
      track.onunmute = () => this.render();
      this.render();
    };
    pc.onicecandidate = ({ candidate }) => {
      if (!candidate) return;
      this.send({ kind: "candidate", candidate: candidate.candidate, sdpMid: candidate.sdpMid ?? undefined, sdpMLineIndex: candidate.sdpMLineIndex ?? undefined });
    };
    pc.onnegotiationneeded = async () => {
      try {
        this.makingOffer = true;
        await pc.setLocalDescription();
        await this.send({ kind: "offer", sdp: pc.localDescription.sdp });
      } catch (error) {
        if (error.code !== "offer_collision") console.warn("call offer", error);
      } finally {
        this.makingOffer = false;
      }
    };
    pc.onconnectionstatechange = () => {
      if (pc !== this.pc) return;
      if (pc.connectionState === "connected" && !this.reportedConnected) {
        this.reportedConnected = true;
        this.report("connected");
      } else if (pc.connectionState === "failed") {
        this.report("failed", "ice_failed");
      }
      this.render();
    };
    // The agent offers at once; the consumer adds its tracks when the agent's offer arrives, so that
    // the first exchange is one offer and one answer.
    if (!this.polite) this.addLocalTracks();
  }

  addLocalTracks() {
    if (this.tracksAdded || !this.local) return;
    this.tracksAdded = true;
    for (const track of this.local.getTracks()) this.pc.addTrack(track, this.local);
  }

  async onSignal(signal) {
    const pc = this.pc;
    if (!pc) return;
    if (signal.kind === "candidate") {
      try {
        await pc.addIceCandidate(signal.candidate ? { candidate: signal.candidate, sdpMid: signal.sdpMid, sdpMLineIndex: signal.sdpMLineIndex } : null);
      } catch (error) {
        if (!this.ignoreOffer) throw error;
      }
      return;
    }
    const collision = signal.kind === "offer" && (this.makingOffer || pc.signalingState !== "stable");
    this.ignoreOffer = !this.polite && collision;
    if (this.ignoreOffer) return;
    await pc.setRemoteDescription({ type: signal.kind, sdp: signal.sdp });
    if (signal.kind === "offer") {
      this.addLocalTracks();
      await pc.setLocalDescription();
      await this.send({ kind: "answer", sdp: pc.localDescription.sdp });
    }
  }

  send(signal) {
    return this.realtime.request({ type: "call.signal", callId: this.call.id, signal });
  }

  report(report, reason) {
    if (!this.call?.id) return;
    this.realtime.request({ type: "call.report", callId: this.call.id, report, reason }).then((ack) => this.adopt(ack.call)).catch(() => {});
  }

  sendMedia() {
    if (!this.call?.id || this.call.state === "ended") return;
    this.realtime.request({ type: "call.media", callId: this.call.id, media: { muted: this.muted, cameraOn: this.cameraOn } })
      .then((ack) => this.adopt(ack.call)).catch((error) => this.notice(error.message));
  }

  // MARK: Controls

  toggleMute() {
    const track = this.local?.getAudioTracks()[0];
    if (!track) return;
    this.muted = !this.muted;
    track.enabled = !this.muted;
    this.render();
    this.sendMedia();
  }

  async toggleCamera() {
    if (!this.local) return;
    const sender = this.pc?.getSenders().find((candidate) => candidate.track?.kind === "video" || this.videoSender === candidate);
    if (this.cameraOn) {
      for (const track of this.local.getVideoTracks()) { track.stop(); this.local.removeTrack(track); }
      await sender?.replaceTrack(null);
      this.videoSender = sender;
      this.cameraOn = false;
    } else {
      let stream;
      try {
        stream = await navigator.mediaDevices.getUserMedia({ video: true });
      } catch {
        this.notice("The camera could not be opened.");
        return;
      }
      const track = stream.getVideoTracks()[0];
      this.local.addTrack(track);
      if (sender) {
        await sender.replaceTrack(track);
      } else if (this.pc) {
        // A voice call gets video: this adds a video section and renegotiates.
        this.videoSender = this.pc.addTrack(track, this.local);
      }
      this.cameraOn = true;
      const devices = await navigator.mediaDevices.enumerateDevices().catch(() => []);
      this.cameras = devices.filter((device) => device.kind === "videoinput");
    }
    this.attachLocal();
    this.render();
    this.sendMedia();
  }

  async switchCamera() {
    const current = this.local?.getVideoTracks()[0];
    if (!current || (this.cameras?.length ?? 0) < 2) return;
    const currentId = current.getSettings().deviceId;
    const index = this.cameras.findIndex((camera) => camera.deviceId === currentId);
    const next = this.cameras[(index + 1) % this.cameras.length];
    const stream = await navigator.mediaDevices.getUserMedia({ video: { deviceId: { exact: next.deviceId } } });
    const track = stream.getVideoTracks()[0];
    const sender = this.pc?.getSenders().find((candidate) => candidate.track === current);
    await sender?.replaceTrack(track);
    current.stop();
    this.local.removeTrack(current);
    this.local.addTrack(track);
    this.attachLocal();
    this.notice(`Camera: ${next.label || "next camera"}`);
  }

  attachLocal() {
    this.ui.localVideo.srcObject = this.cameraOn ? this.local : null;
  }

  teardown() {
    this.pc?.close();
    this.pc = null;
    for (const track of this.local?.getTracks() ?? []) track.stop();
    this.local = null;
    this.ui.remoteAudio.srcObject = null;
    this.ui.remoteVideo.srcObject = null;
    this.ui.localVideo.srcObject = null;
    clearInterval(this.timer);
  }

  reset() {
    clearTimeout(this.hideTimer);
    this.teardown();
    this.tracksAdded = false;
    this.reportedConnected = false;
    this.remoteMedia = null;
    this.activeSince = null;
    this.videoSender = null;
    this.error = null;
    this.signals = Promise.resolve();
  }

  fail(message) {
    this.error = message;
    this.teardown();
    this.render();
    clearTimeout(this.hideTimer);
    this.hideTimer = setTimeout(() => this.hide(), 4000);
  }

  hide() {
    if (this.call?.state !== "ended" && this.call?.state && !this.error) return;
    this.call = null;
    this.error = null;
    this.render();
  }

  notice(message) {
    this.ui.notice.textContent = message;
    clearTimeout(this.noticeTimer);
    this.noticeTimer = setTimeout(() => { this.ui.notice.textContent = ""; }, 3000);
  }

  // MARK: The call UI

  build() {
    const overlay = element("section", "call-overlay", { hidden: true });
    overlay.setAttribute("role", "dialog");
    overlay.setAttribute("aria-label", "Call");
    const stage = element("div", "call-stage");
    const remoteVideo = element("video", "remote-video", { autoplay: true, playsInline: true, muted: true });
    const remoteAudio = element("audio", "remote-audio", { autoplay: true });
    const identity = element("div", "call-identity");
    const avatar = element("div", "call-avatar");
    avatar.setAttribute("aria-hidden", "true");
    const name = element("h2", "call-name");
    const status = element("p", "call-status");
    status.setAttribute("role", "status");
    status.setAttribute("aria-live", "polite");
    const timer = element("p", "call-timer");
    const badges = element("p", "call-badges");
    identity.append(avatar, name, status, timer, badges);
    const localVideo = element("video", "local-video", { autoplay: true, playsInline: true, muted: true });
    localVideo.setAttribute("aria-label", "Your camera");
    const notice = element("p", "call-notice");
    notice.setAttribute("aria-live", "polite");
    stage.append(remoteVideo, remoteAudio, identity, localVideo, notice);
    const controls = element("div", "call-controls");
    const mute = iconButton("mute", "mic", "Mute microphone");
    const camera = iconButton("camera", "video", "Turn camera on");
    const switchCamera = iconButton("switch", "switch-camera", "Switch camera");
    const hangUp = iconButton("hang-up danger-fill", "hang-up", "Hang up");
    controls.append(mute, camera, switchCamera, hangUp);
    overlay.append(stage, controls);
    mute.onclick = () => this.toggleMute();
    camera.onclick = () => this.toggleCamera();
    switchCamera.onclick = () => this.switchCamera();
    hangUp.onclick = () => this.hangUp();

    const sheet = element("section", "call-incoming", { hidden: true });
    sheet.setAttribute("role", "alertdialog");
    sheet.setAttribute("aria-labelledby", "call-incoming-title");
    const sheetAvatar = element("div", "call-avatar");
    sheetAvatar.setAttribute("aria-hidden", "true");
    const sheetTitle = element("h2", "call-name", { id: "call-incoming-title" });
    const sheetKind = element("p", "call-status");
    const actions = element("div", "call-actions");
    const decline = element("button", "call-choice decline", { type: "button" });
    decline.innerHTML = `${icon("hang-up")}<span>Decline</span>`;
    const accept = element("button", "call-choice accept", { type: "button" });
    accept.innerHTML = `${icon("phone")}<span>Accept</span>`;
    actions.append(decline, accept);
    sheet.append(sheetAvatar, sheetTitle, sheetKind, actions);
    decline.onclick = () => this.decline();
    accept.onclick = () => this.accept();

    this.root.append(overlay, sheet);
    this.ui = { overlay, remoteVideo, remoteAudio, avatar, name, status, timer, badges, localVideo, notice, mute, camera, switchCamera, hangUp, sheet, sheetAvatar, sheetTitle, sheetKind, accept, decline };
  }

  statusText() {
    const call = this.call;
    if (this.error) return this.error;
    switch (call.state) {
      case "starting": return "Calling…";
      case "ringing": return this.role === "agent" ? "Ringing…" : "Connecting…";
      case "connecting": return "Connecting…";
      case "active": return call.media === "video" ? "Video call" : "Voice call";
      case "ended": {
        const title = outcomeTitle[call.outcome] ?? "Call ended";
        const duration = call.outcome === "completed" || call.connectedAt ? ` · ${clock((call.durationSeconds ?? 0) * 1000)}` : "";
        const reason = call.outcome === "failed" ? ` – ${reasonText[call.endReason] ?? ""}` : "";
        return `${title}${duration}${reason}`;
      }
      default: return "";
    }
  }

  render() {
    const ui = this.ui;
    // Incoming call sheet (consumer).
    const incoming = this.incoming;
    const appearing = Boolean(incoming) && ui.sheet.hidden;
    ui.sheet.hidden = !incoming;
    if (incoming) {
      ui.sheetAvatar.textContent = (incoming.inviterName || "?").slice(0, 1).toUpperCase();
      ui.sheetTitle.textContent = incoming.inviterName;
      ui.sheetKind.textContent = incoming.media === "video" ? "Incoming video call" : "Incoming voice call";
      ui.accept.querySelector("span").textContent = "Accept";
      ui.accept.querySelector("svg").outerHTML = icon(incoming.media === "video" ? "video" : "phone");
      ui.accept.setAttribute("aria-label", `Accept ${incoming.media} call from ${incoming.inviterName}`);
      ui.decline.setAttribute("aria-label", `Decline call from ${incoming.inviterName}`);
      // An incoming call is an alert dialog: keyboard and screen-reader users land on "Accept".
      if (appearing) ui.accept.focus();
    }
    // The call itself.
    const call = this.call;
    ui.overlay.hidden = !call;
    if (!call) { clearInterval(this.timer); return; }
    ui.overlay.dataset.state = this.error ? "ended" : call.state;
    ui.overlay.setAttribute("aria-label", `${call.media === "video" ? "Video" : "Voice"} call with ${this.peerName}`);
    ui.avatar.textContent = (this.peerName || "?").slice(0, 1).toUpperCase();
    ui.name.textContent = this.peerName;
    ui.status.textContent = this.statusText();
    const remoteVideoLive = this.remote?.getVideoTracks().some((track) => track.readyState === "live" && !track.muted)
      && (this.remoteMedia ? this.remoteMedia.cameraOn : call.media === "video");
    ui.overlay.classList.toggle("has-video", Boolean(remoteVideoLive) && call.state !== "ended");
    ui.overlay.classList.toggle("has-local-video", Boolean(this.cameraOn) && call.state !== "ended");
    const badges = [];
    if (this.remoteMedia?.muted) badges.push(`${this.peerName} muted`);
    if (call.media === "video" && this.remoteMedia && !this.remoteMedia.cameraOn) badges.push("Camera off");
    ui.badges.textContent = badges.join(" · ");
    const live = call.state !== "ended" && !this.error;
    ui.mute.hidden = !live || !this.local;
    ui.mute.setAttribute("aria-pressed", String(Boolean(this.muted)));
    ui.mute.setAttribute("aria-label", this.muted ? "Unmute microphone" : "Mute microphone");
    ui.mute.title = ui.mute.getAttribute("aria-label");
    ui.mute.innerHTML = icon(this.muted ? "mic-off" : "mic");
    ui.camera.hidden = !live || !this.local || !call.videoAllowed;
    ui.camera.setAttribute("aria-pressed", String(!this.cameraOn));
    ui.camera.setAttribute("aria-label", this.cameraOn ? "Turn camera off" : "Turn camera on");
    ui.camera.title = ui.camera.getAttribute("aria-label");
    ui.camera.innerHTML = icon(this.cameraOn ? "video" : "video-off");
    ui.switchCamera.hidden = !live || !this.cameraOn || (this.cameras?.length ?? 0) < 2;
    ui.hangUp.hidden = !live;
    ui.hangUp.setAttribute("aria-label", call.state === "ringing" || call.state === "starting" ? "Cancel call" : "Hang up");
    ui.hangUp.title = ui.hangUp.getAttribute("aria-label");
    // The timer is not a live region: a screen reader hears the state changes, not every second.
    clearInterval(this.timer);
    const tick = () => { ui.timer.textContent = this.activeSince ? clock(Date.now() - this.activeSince) : ""; };
    tick();
    ui.timer.hidden = call.state !== "active" || Boolean(this.error);
    if (call.state === "active") this.timer = setInterval(tick, 1000);
  }
}
