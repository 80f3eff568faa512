// Inline SVG icons (stroke icons on a 24 px grid). Decorative: buttons carry their own labels.
const paths = {
  mic: '<rect x="9" y="3" width="6" height="11" rx="3"/><path d="M5 11a7 7 0 0 0 14 0M12 18v3"/>',
  stop: '<rect x="6" y="6" width="12" height="12" rx="2"/>',
  pause: '<path d="M9 5v14M15 5v14"/>',
  play: '<path d="M7 5l12 7-12 7z"/>',
  trash: '<path d="M4 7h16M10 11v6M14 11v6M6 7l1 13h10l1-13M9 7V4h6v3"/>',
  send: '<path d="M4 12l16-8-6 16-2-7z"/>',
  download: '<path d="M12 4v11M7 10l5 5 5-5M5 20h14"/>',
  retry: '<path d="M4 12a8 8 0 1 0 3-6.2M4 4v5h5"/>',
  check: '<path d="M5 12l5 5 9-10"/>',
  history: '<path d="M3 12a9 9 0 1 0 3-6.7M3 4v5h5M12 7v5l3 2"/>',
  chart: '<path d="M4 20V10M10 20V4M16 20v-7M22 20H2"/>',
  star: '<path d="M12 3.5l2.6 5.3 5.9.9-4.3 4.1 1 5.8L12 16.9l-5.2 2.7 1-5.8-4.3-4.1 5.9-.9z"/>',
  checks: '<path d="M2 12l5 5 9-10M11 16l1 1 9-10"/>',
  logout: '<path d="M15 4h4v16h-4M10 8l-4 4 4 4M6 12h11"/>',
  back: '<path d="M15 5l-7 7 7 7"/>',
  chat: '<path d="M4 5h16v11H9l-5 4z"/>',
  close: '<path d="M6 6l12 12M18 6L6 18"/>',
  bell: '<path d="M6 16V11a6 6 0 0 1 12 0v5l2 2H4zM10 20a2 2 0 0 0 4 0"/>',
  lock: '<rect x="5" y="11" width="14" height="9" rx="2"/><path d="M8 11V8a4 4 0 0 1 8 0v3"/>',
  info: '<circle cx="12" cy="12" r="9"/><path d="M12 11v6M12 7.5v.5"/>',
  shield: '<path d="M12 3l8 3v6c0 5-3.5 8-8 9-4.5-1-8-4-8-9V6z"/><path d="M12 8v5M12 16.5v.5"/>',
  phone: '<path d="M5 4h4l2 5-2.5 1.5a11 11 0 0 0 5 5L15 13l5 2v4a2 2 0 0 1-2 2A16 16 0 0 1 3 6a2 2 0 0 1 2-2"/>',
  video: '<rect x="3" y="6" width="13" height="12" rx="2"/><path d="M16 10l5-3v10l-5-3"/>',
  cobrowse: '<rect x="3" y="4" width="18" height="13" rx="2"/><path d="M8 21h8M12 17v4M11 8l5 3-2.2.6L13 14l-1 .4-.8-2.3L10 13z"/>',
  "screen-share": '<rect x="3" y="4" width="18" height="13" rx="2"/><path d="M8 21h8M12 17v4M12 13V8M9.5 10.5L12 8l2.5 2.5"/>',
  "mic-off": '<path d="M3 3l18 18M9 9v2a3 3 0 0 0 5.1 2.1M15 10V6a3 3 0 0 0-5.7-1.3M5 11a7 7 0 0 0 11.5 5.4M19 11a7 7 0 0 1-.6 2.8M12 18v3"/>',
  "video-off": '<path d="M3 3l18 18M16 16H5a2 2 0 0 1-2-2V8a2 2 0 0 1 2-2h1m4 0h4a2 2 0 0 1 2 2v4M16 10l5-3v10l-3-1.8"/>',
  "switch-camera": '<path d="M4 8h3l2-3h6l2 3h3v11H4z"/><path d="M9 13a3 3 0 0 1 5.2-2M15 13a3 3 0 0 1-5.2 2M14 9v2h-2M10 17v-2h2"/>',
  paperclip: '<path d="M20 11.5l-8.2 8.2a5 5 0 0 1-7.1-7.1l8.5-8.5a3.3 3.3 0 0 1 4.7 4.7l-8.5 8.5a1.7 1.7 0 0 1-2.4-2.4l7.8-7.8"/>',
  file: '<path d="M14 3H6v18h12V7zM14 3v4h4M9 13h6M9 17h6"/>',
  search: '<circle cx="11" cy="11" r="7"/><path d="M20 20l-4-4"/>',
  keyboard: '<rect x="2" y="6" width="20" height="12" rx="2"/><path d="M6 10h.01M10 10h.01M14 10h.01M18 10h.01M7 14h10"/>',
  reply: '<path d="M9 14l-5-5 5-5M4 9h10a6 6 0 0 1 6 6v4"/>',
  link: '<path d="M10 14a5 5 0 0 0 7 0l3-3a5 5 0 0 0-7-7l-1 1M14 10a5 5 0 0 0-7 0l-3 3a5 5 0 0 0 7 7l1-1"/>',
  "hang-up": '<path d="M3 15.5c5-5 13-5 18 0l-2.5 2.5-3.5-2v-2.5a10 10 0 0 0-6 0V16l-3.5 2z"/>',
};

export function icon(name) {
  return `<svg class="icon" viewBox="0 0 24 24" aria-hidden="true">${paths[name] ?? ""}</svg>`;
}

export function clock(milliseconds) {
  const seconds = Math.max(0, Math.round(milliseconds / 1000));
  return `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
}

/** Text for an element, never HTML: message text and names are shown as typed. */
export function text(value) {
  const span = document.createElement("span");
  span.textContent = value ?? "";
  return span;
}

/**
 * Message text with its http(s) links made clickable (opened in a new tab, without access to this
 * page); everything else stays text, never HTML.
 */
export function linkedText(value) {
  const span = document.createElement("span");
  const pattern = /\bhttps?:\/\/[^\s<>"']+/gi;
  let last = 0;
  for (const match of (value ?? "").matchAll(pattern)) {
    // A sentence's closing punctuation is not part of the link.
    const url = match[0].replace(/[.,;:!?)\]]+$/, "");
    span.append(document.createTextNode(value.slice(last, match.index)));
    const link = Object.assign(document.createElement("a"), { href: url, textContent: url, target: "_blank", rel: "noopener noreferrer" });
    span.append(link);
    last = match.index + url.length;
  }
  span.append(document.createTextNode((value ?? "").slice(last)));
  return span;
}

/** One or two letters for an avatar: the first and last words' initials (`one`: the first only); a
 * customer known only by their phone number (SMS, WhatsApp) gets the number's last two digits. */
export function initials(name, { one = false } = {}) {
  if (/^\+?[\d\s().-]{6,}$/.test(name ?? "")) return name.replace(/\D/g, "").slice(one ? -1 : -2);
  const words = (name ?? "").trim().split(/\s+/).filter(Boolean);
  return ((words[0]?.[0] ?? "?") + (words.length > 1 && !one ? words.at(-1)[0] : "")).toUpperCase();
}

/** Whether an attachment is shown as a picture (the server's AttachmentType.isImage). */
export function isImage(attachment) {
  return ["jpeg", "png", "gif", "webp", "heic"].includes(attachment?.type);
}
