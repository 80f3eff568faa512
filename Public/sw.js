// Parley's service worker for the chat widget: shows the notifications the server sends with Web
// Push while the consumer is away (RFC 8291 payloads, decrypted by the browser), and brings the
// chat back when one is clicked.
self.addEventListener("push", (event) => {
  let data = {};
  try { data = event.data ? event.data.json() : {}; } catch { data = {}; }
  event.waitUntil(self.registration.showNotification(data.title || "New message", {
    body: data.body || "",
    tag: data.conversationId || "parley",
    renotify: true,
    icon: "/favicon.svg",
    data,
  }));
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const appId = event.notification.data?.appId;
  event.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const chat = windows.find((client) => new URL(client.url).pathname === "/widget.html");
    if (chat) return chat.focus();
    if (appId) return self.clients.openWindow(`/widget.html?app=${encodeURIComponent(appId)}`);
  })());
});
