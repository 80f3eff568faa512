// The HTTP API, for the workspace (session cookie) and the widget (bearer token).
export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `Request failed (${status})`);
    this.status = status;
    this.code = body?.error?.code ?? `http_${status}`;
    /** Seconds after which a rate-limited request may succeed (429). */
    this.retryAfter = body?.error?.retryAfter ?? null;
  }
}

export class Api {
  constructor({ token = null } = {}) {
    this.token = token;
  }

  headers(extra = {}) {
    const headers = { ...extra };
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    return headers;
  }

  async json(method, path, body) {
    const response = await fetch(path, {
      method,
      credentials: "same-origin",
      headers: this.headers(body === undefined ? {} : { "Content-Type": "application/json" }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (response.status === 204) return null;
    const data = await response.json().catch(() => null);
    if (!response.ok) throw new ApiError(response.status, data);
    return data;
  }

  get(path) { return this.json("GET", path); }
  post(path, body) { return this.json("POST", path, body ?? {}); }

  /** Uploads a recorded blob with progress (fetch cannot report upload progress). */
  upload(path, blob, onProgress, method = "POST") {
    return new Promise((resolve, reject) => {
      const request = new XMLHttpRequest();
      request.open(method, path);
      for (const [name, value] of Object.entries(this.headers({ "Content-Type": blob.type || "application/octet-stream" }))) {
        request.setRequestHeader(name, value);
      }
      request.upload.onprogress = (event) => event.lengthComputable && onProgress?.(event.loaded / event.total);
      request.onload = () => {
        let data = null;
        try { data = JSON.parse(request.responseText); } catch {}
        if (request.status >= 200 && request.status < 300) resolve(data);
        else reject(new ApiError(request.status, data));
      };
      request.onerror = () => reject(new ApiError(0, { error: { code: "network", message: "The connection failed." } }));
      request.send(blob);
    });
  }

  /** Media as a blob URL: an <audio> element cannot send a bearer token. */
  async mediaURL(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: this.headers() });
    if (!response.ok) throw new ApiError(response.status, await response.json().catch(() => null));
    return URL.createObjectURL(await response.blob());
  }
}
