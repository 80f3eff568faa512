// Parley's chat launcher for any web site, with one tag:
//   <script src="https://chat.example.com/embed.js" data-app="app_..." async></script>
// Adds a round button at the bottom right that opens the chat (full screen on phones).
(() => {
  const script = document.currentScript;
  const app = script?.dataset.app;
  if (!app || window.__parleyEmbedded) return;
  window.__parleyEmbedded = true;
  const origin = new URL(script.src).origin;
  const accent = script.dataset.color || "#4f46e5";

  const button = document.createElement("button");
  button.setAttribute("data-parley-ui", "");
  button.type = "button";
  button.setAttribute("aria-label", "Open chat");
  button.setAttribute("aria-expanded", "false");
  button.setAttribute("aria-controls", "parley-chat");
  button.innerHTML = '<svg viewBox="0 0 24 24" width="26" height="26" aria-hidden="true" fill="none" stroke="currentColor" stroke-width="2" stroke-linejoin="round"><path d="M4 5h16v11H9l-5 4z"/></svg>';
  Object.assign(button.style, {
    position: "fixed", right: "20px", bottom: "20px", width: "56px", height: "56px", borderRadius: "50%", border: "0",
    background: accent, color: "#fff", cursor: "pointer", boxShadow: "0 6px 20px rgb(0 0 0 / 25%)", zIndex: "2147483000",
    display: "grid", placeItems: "center",
  });

  const frame = document.createElement("iframe");
  frame.id = "parley-chat";
  frame.setAttribute("data-parley-ui", "");
  frame.title = "Chat";
  frame.allow = "microphone; camera; autoplay; display-capture";
  frame.hidden = true;
  const phone = matchMedia("(max-width: 480px)");
  const place = () => Object.assign(frame.style, phone.matches
    ? { position: "fixed", inset: "0", width: "100%", height: "100%", border: "0", borderRadius: "0", zIndex: "2147483001" }
    : { position: "fixed", right: "20px", bottom: "88px", width: "380px", height: "min(640px, calc(100vh - 120px))", border: "0",
        borderRadius: "14px", boxShadow: "0 12px 40px rgb(0 0 0 / 25%)", zIndex: "2147483001", background: "#fff" });
  place();
  phone.addEventListener("change", place);

  // A visitor who has chatted before keeps the chat loaded (hidden), so that an answer arriving
  // while the panel is closed shows on the launcher. Someone who never opened it costs nothing.
  const startedKey = `parley.chat.${app}`;
  const load = () => { if (!frame.src) frame.src = `${origin}/widget.html?app=${encodeURIComponent(app)}&embedded=1`; };
  let started = false;
  try { started = localStorage.getItem(startedKey) === "1"; } catch {}

  const badge = document.createElement("span");
  badge.setAttribute("aria-hidden", "true");
  Object.assign(badge.style, {
    position: "absolute", top: "-4px", right: "-4px", minWidth: "22px", height: "22px", padding: "0 6px", borderRadius: "11px",
    background: "#dc2626", color: "#fff", font: "700 12px/22px system-ui, sans-serif", textAlign: "center", display: "none",
    boxShadow: "0 0 0 2px #fff",
  });
  button.append(badge);
  button.style.position = "fixed";
  const pageTitle = document.title;
  let unread = 0;
  let blink;
  const showUnread = (count) => {
    unread = count;
    badge.textContent = count > 9 ? "9+" : String(count);
    badge.style.display = count ? "block" : "none";
    button.setAttribute("aria-label", frame.hidden ? (count ? `Open chat, ${count} new message${count === 1 ? "" : "s"}` : "Open chat") : "Close chat");
    clearInterval(blink);
    document.title = pageTitle;
    // The page's title blinks while the tab is in the background.
    if (count && document.hidden) blink = setInterval(() => { document.title = document.title === pageTitle ? "New message" : pageTitle; }, 1000);
  };
  document.addEventListener("visibilitychange", () => { if (!document.hidden) { clearInterval(blink); document.title = pageTitle; } });

  // A short preview of an answer while the chat is closed (only the brand's own sites get one).
  const preview = document.createElement("div");
  preview.setAttribute("data-parley-ui", "");
  preview.setAttribute("role", "status");
  preview.setAttribute("aria-live", "polite");
  Object.assign(preview.style, {
    position: "fixed", right: "20px", bottom: "88px", maxWidth: "min(300px, calc(100vw - 40px))", display: "none", zIndex: "2147483000",
    background: "#fff", color: "#1c2230", borderRadius: "14px", boxShadow: "0 8px 28px rgb(0 0 0 / 22%)", font: "14px/1.4 system-ui, sans-serif",
  });
  const previewOpen = document.createElement("button");
  previewOpen.type = "button";
  Object.assign(previewOpen.style, { all: "unset", display: "block", padding: "12px 36px 12px 14px", cursor: "pointer", borderRadius: "14px" });
  const previewName = document.createElement("strong");
  previewName.style.display = "block";
  const previewText = document.createElement("span");
  Object.assign(previewText.style, { display: "-webkit-box", webkitLineClamp: "2", webkitBoxOrient: "vertical", overflow: "hidden", color: "#3b4252" });
  previewOpen.append(previewName, previewText);
  const previewClose = document.createElement("button");
  previewClose.type = "button";
  previewClose.setAttribute("aria-label", "Dismiss");
  previewClose.textContent = "×";
  Object.assign(previewClose.style, {
    position: "absolute", top: "6px", right: "6px", width: "26px", height: "26px", border: "0", borderRadius: "50%", background: "transparent",
    color: "#5b6475", font: "20px/26px system-ui, sans-serif", cursor: "pointer",
  });
  preview.append(previewOpen, previewClose);
  previewClose.addEventListener("click", () => { preview.style.display = "none"; });
  previewOpen.addEventListener("click", () => toggle(true));
  const showPreview = (name, text) => {
    previewName.textContent = name;
    previewText.textContent = text;
    previewOpen.setAttribute("aria-label", `New message from ${name}: ${text}. Open chat`);
    preview.style.display = "block";
  };

  const toggle = (open) => {
    if (open) preview.style.display = "none";
    if (open) {
      load();
      try { localStorage.setItem(startedKey, "1"); } catch {}
    }
    frame.hidden = !open;
    button.setAttribute("aria-expanded", String(open));
    if (open) showUnread(0);
    button.setAttribute("aria-label", open ? "Close chat" : "Open chat");
    frame.contentWindow?.postMessage(open ? "parley:open" : "parley:closed", origin);
    if (open) frame.focus();
  };
  button.addEventListener("click", () => toggle(frame.hidden));
  // The widget asks to close (its close button on phones) by message, and to open when a call rings.
  window.addEventListener("message", (event) => {
    if (event.origin !== origin) return;
    if (event.data === "parley:close") { toggle(false); button.focus(); }
    if (event.data === "parley:ringing" && frame.hidden) toggle(true);
    if (event.data?.type === "parley:unread" && frame.hidden) showUnread(Number(event.data.count) || 0);
    if (event.data?.type === "parley:preview" && frame.hidden) showPreview(String(event.data.name ?? "").slice(0, 60), String(event.data.text ?? "").slice(0, 90));
    if (event.data?.type === "parley:cobrowse") cobrowse(event.data);
    // The brand's colour from its settings, once the chat has loaded.
    if (event.data?.type === "parley:color" && /^#[0-9a-f]{6}$/i.test(event.data.color)) button.style.background = event.data.color;
  });
  document.addEventListener("keydown", (event) => { if (event.key === "Escape" && !frame.hidden) { toggle(false); button.focus(); } });

  // Co-browse, once the customer said yes in the chat: the page's side (js/cobrowse-page.js, from
  // Parley's origin) is loaded only then. What it sends goes to the chat, which relays it.
  let cobrowseScript;
  const toChat = (message) => frame.contentWindow?.postMessage(message, origin);
  function cobrowse(message) {
    const run = () => {
      const page = window.__parleyCobrowse;
      if (!page) return;
      if (message.action === "start") {
        // On a phone the chat covers the page: it steps aside so the customer sees what they share.
        if (phone.matches && !frame.hidden && !page.running) toggle(false);
        page.start({
          agentName: String(message.agentName ?? "An agent").slice(0, 80), brandName: String(message.brandName ?? "").slice(0, 80),
          maskSelectors: Array.isArray(message.maskSelectors) ? message.maskSelectors.map(String) : [],
          send: (kind, payload, last) => toChat({ type: "parley:cobrowse-data", kind, payload, last }),
          onStop: () => toChat({ type: "parley:cobrowse-stop" }),
          onRelease: () => toChat({ type: "parley:cobrowse-release" }),
        });
        if (message.granted) page.control(true);
      } else if (message.action === "stop") page.stop();
      else if (message.action === "control") {
        page.control(message.granted === true);
        // On a phone the chat steps aside once the agent may act, so the customer watches the page.
        if (message.granted === true && phone.matches && !frame.hidden) toggle(false);
      } else if (message.action === "input") page.input({ kind: String(message.kind), id: Number(message.id), value: message.value });
      else if (message.action === "point") page.point(Number(message.x), Number(message.y), Number(message.id));
      else if (message.action === "resync") page.resync();
    };
    if (window.__parleyCobrowse) return run();
    if (message.action !== "start") return;
    if (!cobrowseScript) {
      cobrowseScript = document.createElement("script");
      cobrowseScript.src = `${origin}/js/cobrowse-page.js`;
      cobrowseScript.async = true;
      document.head.append(cobrowseScript);
    }
    cobrowseScript.addEventListener("load", run, { once: true });
  }
  // The widget learns whether its panel is open once it has loaded.
  // It also learns the page the visitor is on, for the agent's details pane.
  frame.addEventListener("load", () => {
    frame.contentWindow.postMessage(frame.hidden ? "parley:closed" : "parley:open", origin);
    frame.contentWindow.postMessage({ type: "parley:page", url: location.href, title: document.title }, origin);
  });
  document.body.append(frame, preview, button);
  if (started) load();
})();
