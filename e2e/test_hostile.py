"""Hostile text in real browsers: script and HTML as message text and as names never runs in the
agent workspace or the widget; it shows as typed, and the pages carry a Content-Security-Policy."""

from playwright.sync_api import expect

from test_voice import DESKTOP, PHONE, login

PAYLOADS = [
    "<script>window.__pwned = 'script'</script>",
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "\"><svg onload=\"window.__pwned = 'svg'\"></svg>",
    "<a href=\"javascript:window.__pwned='link'\">click me</a>",
    "{{constructor.constructor('window.__pwned=1')()}}",
]
NAME = "<img src=x onerror=\"window.__pwned = 'name'\">Mallory"


def watch(page, dialogs):
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    return page


def test_script_and_html_in_messages_and_names_never_run(server, browser, shoot, console_errors):
    dialogs = []
    context = browser.new_context(viewport=PHONE)
    consumer = console_errors(watch(context.new_page(), dialogs))
    # A consumer whose display name is markup, signed in the way the widget keeps its session.
    session = context.request.post(f"{server.url}/v1/consumer/session", data={"appId": server.app_id, "displayName": NAME}).json()
    consumer.add_init_script(f"localStorage.setItem('parley.consumer.{server.app_id}', {session['token']!r})")
    response = consumer.goto(f"{server.url}/widget.html?app={server.app_id}")
    csp = response.headers.get("content-security-policy", "")
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0], csp
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    for payload in PAYLOADS:
        consumer.fill("#message", payload)
        consumer.press("#message", "Enter")
    expect(consumer.locator(".row.out")).to_have_count(len(PAYLOADS))
    # Shown as typed.
    bubbles = consumer.locator(".row.out .bubble")
    for index, payload in enumerate(PAYLOADS):
        expect(bubbles.nth(index)).to_have_text(payload)
    shoot(consumer, "hostile-text-widget-360")

    agent = console_errors(watch(browser.new_context(viewport=DESKTOP).new_page(), dialogs))
    response = agent.goto(server.url + "/")
    assert "frame-ancestors 'none'" in response.headers.get("content-security-policy", "")
    login(agent, server)
    item = agent.locator(".conversations li button", has_text="Mallory")
    expect(item.locator(".who")).to_have_text(NAME)
    item.click()
    expect(agent.locator(".consumer-name")).to_have_text(NAME)
    expect(agent.locator(".d-name")).to_have_text(NAME)
    incoming = agent.locator(".row.in .bubble")
    expect(incoming).to_have_count(len(PAYLOADS))
    for index, payload in enumerate(PAYLOADS):
        expect(incoming.nth(index)).to_have_text(payload)
    # The agent answers with markup too; the consumer sees text.
    agent.fill("#reply", "<b onmouseover=\"window.__pwned='reply'\">bold?</b>")
    agent.press("#reply", "Enter")
    expect(consumer.locator(".row.in .bubble").last).to_have_text("<b onmouseover=\"window.__pwned='reply'\">bold?</b>")
    consumer.locator(".row.in .bubble").last.hover()
    shoot(agent, "hostile-text-workspace-1280")

    for page in (consumer, agent):
        assert page.evaluate("() => window.__pwned") is None
        # No element came from a message: the only images and links are none, SVGs are our icons.
        assert page.locator(".timeline img, .timeline script, .timeline a, .conversations img").count() == 0
        assert page.locator(".timeline svg:not(.icon), .conversations svg:not(.icon)").count() == 0
    assert dialogs == []
    # The consumer's name came back on the consumer side untouched as well.
    assert consumer.evaluate("() => document.title") == "Chat with Demo Brand"
    assert console_errors.errors == []
