import { ErrorCode } from "./error-codes.js";
import { clock } from "./icons.js";

// A voice or video call over WebRTC, without any DOM: the state of the call, negotiation, media
// devices and the controls. The page shows it with <parley-call> (call-view.js), which listens to
// its "change" events. Used by the agent workspace and the consumer widget.
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

export class CallSession extends EventTarget {
  /**
   * @param realtime the page's Realtime connection
   * @param api the page's Api (agents start calls over HTTP)
   * @param role "agent" or "consumer"
   * @param screenSource in a brand's app (widget in app mode), the app's own screen (app-screen.js),
   *   used where the browser has no getDisplayMedia
   */
  constructor({ realtime, api, role, screenSource = null }) {
    super();
    this.screenSource = screenSource;
    this.realtime = realtime;
    this.api = api;
    this.role = role;
    this.polite = role === "consumer";
    this.call = null;
    this.peerName = "";
    this.incoming = null;
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
    // Until the POST answers with the call's id, call frames are kept by id: on a slow network the
    // customer may answer first, and the "connecting" frame comes before the answer.
    this.early = new Map();
    this.changed();
    // Hanging up before the server has named the call ends this attempt (`hangUp`).
    const attempt = this.attempt = (this.attempt ?? 0) + 1;
    try {
      if (!(await this.openMedia(media === "video", () => this.attempt === attempt))) return;
      const response = await this.api.post(`/v1/conversations/${conversationId}/calls`, { media, connectionId: this.realtime.connectionId });
      if (this.attempt !== attempt) {
        // Cancelled meanwhile: the call the server made is hung up, never left ringing.
        await this.realtime.request({ type: "call.hangup", callId: response.call.id }).catch(() => {});
        return;
      }
      this.ice = response.ice;
      const early = this.early?.get(response.call.id);
      this.early = null;
      this.adopt(response.call);
      if (early) this.adopt(early);
    } catch (error) {
      if (this.attempt !== attempt) return;
      this.early = null;
      this.fail(error.code === "NotAllowedError" || error.name === "NotAllowedError"
        ? "Allow the microphone and camera to make calls." : error.message);
    }
  }

  /** The consumer answers the ringing call on this device. */
  async accept() {
    const call = this.incoming;
    if (!call) return;
    if (!CallSession.supported) {
      await this.decline();
      this.call = { ...call, state: "ended", outcome: "failed" };
      this.peerName = call.inviterName;
      this.fail(CallSession.unsupportedReason);
      return;
    }
    this.incoming = null;
    this.reset();
    this.peerName = call.inviterName;
    this.call = { ...call, state: "connecting" };
    // The server tells the agent of the answer before it acknowledges it here, and the agent offers
    // at once: its offer and candidates may come before this side has a peer connection. They
    // wait for it (signals run in order on this.signals).
    let peerReady;
    this.signals = new Promise((resolve) => { peerReady = resolve; });
    this.changed();
    try {
      await this.answer(call);
    } finally {
      peerReady();
    }
  }

  /** accept's second half: opens the media, answers, and makes the peer connection. */
  async answer(call) {
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
      this.fail(error.code === ErrorCode.callEnded ? "The call has ended." : error.message);
    }
  }

  async decline() {
    const call = this.incoming;
    this.incoming = null;
    this.changed();
    if (call) await this.realtime.request({ type: "call.reject", callId: call.id }).catch(() => {});
  }

  async hangUp() {
    if (!this.call?.id) {
      // Still starting (the microphone asked for, or the server not answered yet): this attempt
      // ends here, and `start` hangs up the call the server makes, if it makes one.
      this.attempt = (this.attempt ?? 0) + 1;
      this.early = null;
      this.teardown();
      this.call = null;
      this.error = null;
      this.changed();
      return;
    }
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
      // `early` is there only while a start waits for its POST (set in start, cleared on every way out).
      if (this.early && this.early.size < 64 && !(this.early.get(call.id)?.version >= call.version)) this.early.set(call.id, call);
      if (this.role === "consumer") {
        if (call.state === "ringing" && !this.busy) {
          this.incoming = call;
          this.changed();
          this.dispatchEvent(new CustomEvent("ringing", { detail: call }));
        } else if (this.incoming?.id === call.id && call.state !== "ringing") {
          // Answered on another device, cancelled, or missed.
          this.incoming = null;
          this.changed();
        }
      }
      this.dispatchEvent(new CustomEvent("call", { detail: call }));
    } else if (frame.type === "call.signal" && frame.callId === this.call?.id) {
      this.signals = (this.signals ?? Promise.resolve()).then(() => this.onSignal(frame.signal)).catch((error) => console.warn("call signal", error));
    } else if (frame.type === "call.media" && frame.callId === this.call?.id) {
      this.remoteMedia = frame.media;
      this.changed();
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
      this.changed();
      clearTimeout(this.hideTimer);
      this.hideTimer = setTimeout(() => this.hide(), 2500);
      this.dispatchEvent(new CustomEvent("ended", { detail: call }));
      return;
    }
    this.changed();
  }

  // MARK: WebRTC

  /**
   * Opens the microphone (and camera); false, with them closed again, when `current` says the
   * call asking for them was given up meanwhile (the browser may ask the person first).
   */
  async openMedia(video, current = () => true) {
    const stream = await navigator.mediaDevices.getUserMedia({ audio: true, video });
    if (!current()) {
      for (const track of stream.getTracks()) track.stop();
      return false;
    }
    this.local = stream;
    this.muted = false;
    this.cameraOn = video;
    this.attachLocal();
    const devices = await navigator.mediaDevices.enumerateDevices().catch(() => []);
    this.cameras = devices.filter((device) => device.kind === "videoinput");
    return true;
  }

  createPeer() {
    const pc = new RTCPeerConnection({ iceServers: this.ice?.iceServers ?? [], iceTransportPolicy: this.ice?.iceTransportPolicy ?? "all" });
    this.pc = pc;
    this.makingOffer = false;
    this.ignoreOffer = false;
    this.remote = new MediaStream();
    this.remoteScreen = new MediaStream();
    this.changed("streams");
    pc.ontrack = ({ track, streams }) => {
      // The other side's microphone and camera share one stream; a shared screen comes in a
      // stream of its own (see toggleScreenShare).
      const stream = streams[0];
      if (track.kind === "audio" && stream) this.mainStreamId = stream.id;
      const screen = track.kind === "video" && Boolean(stream) && stream.id !== this.mainStreamId && stream.getAudioTracks().length === 0;
      const target = screen ? this.remoteScreen : this.remote;
      if (!target.getTrackById(track.id)) target.addTrack(track);
      track.onunmute = () => this.changed();
      track.onmute = () => this.changed();
      this.changed();
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
        if (error.code !== ErrorCode.offerCollision) console.warn("call offer", error);
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
      this.changed();
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

  get mediaState() {
    return { muted: Boolean(this.muted), cameraOn: Boolean(this.cameraOn), sharingScreen: Boolean(this.sharingScreen) };
  }

  sendMedia() {
    if (!this.call?.id || this.call.state === "ended") return;
    this.realtime.request({ type: "call.media", callId: this.call.id, media: this.mediaState })
      .then((ack) => this.adopt(ack.call)).catch((error) => this.notice(error.message));
  }

  // MARK: Controls

  toggleMute() {
    const track = this.local?.getAudioTracks()[0];
    if (!track) return;
    this.muted = !this.muted;
    track.enabled = !this.muted;
    this.changed();
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
    this.changed();
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

  // MARK: Screen share

  /** Whether this side may share its screen in this call (its profile or the brand), and the browser can. */
  get canShareScreen() {
    const able = Boolean(this.screenSource?.available) || Boolean(navigator.mediaDevices?.getDisplayMedia);
    return able && Boolean(this.call?.screenShare?.[this.role]);
  }

  /** Whether the other side's shared screen is coming in now. */
  get remoteScreenLive() {
    return Boolean(this.remoteMedia?.sharingScreen)
      && Boolean(this.remoteScreen?.getVideoTracks().some((track) => track.readyState === "live" && !track.muted));
  }

  /**
   * Shares a screen, window or tab the person picks: a video track in a stream of its own, sent
   * on a transceiver of its own (the first share renegotiates; a later one reuses it). The server
   * hears of it first: it refuses a share this call does not allow, and knows the new video
   * section is the screen rather than a camera.
   *
   * The transceiver is sendrecv while sharing and recvonly after: the other side's browser may
   * later put its own camera on that section (addTrack reuses a section it only received on),
   * and this side must still receive it.
   */
  async toggleScreenShare() {
    if (this.sharingScreen) { await this.stopScreenShare(); return; }
    if (!this.pc || this.call?.state !== "active" || !this.canShareScreen) return;
    let stream;
    // In a brand's app, the app's own screens (it captures them natively; app-screen.js).
    const app = this.screenSource?.available ? this.screenSource : null;
    try {
      stream = app ? await app.start() : await navigator.mediaDevices.getDisplayMedia({ video: { frameRate: { ideal: 15, max: 30 } }, audio: false });
    } catch (error) {
      // Cancelling the browser's picker is a choice, not an error.
      if (error.name !== "NotAllowedError" && error.name !== "AbortError") this.notice("The screen could not be shared.");
      return;
    }
    const track = stream.getVideoTracks()[0];
    try {
      const ack = await this.realtime.request({ type: "call.media", callId: this.call.id, media: { ...this.mediaState, sharingScreen: true } });
      this.adopt(ack.call);
    } catch (error) {
      track.stop();
      app?.stop();
      this.notice(error.message);
      return;
    }
    if (!this.pc) { track.stop(); app?.stop(); return; }  // the call ended meanwhile
    track.contentHint = "detail";
    // The browser's own "Stop sharing" bar ends the track; in an app, the app says so.
    track.onended = () => this.stopScreenShare();
    if (app) app.onEnded = () => this.stopScreenShare();
    if (this.screenTransceiver) {
      await this.screenTransceiver.sender.replaceTrack(track);
      this.screenTransceiver.direction = "sendrecv";
    } else {
      this.screenTransceiver = this.pc.addTransceiver(track, { direction: "sendrecv", streams: [stream] });
    }
    this.screen = stream;
    this.sharingScreen = true;
    this.changed();
  }

  /** Stops sharing: the section stops sending (the call renegotiates) and the other side returns to the call. */
  async stopScreenShare() {
    if (!this.sharingScreen) return;
    this.sharingScreen = false;
    for (const track of this.screen?.getTracks() ?? []) track.stop();
    this.screen = null;
    this.screenSource?.stop();
    if (this.pc && this.screenTransceiver) {
      this.screenTransceiver.direction = "recvonly";
      await this.screenTransceiver.sender.replaceTrack(null).catch(() => {});
    }
    this.changed();
    this.sendMedia();
  }

  attachLocal() {
    this.changed("streams");
  }

  teardown() {
    this.pc?.close();
    this.pc = null;
    for (const track of this.local?.getTracks() ?? []) track.stop();
    for (const track of this.screen?.getTracks() ?? []) track.stop();
    this.screenSource?.stop();
    this.local = null;
    this.screen = null;
    this.sharingScreen = false;
    this.screenTransceiver = null;
    this.remote = null;
    this.remoteScreen = null;
    this.mainStreamId = null;
    this.changed("streams");
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
    this.changed();
    clearTimeout(this.hideTimer);
    this.hideTimer = setTimeout(() => this.hide(), 4000);
  }

  hide() {
    if (this.call?.state !== "ended" && this.call?.state && !this.error) return;
    this.call = null;
    this.error = null;
    this.changed();
  }

  /** A short message shown over the call for a few seconds. */
  notice(message) {
    this.dispatchEvent(new CustomEvent("notice", { detail: message }));
  }

  /** Tells the view to draw again; "streams" when the media streams to show changed. */
  changed(what = "state") {
    this.dispatchEvent(new CustomEvent("change", { detail: what }));
  }

  /** The line under the peer's name: "Ringing…", "Video call", "Call ended · 1:23"... */
  get statusText() {
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
}
