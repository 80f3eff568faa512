"""The workspace's model (Public/js/workspace/store.js) and its formats, without the page around
them: imported into a real Chromium from the server's own files and driven with a fake API, the way
TodoMVC tests its model apart from its views. The controller and the views are covered end to end
by the other workspace tests."""
import json
from pathlib import Path

PREVIEWS = Path(__file__).parent / "message-previews.json"


MODEL_CHECKS = """
async (previewCases) => {
  const { WorkspaceStore, previewOf, textPreview, byLastMessage } = await import("/js/workspace/store.js");
  const { timeLeft, browserName } = await import("/js/workspace/format.js");
  const { highlighted } = await import("/js/workspace/list-view.js");
  const calls = [];
  const api = {
    get: async (path) => {
      calls.push(path);
      if (path.startsWith("/v1/consumers/cns_gone")) throw new Error("gone");
      if (path.startsWith("/v1/consumers/")) return { displayName: "Dana " + path.split("/").pop() };
      if (path === "/v1/apps") return { items: [{ id: "app_web", name: "Web widget" }] };
      if (path === "/v1/presence") return { items: [{ agentId: "agt_sam", name: "Sam" }] };
      throw new Error("unexpected " + path);
    },
  };
  const store = new WorkspaceStore(api);
  store.me = { id: "agt_me", role: "agent", permissions: ["send_audio"] };
  const conversation = (id, fields) => ({ id, consumerId: "cns_" + id, state: "open", lastSeq: 1, createdAt: "2026-11-01T00:00:00Z", ...fields });
  for (const item of [
    conversation("a", { lastMessageAt: "2026-11-02T10:00:00Z" }),
    conversation("b", { lastMessageAt: "2026-11-03T10:00:00Z", assigneeId: "agt_me" }),
    conversation("c", { state: "resolved", lastMessageAt: "2026-11-04T10:00:00Z" }),
    conversation("d", {}),
  ]) {
    store.conversations.set(item.id, item);
    if (item.state !== "resolved") store.open.set(item.id, item);
  }
  const results = {};
  results.open = store.visibleConversations().map((item) => item.id);
  store.filter = "mine";
  results.mine = store.visibleConversations().map((item) => item.id);
  store.filter = "unassigned";
  results.unassigned = store.visibleConversations().map((item) => item.id);
  store.filter = "resolved";
  results.resolved = store.visibleConversations().map((item) => item.id);
  store.filter = "open";
  results.counts = store.counts();
  // A state older than the one known changes nothing; a newer one replaces it, and the shown one follows.
  store.current = store.conversations.get("a");
  results.staleTaken = store.update(conversation("a", { lastSeq: 0, state: "resolved" }));
  results.afterStale = store.conversations.get("a").state;
  results.newerTaken = store.update(conversation("a", { lastSeq: 5, state: "resolved" }));
  results.currentFollows = store.current.state;
  results.openAfterResolve = store.open.has("a");
  // A message moves its conversation to the top with the server's wording of its line.
  const voice = { conversationId: "d", seq: 2, kind: "voice", text: "[audio message 0:43]", createdAt: "2026-11-05T10:00:00Z", voice: { durationMs: 42500, state: "ready" } };
  const moved = store.withMessage(voice);
  store.update(moved);
  results.moved = { preview: moved.lastMessagePreview, kind: moved.lastMessageKind, lastSeq: moved.lastSeq, first: store.visibleConversations()[0].id };
  results.unknown = store.withMessage({ ...voice, conversationId: "zzz" });
  results.previews = [
    textPreview("line one\\n\\nline two\\r\\nthree"),
    textPreview("x".repeat(120)).length,
    textPreview("x".repeat(130)),
    textPreview("👍🏽".repeat(121)),
    previewOf({ kind: "voice", voice: { state: "blocked", durationMs: 1000 } }),
    previewOf({ kind: "attachment", attachment: { type: "png", fileName: "a.png" } }),
    previewOf({ kind: "attachment", attachment: { type: "pdf", fileName: "terms.pdf" } }),
    previewOf({ kind: "voice", voice: { durationMs: 120000 } }),
  ];
  // The server's words for each case (e2e/message-previews.json, written by MessagePreviewFixtureTests).
  results.sharedPreviews = previewCases.map((item) => {
    const message = item.kind === "text" ? { kind: "text", text: item.text }
      : item.kind === "voice" ? { kind: "voice", voice: { durationMs: item.durationMs, state: item.blocked ? "blocked" : "ready",
          transcript: item.transcript == null ? undefined : { state: "ready", text: item.transcript } } }
      : { kind: "attachment", attachment: { type: item.attachmentType, fileName: item.fileName } };
    return { expected: item.preview, page: previewOf(message) };
  }).filter((result) => result.expected !== result.page);
  results.unread = (store.countUnread("b"), store.countUnread("b"), store.countUnread("d"), store.unreadTotal());
  results.alerts = [
    store.alertsFor({ senderKind: "consumer", seq: 1 }, null),
    store.alertsFor({ senderKind: "consumer", seq: 4 }, { assigneeId: "agt_me" }),
    store.alertsFor({ senderKind: "consumer", seq: 4 }, { assigneeId: "agt_sam" }),
    store.alertsFor({ senderKind: "agent", seq: 1 }, null),
  ];
  // Customers and apps are fetched once; a customer who cannot be read is "Customer".
  await Promise.all([store.consumer("cns_x"), store.consumer("cns_x"), store.consumer("cns_x")]);
  results.gone = (await store.consumer("cns_gone")).displayName;
  results.apps = [await store.appName("app_web"), await store.appName("app_other")];
  results.names = [await store.agentName("agt_me"), await store.agentName("agt_sam"), await store.agentName("agt_nobody")];
  results.requests = calls.filter((path) => path === "/v1/consumers/cns_x" || path === "/v1/apps" || path === "/v1/presence").length;
  results.mayRecordVoice = [
    (store.settings = { voiceFromAgents: true }, store.mayRecordVoice),
    (store.settings = { voiceFromAgents: false }, store.mayRecordVoice),
  ];
  results.order = [
    { id: "x", createdAt: "2026-11-01T00:00:00Z" }, { id: "y", createdAt: "2026-11-01T00:00:00Z", lastMessageAt: "2026-11-02T00:00:00Z" },
  ].sort(byLastMessage).map((item) => item.id);
  results.timeLeft = [timeLeft(83_990_000), timeLeft(5 * 86_400_000 + 3 * 3_600_000), timeLeft(45 * 60_000), timeLeft(30_000)];
  results.browsers = [
    browserName("Mozilla/5.0 (Linux; Android 14) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Mobile Safari/537.36"),
    browserName("Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1"),
  ];
  const marked = highlighted("Where is my parcel? It has not arrived", "parcel arrive");
  results.marked = [...marked.querySelectorAll("mark")].map((mark) => mark.textContent);
  return results;
}
"""


def test_workspace_model(server, browser, console_errors):
    page = console_errors(browser.new_page())
    # A page that is not HTML has no icon link, and the browser asks for /favicon.ico (Parley's is an SVG).
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    page.goto(server.url + "/health")  # an origin to import the modules from, without booting a page
    cases = json.loads(PREVIEWS.read_text())
    assert len(cases) >= 20
    results = page.evaluate(MODEL_CHECKS, cases)
    page.close()
    assert results["open"] == ["b", "a", "d"], results
    assert results["mine"] == ["b"]
    assert results["unassigned"] == ["a", "d"]
    assert results["resolved"] == ["c"]
    assert results["counts"] == {"open": 3, "mine": 1, "unassigned": 2}
    assert results["staleTaken"] is False and results["afterStale"] == "open"
    assert results["newerTaken"] is True and results["currentFollows"] == "resolved" and results["openAfterResolve"] is False
    assert results["moved"] == {"preview": "Audio message 0:43", "kind": "voice", "lastSeq": 2, "first": "d"}
    assert results["unknown"] is None
    # MessageRules.preview(of:): blank lines dropped, 120 characters at most, "…" when cut (counted
    # as the server counts them: an emoji with its skin tone is one character).
    assert results["previews"] == [
        "line one line two three", 120, "x" * 119 + "…", "👍🏽" * 119 + "…", "Audio message blocked", "Image", "File: terms.pdf",
        "Audio message 2:00",
    ], json.dumps(results["previews"], ensure_ascii=False)
    assert results["sharedPreviews"] == [], json.dumps(results["sharedPreviews"], ensure_ascii=False)
    assert results["unread"] == 3
    assert results["alerts"] == [True, True, False, False]
    assert results["gone"] == "Customer"
    assert results["apps"] == ["Web widget", "An app"]
    assert results["names"] == ["You", "Sam", "An agent"]
    assert results["requests"] == 3  # one customer, one app list, one presence list
    assert results["mayRecordVoice"] == [True, False]
    assert results["order"] == ["y", "x"]
    assert results["timeLeft"] == ["23 h 20 min", "5 d 3 h", "45 min", "1 min"]
    assert results["browsers"] == ["Chrome on Android", "Safari on iOS"]
    assert results["marked"] == ["parcel", "arrived"]
    assert console_errors.errors == [], console_errors.errors


TIMELINE_COPIES = """
async () => {
  const { Timeline } = await import("/js/timeline.js");
  const element = document.createElement("div");
  document.body.append(element);
  const timeline = new Timeline(element, { perspective: "agent", api: { get: async () => ({}) } });
  const note = (state) => ({
    id: "msg_note", conversationId: "cnv_a", seq: 2, senderKind: "consumer", senderId: "cns_a", clientMessageId: "wamid.1",
    kind: "voice", text: "[audio message 0:05]", deliveryState: "sent", createdAt: "2026-11-28T02:27:00Z",
    voice: { durationMs: 5200, state, scan: "skipped", waveform: [1, 2, 3] },
  });
  const meta = () => element.querySelector(".row[data-kind=voice] .meta").textContent;
  // The note's voice_processed event reaches the page first, then the history read a moment before it.
  timeline.upsert(note("ready"));
  timeline.upsert(note("processing"));
  const afterLateCopy = meta();
  const stateAfterLateCopy = timeline.rows.get("msg_note").message.voice.state;
  // In order, processing then ready, the note shows as ready.
  timeline.clear();
  timeline.upsert(note("processing"));
  const whileProcessing = meta();
  timeline.upsert(note("ready"));
  return { afterLateCopy, stateAfterLateCopy, whileProcessing, afterReady: meta() };
}
"""


def test_timeline_a_late_copy_does_not_take_a_note_back_to_processing(server, browser, console_errors):
    # CI, 2026-11-28: test_whatsapp_voice_notes_both_ways saw a customer's note stay "Processing…". The
    # workspace opens a conversation and reads its history while the note's voice_processed event
    # can arrive: an HTTP answer read before the renditions were done, landing after the event,
    # took the note back to processing for good.
    page = console_errors(browser.new_page())
    page.route("**/favicon.ico", lambda route: route.fulfill(status=204))
    page.goto(server.url + "/health")
    results = page.evaluate(TIMELINE_COPIES)
    page.close()
    assert "Processing" in results["whileProcessing"], results
    assert "Processing" not in results["afterReady"], results
    assert results["stateAfterLateCopy"] == "ready", results
    assert "Processing" not in results["afterLateCopy"], results
    assert console_errors.errors == [], console_errors.errors
