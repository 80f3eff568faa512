"""Activity and engagement rules (issue 15, "Monitoring API"): an admin adds rules in the account
dialog; the brand's app reports what the customer does (here the widget's consumer session stands
for the app, posting what ParleyKit's `report` posts); a rule's automatic message reaches the
customer live, a prompt rule answers the app; agents see the customer's recent activity in the
details pane at phone, tablet and desktop widths. Screenshots are numbered steps."""
import re
import uuid
from datetime import datetime, timezone

from playwright.sync_api import expect
from test_agent_tools import SIZES, open_account, show_details
from test_workspace import DESKTOP, agent_page, open_widget, signed_in  # noqa: F401


def add_rule(section, name, event, comparison, prop, value, action, text):
    section.get_by_label("Name", exact=True).fill(name)
    section.get_by_label("When the app reports", exact=True).fill(event)
    section.get_by_label("Condition", exact=True).select_option(comparison)
    if comparison != "none":
        section.get_by_label("Property", exact=True).fill(prop)
        section.get_by_label("Value", exact=True).fill(value)
    section.get_by_label("Then", exact=True).select_option(action)
    section.get_by_label("Text", exact=True).fill(text)
    section.get_by_role("button", name="Add rule").click()
    expect(section.locator(".rule-note")).to_have_text(f"Added “{name}”.")


def test_rules_act_on_what_the_app_reports_and_agents_see_it(server, browser, signed_in, shoot, console_errors):
    marker = uuid.uuid4().hex[:6]
    admin = agent_page(browser, server, signed_in, console_errors, DESKTOP)
    open_account(admin)
    section = admin.locator(".engagement")
    # A bad event name is refused by the form itself; the server's own refusals show in the note.
    add_rule(section, f"Big carts {marker}", "cart_value", "at_least", "value", "100", "message",
             "Your cart looks great! Questions before you pay? Reply here and we will help.")
    add_rule(section, f"Checkout help {marker}", "screen_view", "equals", "screen", "checkout", "prompt",
             "Need help with delivery options?")
    rule = section.locator(".rule-list li", has_text=f"Big carts {marker}")
    expect(rule).to_contain_text("When the app reports cart_value where value is at least 100")
    expect(rule.locator(".tag")).to_have_text("Automatic message")
    rule.scroll_into_view_if_needed()
    shoot(admin, "admin-adds-engagement-rules-1280")
    # Paused and resumed from the list.
    rule.get_by_role("button", name=re.compile("^Pause")).click()
    expect(section.locator(".rule-list li.paused", has_text=f"Big carts {marker}")).to_be_visible()
    section.locator(".rule-list li", has_text=f"Big carts {marker}").get_by_role("button", name=re.compile("^Resume")).click()
    expect(section.locator(".rule-list li.paused", has_text=f"Big carts {marker}")).to_have_count(0)
    admin.locator(".account-close").click()
    admin.context.close()

    # The customer browses the brand's app (its session reports, as ParleyKit does); the widget is open.
    consumer = open_widget(browser, server, console_errors)
    consumer.fill("#message", f"Hi, I am {marker} and I am looking at sofas")
    consumer.keyboard.press("Enter")
    expect(consumer.locator(".row.out .bubble").last).to_contain_text(marker)
    token = consumer.evaluate(f"() => localStorage.getItem('parley.consumer.{server.app_id}')")
    now = datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")
    reported = consumer.request.post(
        f"{server.url}/v1/consumer/activity", headers={"Authorization": f"Bearer {token}"},
        data={"events": [
            {"clientEventId": str(uuid.uuid4()), "name": "screen_view", "properties": {"screen": "checkout"}, "occurredAt": now},
            {"clientEventId": str(uuid.uuid4()), "name": "cart_value", "properties": {"value": 129.9, "currency": "EUR"}, "occurredAt": now},
        ]})
    assert reported.status == 200, reported.text()
    answer = reported.json()
    assert answer["accepted"] == 2 and [prompt["text"] for prompt in answer["prompts"]] == ["Need help with delivery options?"], answer
    automatic = consumer.locator(".row.in .bubble", has_text="Your cart looks great!")
    expect(automatic).to_be_visible(timeout=10000)
    shoot(consumer, "the-customer-gets-the-automatic-message-360")

    for name, size in SIZES:
        agent = agent_page(browser, server, signed_in, console_errors, size)
        agent.locator(".conversations li button", has_text="Your cart looks great!").first.click()
        expect(agent.locator(".row.in .bubble").first).to_contain_text(marker)
        sent = agent.locator(".row.out .bubble", has_text="Your cart looks great!")
        expect(sent).to_be_visible()
        expect(agent.locator(".row.out", has_text="Your cart looks great!").locator(".sender")).to_contain_text("Automatic message")
        shoot(agent, f"the-automatic-message-in-the-conversation-{name}")
        show_details(agent, size["width"])
        activity = agent.locator(".details-pane .activity li")
        expect(activity.first).to_contain_text(re.compile(r"Cart: 129\.9 EUR|Viewed checkout"))
        expect(activity).to_have_count(2)
        expect(agent.locator(".details-pane .activity")).to_contain_text("Viewed checkout")
        agent.locator(".details-pane .activity").scroll_into_view_if_needed()
        shoot(agent, f"recent-activity-in-the-details-{name}")
        assert agent.evaluate("document.documentElement.scrollWidth") <= size["width"]
        agent.context.close()
    # The consumer read it: the agents' copy says so.
    consumer.context.close()
    assert console_errors.errors == []
