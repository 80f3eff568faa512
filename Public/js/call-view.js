import { icon, clock } from "./icons.js";

// <parley-call>: shows a CallSession (call-session.js): the call overlay (the peer, the state, the
// timer, video, and the mute, camera, switch-camera, screen-share and hang-up buttons) and, for
// consumers, the incoming-call sheet. A screen the other side shares fills the stage, their camera
// goes small beside one's own. It draws on the session's "change" events and calls its methods; it holds
// no call state of its own.

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

class CallView extends HTMLElement {
  /** The session to show; set once, before or after the element is connected. */
  set session(session) {
    this._session = session;
    if (!this.ui) this.build();
    session.addEventListener("change", (event) => {
      if (event.detail === "streams") this.attachStreams();
      this.render();
    });
    session.addEventListener("notice", (event) => this.showNotice(event.detail));
    this.render();
  }

  get session() { return this._session; }

  connectedCallback() {
    // The overlay and the sheet are positioned by the page's layout, as if they were its children.
    this.style.display = "contents";
  }

  attachStreams() {
    const session = this.session;
    this.ui.remoteAudio.srcObject = session.remote ?? null;
    this.ui.remoteCamera.srcObject = session.remote ?? null;
    this.ui.localVideo.srcObject = session.cameraOn ? session.local : null;
  }

  /** The large video: the other side's shared screen while there is one, else their camera. */
  showOnStage() {
    const session = this.session;
    const stream = (session.remoteScreenLive ? session.remoteScreen : session.remote) ?? null;
    if (this.ui.remoteVideo.srcObject !== stream) this.ui.remoteVideo.srcObject = stream;
  }

  showNotice(message) {
    this.ui.notice.textContent = message;
    clearTimeout(this.noticeTimer);
    this.noticeTimer = setTimeout(() => { this.ui.notice.textContent = ""; }, 3000);
  }

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
    // While the other side shares a screen, their camera is a tile above one's own.
    const remoteCamera = element("video", "remote-camera", { autoplay: true, playsInline: true, muted: true });
    const tiles = element("div", "call-tiles");
    tiles.append(remoteCamera, localVideo);
    const notice = element("p", "call-notice");
    notice.setAttribute("aria-live", "polite");
    stage.append(remoteVideo, remoteAudio, identity, tiles, notice);
    const controls = element("div", "call-controls");
    const mute = iconButton("mute", "mic", "Mute microphone");
    const camera = iconButton("camera", "video", "Turn camera on");
    const switchCamera = iconButton("switch", "switch-camera", "Switch camera");
    const screen = iconButton("screen", "screen-share", "Share your screen");
    const hangUp = iconButton("hang-up danger-fill", "hang-up", "Hang up");
    // Agents: co-browse from the call (the page asks `cobrowseAvailable` and listens for "cobrowse").
    const cobrowse = iconButton("cobrowse", "cobrowse", "See the customer's page");
    controls.append(mute, camera, switchCamera, screen, cobrowse, hangUp);
    cobrowse.onclick = () => this.dispatchEvent(new CustomEvent("cobrowse"));
    overlay.append(stage, controls);
    mute.onclick = () => this.session.toggleMute();
    camera.onclick = () => this.session.toggleCamera();
    switchCamera.onclick = () => this.session.switchCamera();
    screen.onclick = () => this.session.toggleScreenShare();
    hangUp.onclick = () => this.session.hangUp();

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
    decline.onclick = () => this.session.decline();
    accept.onclick = () => this.session.accept();

    this.append(overlay, sheet);
    this.ui = { overlay, remoteVideo, remoteAudio, avatar, name, status, timer, badges, localVideo, remoteCamera, notice, mute, camera, switchCamera, screen, cobrowse, hangUp, sheet, sheetAvatar, sheetTitle, sheetKind, accept, decline };
  }

  render() {
    const ui = this.ui;
    const session = this.session;
    if (!ui || !session) return;
    // Incoming call sheet (consumer).
    const incoming = session.incoming;
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
    const call = session.call;
    ui.overlay.hidden = !call;
    if (!call) { clearInterval(this.timer); return; }
    ui.overlay.dataset.state = session.error ? "ended" : call.state;
    ui.overlay.setAttribute("aria-label", `${call.media === "video" ? "Video" : "Voice"} call with ${session.peerName}`);
    ui.avatar.textContent = (session.peerName || "?").slice(0, 1).toUpperCase();
    ui.name.textContent = session.peerName;
    ui.status.textContent = session.statusText;
    const remoteVideoLive = session.remote?.getVideoTracks().some((track) => track.readyState === "live" && !track.muted)
      && (session.remoteMedia ? session.remoteMedia.cameraOn : call.media === "video");
    const remoteScreen = session.remoteScreenLive && call.state !== "ended";
    this.showOnStage();
    ui.remoteVideo.setAttribute("aria-label", remoteScreen ? `${session.peerName}'s screen` : `${session.peerName}'s camera`);
    ui.overlay.classList.toggle("has-video", (Boolean(remoteVideoLive) || remoteScreen) && call.state !== "ended");
    ui.overlay.classList.toggle("has-screen", remoteScreen);
    ui.overlay.classList.toggle("has-remote-camera", remoteScreen && Boolean(remoteVideoLive));
    ui.overlay.classList.toggle("has-local-video", Boolean(session.cameraOn) && call.state !== "ended");
    const badges = [];
    if (session.sharingScreen) badges.push("You're sharing your screen");
    if (remoteScreen) badges.push(`${session.peerName} is sharing their screen`);
    if (session.remoteMedia?.muted) badges.push(`${session.peerName} muted`);
    if (call.media === "video" && session.remoteMedia && !session.remoteMedia.cameraOn) badges.push("Camera off");
    ui.badges.textContent = badges.join(" · ");
    const live = call.state !== "ended" && !session.error;
    ui.mute.hidden = !live || !session.local;
    ui.mute.setAttribute("aria-pressed", String(Boolean(session.muted)));
    ui.mute.setAttribute("aria-label", session.muted ? "Unmute microphone" : "Mute microphone");
    ui.mute.title = ui.mute.getAttribute("aria-label");
    ui.mute.innerHTML = icon(session.muted ? "mic-off" : "mic");
    ui.camera.hidden = !live || !session.local || !call.videoAllowed;
    ui.camera.setAttribute("aria-pressed", String(!session.cameraOn));
    ui.camera.setAttribute("aria-label", session.cameraOn ? "Turn camera off" : "Turn camera on");
    ui.camera.title = ui.camera.getAttribute("aria-label");
    ui.camera.innerHTML = icon(session.cameraOn ? "video" : "video-off");
    ui.switchCamera.hidden = !live || !session.cameraOn || (session.cameras?.length ?? 0) < 2;
    ui.screen.hidden = !live || call.state !== "active" || !session.canShareScreen;
    ui.screen.setAttribute("aria-pressed", String(Boolean(session.sharingScreen)));
    ui.screen.setAttribute("aria-label", session.sharingScreen ? "Stop sharing your screen" : "Share your screen");
    ui.screen.title = ui.screen.getAttribute("aria-label");
    ui.cobrowse.hidden = !live || call.state !== "active" || !this.cobrowseAvailable?.();
    ui.hangUp.hidden = !live;
    ui.hangUp.setAttribute("aria-label", call.state === "ringing" || call.state === "starting" ? "Cancel call" : "Hang up");
    ui.hangUp.title = ui.hangUp.getAttribute("aria-label");
    // The timer is not a live region: a screen reader hears the state changes, not every second.
    clearInterval(this.timer);
    const tick = () => { ui.timer.textContent = session.activeSince ? clock(Date.now() - session.activeSince) : ""; };
    tick();
    ui.timer.hidden = call.state !== "active" || Boolean(session.error);
    if (call.state === "active") this.timer = setInterval(tick, 1000);
  }
}

customElements.define("parley-call", CallView);
