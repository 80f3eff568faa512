#!/usr/bin/env python3
"""Co-browse on a typical page: what it costs the customer's connection and how fast a change on
their page reaches the agent. Prints a Markdown table.

    .venv/bin/python bench/cobrowse.py --parley .build/release/parley [--seconds 20] [--output /tmp/cobrowse.md]

Two pages (bench/fixtures/cobrowse/): a product page (gallery, sizes, 160 reviews, related products)
and a checkout form (12 fields, card fields among them). They are made up, not recorded from a real
shop (these machines reach no outside site), and stand for the DOM a shop's page has once its
scripts have run.

For each page, in headless Chromium, a customer on the page (served from another origin, with
embed.js) says yes to an agent's co-browse offer in a real workspace, against a fresh `parley serve`:

- the snapshot: its bytes on the customer's WebSocket (`cobrowse.data` frames as sent, before
  permessage-deflate) against the page's own HTML;
- typing: the customer types 8 characters a second into a field while the page also changes a
  line of text 10 times a second; the bytes per second the changes cost;
- latency: each of those text changes carries the customer's clock (`performance.timeOrigin +
  performance.now()`, the same clock on one machine); the workspace's page watches the built copy
  of the customer's page (a MutationObserver on the frame's document, from the workspace's side)
  and takes the difference when the text arrives. p50 and p99, and the batching interval of
  js/cobrowse-page.js (150 ms) is part of what is measured.
- baseline: chat messages from the same customer to the same agent, measured the same way (the
  chat reads the clock just before it sends, the agent's page watches its timeline).
"""
import argparse
import http.server
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "e2e"))
from conftest import CHROMIUM, login, running_parley  # noqa: E402
from playwright.sync_api import expect, sync_playwright  # noqa: E402

FIXTURES = ROOT / "bench" / "fixtures" / "cobrowse"


def shop(server):
    pages = {f"/{path.name}": path.read_text() for path in FIXTURES.glob("*.html")}
    embed = f'<script src="{server.url}/embed.js" data-app="{server.app_id}" async></script>'

    class Shop(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            page = pages.get(self.path.split("?")[0])
            self.send_response(200 if page else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.end_headers()
            if page:
                self.wfile.write(page.replace("</body>", embed + "</body>").encode())

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Shop)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


WATCH_VIEWER = """() => {
    window.__latencies = [];
    const frame = document.querySelector('.cobrowse-frame');
    const seen = new Set();
    new MutationObserver(() => {
        const probe = frame.contentDocument.getElementById('parley-bench-probe');
        const sent = Number(probe?.textContent);
        if (sent && !seen.has(sent)) { seen.add(sent); window.__latencies.push(performance.timeOrigin + performance.now() - sent); }
    }).observe(frame.contentDocument, { subtree: true, childList: true, characterData: true });
}"""

WATCH_TIMELINE = """() => {
    window.__latencies = [];
    const seen = new Set();
    new MutationObserver(() => {
        for (const bubble of document.querySelectorAll('.row.in .bubble')) {
            const match = /^bench (\\d+(?:\\.\\d+)?)$/.exec(bubble.textContent.trim());
            const sent = match && Number(match[1]);
            if (sent && !seen.has(sent)) { seen.add(sent); window.__latencies.push(performance.timeOrigin + performance.now() - sent); }
        }
    }).observe(document.querySelector('.timeline'), { subtree: true, childList: true, characterData: true });
}"""


def run_page(browser, server, base, name, seconds):
    visitor = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    sent = []  # (time, bytes) of cobrowse.data frames
    chat_sent = []

    def on_socket(socket):
        def frame_sent(payload):
            text = payload if isinstance(payload, str) else payload.decode("utf-8", "replace")
            if '"cobrowse.data"' in text:
                sent.append((time.monotonic(), len(text.encode()), '"snapshot"' in text))
            elif '"type":"send"' in text.replace(" ", ""):
                chat_sent.append(len(text.encode()))
        socket.on("framesent", frame_sent)
    visitor.on("websocket", on_socket)
    visitor.goto(f"{base}/{name}.html")
    visitor.get_by_role("button", name="Open chat").click()
    chat = visitor.frame_locator("#parley-chat")
    expect(chat.locator(".status")).to_have_attribute("data-state", "online", timeout=15000)
    marker = f"bench-{name}-{time.time_ns()}"
    chat.locator("#message").fill(marker)
    chat.locator("#message").press("Enter")
    expect(chat.locator(".row.out:not(.pending) .bubble").last).to_have_text(marker)

    agent_context = browser.new_context(viewport={"width": 1280, "height": 800})
    agent = agent_context.new_page()
    login(agent, server)
    agent.locator(".conversations li button", has_text=marker).first.click()
    agent.locator(".start-cobrowse").click()
    chat.locator(".cobrowse-offer").get_by_role("button", name="Share this page").click()
    expect(agent.locator(".cobrowse-viewer")).to_have_attribute("data-state", "live", timeout=15000)
    snapshot_bytes = sum(size for _, size, snapshot in sent if snapshot)
    html_bytes = len((FIXTURES / f"{name}.html").read_bytes())

    # Changes: a probe line every 100 ms and typing at 8 characters a second.
    agent.evaluate(WATCH_VIEWER)
    visitor.evaluate("() => { const p = document.createElement('p'); p.id = 'parley-bench-probe'; document.querySelector('main').prepend(p); }")
    agent.wait_for_timeout(1000)  # the probe's own insertion (main's children sent again) is not part of the measure
    field = "#first" if name == "checkout" else "input[type=search]"
    started = time.monotonic()
    sent.clear()
    text = "the quick brown fox jumps over the lazy dog " * 10
    ticks = 0
    while time.monotonic() - started < seconds:
        visitor.evaluate("() => { document.getElementById('parley-bench-probe').textContent = String(performance.timeOrigin + performance.now()); }")
        if ticks % 10 in (0, 1, 2, 4, 5, 6, 7, 9):  # 8 characters a second
            visitor.locator(field).press(text[ticks % len(text)] if text[ticks % len(text)] != " " else "Space")
        ticks += 1
        time.sleep(max(0, started + ticks * 0.1 - time.monotonic()))
    elapsed = time.monotonic() - started
    agent.wait_for_timeout(1000)
    latencies = agent.evaluate("() => window.__latencies")
    change_bytes = sum(size for at, size, snapshot in sent if not snapshot)
    result = {
        "page": name, "html": html_bytes, "snapshot": snapshot_bytes, "changes_per_second": change_bytes / elapsed,
        "frames_per_second": len(sent) / elapsed, "samples": len(latencies),
        "p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99),
    }
    agent.locator(".cobrowse-viewer").get_by_role("button", name="Stop co-browsing").click()

    # Baseline: chat messages from the same customer to the same agent, one every 200 ms.
    agent.locator(".cobrowse-viewer").wait_for(state="hidden")
    agent.evaluate(WATCH_TIMELINE)
    for _ in range(int(seconds * 2)):
        # The clock is read in the chat itself, just before it sends (no automation round trip in the measure).
        chat.locator("#message").evaluate(
            "(box) => { box.value = 'bench ' + (performance.timeOrigin + performance.now()); box.dispatchEvent(new Event('input', { bubbles: true }));"
            " box.form.requestSubmit(); }")
        time.sleep(0.2)
    agent.wait_for_timeout(1000)
    baseline = agent.evaluate("() => window.__latencies")
    result.update(chat_samples=len(baseline), chat_p50=percentile(baseline, 0.5), chat_p99=percentile(baseline, 0.99))
    visitor.context.close()
    agent_context.close()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parley", default=str(ROOT / ".build" / "release" / "parley"))
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--output")
    args = parser.parse_args()
    import os
    os.environ["E2E_PARLEY_BINARY"] = args.parley
    results = []
    with running_parley() as server, sync_playwright() as playwright:
        httpd, base = shop(server)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for name in ("product", "checkout"):
                results.append(run_page(browser, server, base, name, args.seconds))
        finally:
            browser.close()
            httpd.shutdown()
    lines = [
        f"Co-browse, `bench/cobrowse.py --parley {args.parley} --seconds {args.seconds:g}`: a customer's page in headless Chromium,",
        "the agent's workspace in another context of the same browser, a fresh `parley serve` on SQLite. Bytes are the",
        "`cobrowse.data` frames as the customer's page sent them (before permessage-deflate).",
        "",
        "| Page | HTML | Snapshot sent | Changes, bytes/s (frames/s) | Change → agent p50 / p99 (ms, n) | Chat message → agent p50 / p99 (ms, n) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['page']} | {r['html'] / 1024:.1f} KB | {r['snapshot'] / 1024:.1f} KB ({r['snapshot'] / r['html']:.2f}×) | "
            f"{r['changes_per_second'] / 1024:.2f} KB/s ({r['frames_per_second']:.1f}) | {r['p50']:.0f} / {r['p99']:.0f} ({r['samples']}) | "
            f"{r['chat_p50']:.0f} / {r['chat_p99']:.0f} ({r['chat_samples']}) |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        Path(args.output).write_text(text)


if __name__ == "__main__":
    main()
