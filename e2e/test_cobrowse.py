"""Co-browse (issue 29): the agent offers from the conversation, the customer says yes in the chat on
the brand's own site (another origin, with embed.js), the agent sees the page live in the workspace
with private fields masked in the customer's browser, points at something, follows the customer to
the site's next page, and the customer stops it from the banner. An agent allowed to take control
asks, the customer says yes separately, and the agent types and presses on the customer's page but
never reaches a private field. A hostile page runs nothing in the agent's workspace."""
import re
import uuid
from contextlib import contextmanager

import pytest
from playwright.sync_api import expect

from conftest import ARTIFACTS, brand_site, login, running_parley
from test_webkit import wait_until, webkit  # noqa: F401
from test_workspace import DESKTOP, agent_page, open_conversation, signed_in  # noqa: F401

# The sizes the issue names: an iPhone's 390 px and a laptop's 1280 px.
PHONE = {"width": 390, "height": 844}

SHOP_STYLE = """
  body { font-family: system-ui, sans-serif; margin: 0; color: #1c2230; background: #f6f7fb; }
  header { background: #0f766e; color: #fff; padding: 18px 32px; }
  main { padding: 24px 32px; max-width: 640px; }
  form { display: grid; gap: 12px; background: #fff; padding: 20px; border-radius: 12px; box-shadow: 0 1px 3px rgb(0 0 0 / 10%); }
  label { display: grid; gap: 4px; font-weight: 600; }
  input, select { font: inherit; padding: 8px 10px; border: 1px solid #cbd5e1; border-radius: 8px; }
  button { font: inherit; padding: 8px 14px; border: 0; border-radius: 8px; background: #0f766e; color: #fff; }
"""

CHECKOUT = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Checkout · Example Shop</title>
<style>{style}</style></head><body>
<header><strong>Example Shop</strong></header>
<main><h1>Checkout</h1>
<form onsubmit="return false">
  <label>Full name <input id="name" name="name" autocomplete="name"></label>
  <label>Card number <input id="card" name="card" autocomplete="cc-number" inputmode="numeric"></label>
  <label>Password <input id="password" type="password" name="password"></label>
  <label>Loyalty code <input id="loyalty" name="loyalty" data-parley-mask></label>
  <label>Country <select id="country" name="country"><option value="GB">United Kingdom</option><option value="ES">Spain</option><option value="FR">France</option></select></label>
  <p><button id="apply" type="button" onclick="document.getElementById('applied').textContent = 'Coupon applied'">Apply coupon</button> <span id="applied"></span></p>
</form>
<p class="account">Account <span id="iban">GB33 BUKB 2020 1555 5555 55</span></p>
<p><a id="next" href="/delivery.html">Continue to delivery</a></p>
</main>
<script src="{parley}/embed.js" data-app="{app}" async></script></body></html>"""

DELIVERY = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Delivery · Example Shop</title>
<style>{style}</style></head><body>
<header><strong>Example Shop</strong></header>
<main><h1>Delivery</h1><p>Choose a delivery day.</p></main>
<script src="{parley}/embed.js" data-app="{app}" async></script></body></html>"""

# A page far larger than the server below accepts for one snapshot.
LARGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Catalogue · Example Shop</title>
<style>{style}</style></head><body><header><strong>Example Shop</strong></header><main><h1>Catalogue</h1>
""" + "".join(f"<p>Product {index}: a very fine thing, in stock.</p>" for index in range(4000)) + """
</main><script src="{parley}/embed.js" data-app="{app}" async></script></body></html>"""

# Everything a page could try to run in the agent's workspace.
HOSTILE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Hostile</title>
<meta http-equiv="refresh" content="3600; url={parley}/">
<base href="{parley}/">
<style>body {{ background: url("javascript:top.__pwned = 'css'"); }}</style></head>
<body onload="top.__pwned = 'onload'"><h1 id="hostile">Hostile page</h1>
<script>window.__shopScriptRan = true;</script>
<img id="bad-img" src="javascript:top.__pwned='img'" onerror="top.__pwned = 'onerror'">
<a id="bad-link" href="javascript:top.__pwned='link'">click</a>
<iframe srcdoc="<script>top.__pwned='srcdoc'</script>"></iframe>
<svg width="10" height="10"><script>top.__pwned = 'svg'</script><circle cx="5" cy="5" r="4" onclick="top.__pwned='svg-click'"/></svg>
<form id="bad-form" action="{parley}/v1/auth/logout" method="post"><button id="bad-submit" formaction="{parley}/v1/auth/logout">Go</button></form>
<div id="bad-style" style="background-image: url(javascript:top.__pwned='style')">styled</div>
<script src="{parley}/embed.js" data-app="{app}" async></script></body></html>"""


@contextmanager
def shop_site(server):
    """The brand's site on another loopback origin: a checkout, a delivery page, a hostile page, a large one."""
    pages = {"/checkout.html": CHECKOUT, "/delivery.html": DELIVERY, "/hostile.html": HOSTILE, "/large.html": LARGE}
    with brand_site(server, {path: page.format(style=SHOP_STYLE, parley=server.url, app=server.app_id) for path, page in pages.items()}) as url:
        yield url.rstrip("/")


def visit(browser, console_errors, url, viewport, text):
    """A customer on the brand's page who writes in the chat. Returns the page and the chat frame."""
    visitor = console_errors(browser.new_context(viewport=viewport).new_page())
    visitor.goto(url)
    visitor.get_by_role("button", name="Open chat").click()
    chat = visitor.frame_locator("#parley-chat")
    expect(chat.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    chat.locator("#message").fill(text)
    chat.locator("#message").press("Enter")
    expect(chat.locator(".row.out:not(.pending) .bubble").last).to_have_text(text)
    return visitor, chat


def offer(agent, marker):
    open_conversation(agent, marker)
    agent.locator(".start-cobrowse").click()
    viewer = agent.locator(".cobrowse-viewer")
    expect(viewer).to_be_visible()
    return viewer


@pytest.mark.parametrize("name,size", [("phone", PHONE), ("desktop", DESKTOP)])
def test_cobrowse_from_offer_to_stop(server, browser, signed_in, shoot, console_errors, name, size):
    marker = f"Coupon {uuid.uuid4().hex[:6]}"
    with shop_site(server) as shop:
        visitor, chat = visit(browser, console_errors, f"{shop}/checkout.html", size, f"{marker}: where does it go?")
        agent = agent_page(browser, server, signed_in, console_errors, size)
        viewer = offer(agent, marker)
        expect(viewer.locator(".cobrowse-status")).to_contain_text("to accept")
        shoot(agent, f"offered-{name}")

        # The customer is asked first; nothing is shared before the yes.
        card = chat.locator(".cobrowse-offer")
        expect(card).to_contain_text("would like to see this page")
        expect(card).to_contain_text("Passwords and card details stay hidden")
        assert visitor.locator("[data-parley-ui=cobrowse-banner]").count() == 0
        shoot(visitor, f"asked-{name}")
        card.get_by_role("button", name="Share this page").click()

        # The banner stays on the page while it runs.
        banner = visitor.locator("[data-parley-ui=cobrowse-banner]")
        expect(banner).to_contain_text("can see this page")
        expect(banner.get_by_role("button", name="Stop")).to_be_visible()

        # The agent sees the page, live.
        frame = agent.frame_locator(".cobrowse-frame")
        expect(frame.locator("h1")).to_have_text("Checkout", timeout=10000)
        expect(viewer).to_have_attribute("data-state", "live")
        expect(viewer.locator(".cobrowse-url")).to_have_text(f"{shop}/checkout.html")

        # What the customer types: the name as it is, private fields as dots, masked in their browser.
        visitor.locator("#name").fill("Ana Lopez")
        visitor.locator("#card").fill("4242 4242 4242 4242")
        visitor.locator("#password").fill("hunter2!")
        visitor.locator("#loyalty").fill("LOYAL-778")
        expect(frame.locator("#name")).to_have_value("Ana Lopez")
        expect(frame.locator("#card")).to_have_value("•••• •••• •••• ••••")
        expect(frame.locator("#password")).to_have_value("••••••••")
        expect(frame.locator("#loyalty")).to_have_value("•••••••••")
        shoot(visitor, f"customer-typing-{name}")
        shoot(agent, f"agent-sees-{name}")

        # The agent points at the name field; the customer sees the ring there and the field outlined.
        # (Measured from the workspace's side: nothing, not even the test's own script, runs in the frame.)
        spot = agent.locator(".cobrowse-frame").evaluate("""(frame) => {
            const scale = frame.getBoundingClientRect().width / frame.offsetWidth;
            const box = frame.contentDocument.getElementById('name').getBoundingClientRect();
            return { x: (box.x + 20) * scale, y: (box.y + box.height / 2) * scale };
        }""")
        agent.locator(".cobrowse-overlay").click(position=spot)
        ring = visitor.locator("[data-parley-ui=cobrowse-pointer]")
        expect(ring).to_be_visible()
        outline = visitor.locator("[data-parley-ui=cobrowse-highlight]")
        expect(outline).to_be_visible()
        box, name_box = outline.bounding_box(), visitor.locator("#name").bounding_box()
        assert abs(box["x"] + 4 - name_box["x"]) < 2 and abs(box["width"] - 8 - name_box["width"]) < 2, (box, name_box)
        shoot(visitor, f"agent-points-{name}")

        # The customer moves to the site's next page: the session follows.
        visitor.locator("#next").click()
        expect(frame.locator("h1")).to_have_text("Delivery", timeout=15000)
        expect(visitor.locator("[data-parley-ui=cobrowse-banner]")).to_contain_text("can see this page")
        shoot(agent, f"next-page-{name}")

        # The customer stops it from the banner.
        visitor.locator("[data-parley-ui=cobrowse-banner]").get_by_role("button", name="Stop").click()
        expect(viewer.locator(".cobrowse-status")).to_contain_text("stopped sharing")
        expect(visitor.locator("[data-parley-ui=cobrowse-banner]")).to_have_count(0)
        shoot(agent, f"stopped-{name}")
        # Over: the window's button closes it.
        viewer.get_by_role("button", name="Close").click()
        expect(agent.locator(".timeline")).to_contain_text("co-browsed the customer's page")
        shoot(agent, f"recorded-{name}")
        visitor.context.close()
        agent.context.close()
    assert console_errors.errors == []


def control_agent(browser, server, signed_in, console_errors, size, shoot=None):
    """A new agent, Sam Control, who may co-browse; the admin then allows control too (which no
    profile has by default) in Settings → Team. Returns Sam's workspace, signed in."""
    email = f"sam-{uuid.uuid4().hex[:6]}@demo.test"
    admin = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    created = admin.request.post(f"{server.url}/v1/agents", data={
        "email": email, "name": "Sam Control", "password": "a long password", "role": "agent", "permissions": ["cobrowse"]})
    assert created.status == 201, created.text()
    agent_id = created.json()["id"]
    admin.click(".account-open")
    row = admin.locator(f".team-list li[data-agent={agent_id}]")
    row.get_by_label("What Sam Control may do").click()
    control = row.get_by_label(re.compile("Co-browse control"))
    expect(control).not_to_be_checked()
    control.check()
    expect(admin.locator(".team-note")).to_contain_text("Sam Control's profile was saved")
    row = admin.locator(f".team-list li[data-agent={agent_id}]")
    expect(row.get_by_label(re.compile("Co-browse control"))).to_be_checked()
    expect(row.locator("summary")).to_contain_text("co-browse control")
    if shoot:
        row.scroll_into_view_if_needed()
        shoot(admin, "team-permissions-1280")
    granted = next(agent for agent in admin.request.get(f"{server.url}/v1/agents").json()["items"] if agent["id"] == agent_id)
    assert sorted(granted["permissions"]) == ["cobrowse", "cobrowse_control"], granted
    admin.context.close()
    agent = console_errors(browser.new_context(viewport=size).new_page())
    agent.goto(server.url + "/")
    agent.fill("input[name=email]", email)
    agent.fill("input[name=password]", "a long password")
    agent.click("button[type=submit]")
    expect(agent.locator(".topbar .status")).to_have_text("Online", timeout=10000)
    return agent


def click_in_view(agent, selector):
    """Clicks, in the agent's view, the middle of the element `selector` of the customer's page (measured
    from the workspace: the view's frame runs no script)."""
    x, y = agent.evaluate("""(selector) => {
        const frame = document.querySelector('.cobrowse-frame');
        const scale = frame.getBoundingClientRect().width / frame.offsetWidth;
        const box = frame.contentDocument.querySelector(selector).getBoundingClientRect();
        const stage = frame.getBoundingClientRect();
        return [stage.left + (box.left + box.width / 2) * scale, stage.top + (box.top + box.height / 2) * scale];
    }""", selector)
    agent.mouse.click(x, y)


@pytest.mark.parametrize("name,size", [("phone", PHONE), ("desktop", DESKTOP)])
def test_cobrowse_control_asked_separately_never_private_fields(server, browser, signed_in, shoot, console_errors, name, size):
    """An agent whose profile allows control (cobrowse_control, which nobody has by default) asks; the
    customer says yes in the chat, separately from sharing; the agent types in the name field, picks a
    country and presses a button on the customer's page, but cannot reach the card field; the customer
    takes control back from the banner."""
    marker = f"Control {uuid.uuid4().hex[:6]}"
    with shop_site(server) as shop:
        visitor, chat = visit(browser, console_errors, f"{shop}/checkout.html", size, f"{marker}: can you fill it in?")
        agent = control_agent(browser, server, signed_in, console_errors, size, shoot)
        viewer = offer(agent, marker)
        chat.locator(".cobrowse-offer").get_by_role("button", name="Share this page").click()
        frame = agent.frame_locator(".cobrowse-frame")
        expect(frame.locator("h1")).to_have_text("Checkout", timeout=10000)

        # Seeing is not acting: the agent asks, and the customer is asked in the chat, separately.
        ask = viewer.get_by_role("button", name="Ask for control")
        ask.click()
        expect(viewer.locator(".cobrowse-control")).to_be_disabled()
        expect(viewer.locator(".cobrowse-control")).to_contain_text("Waiting for")
        card = chat.locator(".cobrowse-control")
        expect(card).to_contain_text("Sam Control asks to click and type on this page for you")
        expect(card).to_contain_text("never passwords or card details")
        shoot(visitor, f"control-asked-{name}")
        card.get_by_role("button", name="Allow").click()
        banner = visitor.locator("[data-parley-ui=cobrowse-banner]")
        expect(banner).to_contain_text("can see this page and click and type for you")
        expect(banner.get_by_role("button", name="Take back control")).to_be_visible()
        release = viewer.get_by_role("button", name="Release control")
        expect(release).to_have_attribute("aria-pressed", "true")

        # The agent types in the name field: the customer's field fills in.
        click_in_view(agent, "#name")
        editor = viewer.locator(".cobrowse-type")
        expect(editor).to_be_focused()
        editor.type("Ana Lopez")
        expect(visitor.locator("#name")).to_have_value("Ana Lopez")
        expect(frame.locator("#name")).to_have_value("Ana Lopez")
        shoot(agent, f"control-typing-{name}")
        editor.press("Enter")
        expect(editor).to_have_count(0)
        # Picks a country, and presses the page's button: its own script runs, on the customer's side.
        click_in_view(agent, "#country")
        viewer.locator("select.cobrowse-type").select_option("ES")
        expect(visitor.locator("#country")).to_have_value("ES")
        click_in_view(agent, "#apply")
        expect(visitor.locator("#applied")).to_have_text("Coupon applied")
        expect(frame.locator("#applied")).to_have_text("Coupon applied")
        # The card field is the customer's alone: refused in the workspace, and the page would refuse it too.
        click_in_view(agent, "#card")
        expect(viewer.locator(".cobrowse-status")).to_contain_text("That field is private")
        expect(viewer.locator(".cobrowse-type")).to_have_count(0)
        shoot(agent, f"control-private-field-{name}")
        sent = visitor.evaluate("() => window.__parleyCobrowse.input({ kind: 'value', id: -1, value: 'x' })")
        assert sent is False
        assert visitor.locator("#card").input_value() == ""
        shoot(visitor, f"control-customer-page-{name}")

        # The customer takes control back from the banner: the agent is back to pointing.
        banner.get_by_role("button", name="Take back control").click()
        expect(viewer.get_by_role("button", name="Ask for control")).to_be_visible()
        expect(banner).not_to_contain_text("click and type")
        click_in_view(agent, "#name")
        expect(viewer.locator(".cobrowse-type")).to_have_count(0)
        viewer.get_by_role("button", name="Stop co-browsing").click()
        expect(agent.locator(".timeline")).to_contain_text("co-browsed the customer's page for under a minute, with control")
        shoot(agent, f"control-recorded-{name}")
        visitor.context.close()
        agent.context.close()
    assert console_errors.errors == []


def test_cobrowse_declined_and_hostile_page_runs_nothing(server, browser, signed_in, shoot, console_errors):
    marker = f"Hostile {uuid.uuid4().hex[:6]}"
    with shop_site(server) as shop:
        # Declined: nothing shared, the agent is told.
        visitor, chat = visit(browser, console_errors, f"{shop}/hostile.html", DESKTOP, f"{marker}: help")
        agent = agent_page(browser, server, signed_in, console_errors, DESKTOP)
        dialogs = []
        agent.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        viewer = offer(agent, marker)
        chat.locator(".cobrowse-offer").get_by_role("button", name="Not now").click()
        expect(viewer.locator(".cobrowse-status")).to_contain_text("said no")
        shoot(agent, "declined")
        viewer.get_by_role("button", name="Close").click()

        # Accepted on the hostile page: it shows, and nothing of it runs.
        agent.locator(".start-cobrowse").click()
        chat.locator(".cobrowse-offer").get_by_role("button", name="Share this page").click()
        frame = agent.frame_locator(".cobrowse-frame")
        expect(frame.locator("#hostile")).to_have_text("Hostile page", timeout=10000)
        shoot(agent, "hostile-page-shown")
        built = agent.locator(".cobrowse-frame").evaluate("""(frame) => {
            const doc = frame.contentDocument;
            const attributes = [...doc.querySelectorAll('*')].flatMap((element) => [...element.attributes].map((a) => [a.name, a.value]));
            return {
                scripts: doc.querySelectorAll('script').length, frames: doc.querySelectorAll('iframe, frame, object, embed').length,
                metas: doc.querySelectorAll('meta, base').length, handlers: attributes.filter(([name]) => name.startsWith('on')).length,
                javascript: attributes.filter(([, value]) => /javascript:/i.test(value)).length,
                formAction: doc.querySelector('#bad-form')?.getAttribute('action'), submitAction: doc.querySelector('#bad-submit')?.getAttribute('formaction'),
                image: doc.querySelector('#bad-img')?.getAttribute('src'), link: doc.querySelector('#bad-link')?.getAttribute('href'),
                sandbox: frame.getAttribute('sandbox'),
            };
        }""")
        assert built == {"scripts": 0, "frames": 0, "metas": 0, "handlers": 0, "javascript": 0, "formAction": None,
                         "submitAction": None, "image": None, "link": None, "sandbox": "allow-same-origin"}, built
        # The page's own script ran on the customer's side (it is their page), never in the workspace.
        assert visitor.evaluate("window.__shopScriptRan") is True
        agent.wait_for_timeout(500)
        assert agent.evaluate("window.__pwned") is None
        assert dialogs == []
        # The viewer's frame is served with a policy that runs no script at all.
        policy = agent.request.get(f"{server.url}/cobrowse-view.html").headers["content-security-policy"]
        assert "script-src 'none'" in policy and "form-action 'none'" in policy
        expect(agent.locator(".topbar .status")).to_have_text("Online")
        viewer.get_by_role("button", name="Stop co-browsing").click()
        visitor.context.close()
        agent.context.close()
    # The hostile page's own failures (its javascript: image, its blocked frame) are the customer's page's, not Parley's.
    assert [error for error in console_errors.errors if "127.0.0.1" in error and "hostile" not in error.lower()] == []


def test_cobrowse_from_webkit(server, browser, signed_in, shoot, console_errors, webkit):
    """The customer's side in WebKit (Safari's engine, every iPhone browser): the offer in the chat,
    the yes, the banner, and the page with its card field masked, seen in the agent's workspace."""
    import shutil
    import time
    folder = ARTIFACTS / "test_cobrowse_from_webkit-customer"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    step = 0

    def shoot_webkit(name):
        nonlocal step
        step += 1
        time.sleep(0.3)
        webkit.save_screenshot(str(folder / f"{step:02d}-{name}.png"))

    marker = f"Safari {uuid.uuid4().hex[:6]}"
    with shop_site(server) as shop:
        webkit.set_window_size(390, 844)
        webkit.get(f"{shop}/checkout.html")
        wait_until(webkit, "return Boolean(document.querySelector('[aria-label=\"Open chat\"]'))", what="the launcher")
        webkit.execute_script("document.querySelector('[aria-label=\"Open chat\"]').click()")
        webkit.switch_to.frame(webkit.find_element("css selector", "#parley-chat"))
        wait_until(webkit, "return document.querySelector('.status')?.dataset.state === 'online'", what="the chat going online")
        webkit.execute_script(
            "const box = document.querySelector('#message'); box.value = arguments[0];"
            "box.dispatchEvent(new Event('input', {bubbles: true})); document.querySelector('.composer').requestSubmit();", marker)
        wait_until(webkit, "return document.querySelectorAll('.row.out:not(.pending)').length > 0", what="the sent message")

        agent = control_agent(browser, server, signed_in, console_errors, DESKTOP)
        viewer = offer(agent, marker)
        wait_until(webkit, "return Boolean(document.querySelector('.cobrowse-offer'))", what="the offer")
        shoot_webkit("asked")
        webkit.execute_script("[...document.querySelectorAll('.cobrowse-offer button')].find(b => b.textContent.includes('Share')).click()")
        webkit.switch_to.default_content()
        wait_until(webkit, "return document.querySelector('[data-parley-ui=cobrowse-banner]')?.textContent.includes('can see this page')",
                   what="the banner")
        webkit.execute_script(
            "for (const [id, value] of [['name', 'Ana Lopez'], ['card', '4242 4242 4242 4242']]) {"
            "  const input = document.getElementById(id); input.value = value; input.dispatchEvent(new Event('input', {bubbles: true})); }")
        shoot_webkit("sharing")
        frame = agent.frame_locator(".cobrowse-frame")
        expect(frame.locator("h1")).to_have_text("Checkout", timeout=10000)
        expect(frame.locator("#name")).to_have_value("Ana Lopez")
        expect(frame.locator("#card")).to_have_value("•••• •••• •••• ••••")
        shoot(agent, "agent-sees-webkit-page")
        # Control, asked and allowed in Safari's engine: the agent's typing fills the customer's field
        # there, and the card field stays out of reach.
        viewer.get_by_role("button", name="Ask for control").click()
        webkit.switch_to.frame(webkit.find_element("css selector", "#parley-chat"))
        wait_until(webkit, "return Boolean(document.querySelector('.cobrowse-control'))", what="the control question")
        shoot_webkit("control-asked")
        webkit.execute_script("[...document.querySelectorAll('.cobrowse-control button')].find(b => b.textContent === 'Allow').click()")
        webkit.switch_to.default_content()
        wait_until(webkit, "return document.querySelector('[data-parley-ui=cobrowse-banner]')?.textContent.includes('click and type')",
                   what="the banner saying so")
        expect(viewer.get_by_role("button", name="Release control")).to_be_visible()
        click_in_view(agent, "#name")
        viewer.locator(".cobrowse-type").fill("Ana María López")
        viewer.locator(".cobrowse-type").press("Enter")
        wait_until(webkit, "return document.getElementById('name').value === 'Ana María López'", what="the agent's typing")
        click_in_view(agent, "#card")
        expect(viewer.locator(".cobrowse-status")).to_contain_text("That field is private")
        assert webkit.execute_script("return document.getElementById('card').value") == "4242 4242 4242 4242"
        shoot_webkit("control-typed")
        webkit.execute_script("[...document.querySelectorAll('[data-parley-ui=cobrowse-banner] button')].find((b) => b.textContent === 'Stop').click()")
        expect(viewer.locator(".cobrowse-status")).to_contain_text("stopped sharing")
        wait_until(webkit, "return !document.querySelector('[data-parley-ui=cobrowse-banner]')", what="the banner going away")
        shoot_webkit("stopped")
        agent.context.close()
    assert console_errors.errors == []


def test_cobrowse_page_too_large_is_told_to_both_sides(browser, shoot, console_errors):
    """A server that accepts 64 KB snapshots, a page of about 200 KB: the session ends, the customer's
    chat and the agent's window both say why, and the banner goes."""
    with running_parley("--cobrowse-snapshot-bytes", "65536") as small, shop_site(small) as shop:
        marker = f"Large {uuid.uuid4().hex[:6]}"
        visitor, chat = visit(browser, console_errors, f"{shop}/large.html", DESKTOP, f"{marker}: which one?")
        context = browser.new_context(viewport=DESKTOP)
        agent = console_errors(context.new_page())
        login(agent, small)
        viewer = offer(agent, marker)
        chat.locator(".cobrowse-offer").get_by_role("button", name="Share this page").click()
        expect(viewer.locator(".cobrowse-status")).to_contain_text("too large to show", timeout=10000)
        expect(chat.locator(".cobrowse-note")).to_contain_text("too large to share")
        expect(visitor.locator("[data-parley-ui=cobrowse-banner]")).to_have_count(0)
        shoot(visitor, "customer-told")
        shoot(agent, "agent-told")
        visitor.context.close()
        context.close()
    # The server's refusal of the oversized part reaches the chat as an error frame, not a failed request.
    assert console_errors.errors == []
