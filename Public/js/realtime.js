// One WebSocket with automatic reconnect and resume from the last seen sequence numbers.
// Events: "frame" (every server frame), "status" (detail: connecting | online | offline).
export class Realtime extends EventTarget {
  constructor({ token = null } = {}) {
    super();
    this.token = token;
    this.cursors = {};      // conversationId -> last seen seq
    this.pending = new Map(); // frame id -> {resolve, reject}
    this.counter = 0;
    this.attempt = 0;
    this.closed = false;
  }

  connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = this.token ? `?access_token=${encodeURIComponent(this.token)}` : "";
    this.status("connecting");
    const socket = new WebSocket(`${scheme}://${location.host}/v1/realtime${query}`);
    this.socket = socket;
    socket.onmessage = (event) => this.receive(JSON.parse(event.data));
    socket.onclose = (event) => {
      for (const { reject } of this.pending.values()) reject(new Error("disconnected"));
      this.pending.clear();
      if (event.code === 4001 && !this.closed) this.dispatchEvent(new CustomEvent("signedout", { detail: event.reason }));
      if (this.closed || event.code === 4001) { this.status("offline"); return; }
      this.status("offline");
      const delay = Math.min(10000, 500 * 2 ** this.attempt++);
      this.retryTimer = setTimeout(() => this.connect(), delay);
    };
  }

  reconnectNow() {
    clearTimeout(this.retryTimer);
    if (!this.socket || this.socket.readyState === WebSocket.CLOSED) this.connect();
  }

  close() { this.closed = true; this.socket?.close(); }

  status(state) {
    this.state = state;
    this.dispatchEvent(new CustomEvent("status", { detail: state }));
  }

  seen(conversationId, seq) {
    if (!(this.cursors[conversationId] >= seq)) this.cursors[conversationId] = seq;
  }

  receive(frame) {
    if (frame.type === "hello") {
      this.connectionId = frame.connectionId;
      this.attempt = 0;
      this.status("online");
      if (this.viewing) this.socket.send(JSON.stringify({ type: "view", conversationId: this.viewing }));
      if (Object.keys(this.cursors).length) this.request({ type: "resume", cursors: { ...this.cursors } }).catch(() => {});
    }
    if ((frame.type === "ack" || frame.type === "error") && frame.id && this.pending.has(frame.id)) {
      const { resolve, reject } = this.pending.get(frame.id);
      this.pending.delete(frame.id);
      frame.type === "ack" ? resolve(frame) : reject(Object.assign(new Error(frame.error.message), { code: frame.error.code }));
      return;  // an answer to this client's own request
    }
    if (frame.type === "resumed" && !frame.complete) {
      this.request({ type: "resume", cursors: frame.cursors }).catch(() => {});
    }
    const seq = frame.message?.seq ?? frame.event?.seq;
    const conversationId = frame.message?.conversationId ?? frame.event?.conversationId;
    if (seq && conversationId && frame.type !== "ack") this.seen(conversationId, seq);
    this.dispatchEvent(new CustomEvent("frame", { detail: frame }));
  }

  /** Sends a frame that the server answers with ack or error. */
  request(frame) {
    return new Promise((resolve, reject) => {
      if (this.socket?.readyState !== WebSocket.OPEN) { reject(new Error("offline")); return; }
      const id = `c${++this.counter}`;
      this.pending.set(id, { resolve, reject });
      this.socket.send(JSON.stringify({ ...frame, id }));
    });
  }

  /** Sends a frame the server does not answer (co-browse's page and pointer); false when offline. */
  post(frame) {
    if (this.socket?.readyState !== WebSocket.OPEN) return false;
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  /** Tells the server which conversation this agent has open: its typing and receipts come here. */
  view(conversationId) {
    this.viewing = conversationId;
    if (this.socket?.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify({ type: "view", conversationId: conversationId ?? null }));
    }
  }

  typing(conversationId, isTyping) {
    if (this.socket?.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify({ type: "typing", conversationId, isTyping }));
    }
  }
}
