// Screen share from a brand's app (issue 29): the widget in app mode, in ParleyKit's web view. A
// WKWebView has no getDisplayMedia, so the app captures its own screens natively (ParleyKit's
// AppScreenCapture, which masks secure fields and the views the brand marks) and hands them to the
// page as JPEG frames (`parleyApp.screenFrame`). The page draws each on a canvas whose
// captureStream() track the call sends, as it sends a browser's shared screen: the other side sees
// it through the same renegotiation, stage and badges.
//
// The host says it can at start (`parleyApp.start({ token, screenShare: true })`); the page asks
// it to begin and end with `screenShare.start` and `screenShare.stop` on the `parley` handler, and
// the host says when it stopped by itself (`parleyApp.screenShareEnded(reason)`).

/** Frames the page asks the app for, each second (the host may send fewer: it skips unchanged screens). */
export const APP_SCREEN_FPS = 4;
/** The largest frame taken, as a data: URL (a phone screen at JPEG quality 0.6 is 60-200 KB). */
export const APP_SCREEN_MAX_FRAME = 1_500_000;
/** How long the first frame may take (the app may ask the person first). */
const FIRST_FRAME_MS = 15_000;
const FRAME_PREFIX = /^data:image\/(jpeg|png);base64,[A-Za-z0-9+/=]+$/;

export class AppScreen {
  /** @param tellHost posts a message to the app's `parley` handler */
  constructor(tellHost) {
    this.tellHost = tellHost;
    this.available = false;
    this.canvas = null;
    this.stream = null;
    this.waiting = null;
    this.drawing = false;
    /** Called when the app stopped sharing by itself (the call stops sending the screen). */
    this.onEnded = null;
  }

  /** Starts the app's capture; resolves with the stream once the first frame is drawn. */
  async start() {
    if (!this.available) throw Object.assign(new Error("This app cannot share its screen."), { name: "NotSupportedError" });
    this.stop();
    const canvas = document.createElement("canvas");
    canvas.width = 2;
    canvas.height = 2;
    this.canvas = canvas;
    this.stream = canvas.captureStream(APP_SCREEN_FPS);
    const first = new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("The app did not share its screen.")), FIRST_FRAME_MS);
      this.waiting = {
        resolve: () => { clearTimeout(timer); resolve(); },
        reject: (error) => { clearTimeout(timer); reject(error); },
      };
    });
    this.tellHost({ type: "screenShare.start", framesPerSecond: APP_SCREEN_FPS });
    try {
      await first;
    } catch (error) {
      this.stop();
      throw error;
    }
    return this.stream;
  }

  /** A frame from the app: drawn when it is an image of the expected kind and size, else ignored. */
  frame(dataUrl) {
    if (!this.canvas || this.drawing || typeof dataUrl !== "string") return false;
    if (dataUrl.length > APP_SCREEN_MAX_FRAME || !FRAME_PREFIX.test(dataUrl)) return false;
    // One frame at a time: a frame that arrives while the last one decodes is dropped (the app
    // sends the screen again at its pace).
    this.drawing = true;
    const image = new Image();
    const canvas = this.canvas;
    image.onload = () => {
      this.drawing = false;
      if (this.canvas !== canvas) return;
      if (canvas.width !== image.naturalWidth || canvas.height !== image.naturalHeight) {
        canvas.width = image.naturalWidth;
        canvas.height = image.naturalHeight;
      }
      canvas.getContext("2d").drawImage(image, 0, 0);
      this.waiting?.resolve();
      this.waiting = null;
    };
    image.onerror = () => { this.drawing = false; };
    image.src = dataUrl;
    return true;
  }

  /** The app stopped by itself: `denied` when the person said no before any frame. */
  ended(reason) {
    if (this.waiting) {
      const error = new Error(reason === "denied" ? "Screen sharing was not allowed." : "The app stopped sharing its screen.");
      if (reason === "denied") error.name = "NotAllowedError";
      this.waiting.reject(error);
      this.waiting = null;
      return;
    }
    if (!this.stream) return;
    this.release();
    this.onEnded?.();
  }

  /** Stops sharing from the page's side (the call's button, the call's end). */
  stop() {
    if (!this.stream && !this.waiting) return;
    this.waiting?.reject(new Error("The screen share was stopped."));
    this.waiting = null;
    this.release();
    this.tellHost({ type: "screenShare.stop" });
  }

  release() {
    for (const track of this.stream?.getTracks() ?? []) track.stop();
    this.stream = null;
    this.canvas = null;
    this.drawing = false;
  }
}
