"""Records (issue 16): a visitor reads their earlier conversations in the widget; an admin sets how
long conversations are kept and what customers see, holds a conversation and lifts the hold, exports
a customer's data and erases the customer. Each on a server of its own. Screenshots are numbered steps."""
import json
import uuid

import pytest
from conftest import api, login, running_parley
from playwright.sync_api import expect
from test_agent_tools import SIZES, open_account, show_details
from test_workspace import open_widget, start_conversation


def admin_token(server):
    return api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]


def test_widget_shows_earlier_conversations(browser, shoot, console_errors):
    with running_parley() as server:
        token = admin_token(server)
        marker = uuid.uuid4().hex[:5]
        consumer = open_widget(browser, server, console_errors)
        start_conversation(consumer, f"Old question {marker}")
        expect(consumer.locator(".history-open")).to_be_hidden()
        first = next(c for c in api(server, "GET", "/v1/conversations?state=open", None, token)["items"] if c["lastMessagePreview"].startswith("Old question"))
        api(server, "POST", f"/v1/conversations/{first['id']}/messages", {"clientMessageId": str(uuid.uuid4()), "text": "Answered: it was the wrong size."}, token)
        api(server, "POST", f"/v1/conversations/{first['id']}/resolve", {}, token)
        expect(consumer.locator(".row.system", has_text="This conversation has been closed")).to_be_visible(timeout=10000)
        start_conversation(consumer, f"New question {marker}")
        history = consumer.locator(".history-open")
        expect(history).to_be_visible()
        history.click()
        panel = consumer.locator(".history-panel")
        expect(panel.locator(".history-list li")).to_have_count(2)
        expect(panel.locator(".history-list li").first).to_contain_text("Now")
        expect(panel.locator(".history-list li").last).to_contain_text("Closed")
        shoot(consumer, "history-01-the-list-360")
        panel.locator(".history-list li").last.locator("button").click()
        expect(panel.locator(".history-timeline .row.in .bubble")).to_contain_text("it was the wrong size")
        expect(panel.locator(".history-timeline .row.out .bubble")).to_contain_text(f"Old question {marker}")
        shoot(consumer, "history-02-an-earlier-conversation-360")
        panel.get_by_role("button", name="Back to the chat").click()
        expect(panel.locator(".history-list")).to_be_visible()
        panel.get_by_role("button", name="Back to the chat").click()
        expect(panel).to_be_hidden()
        expect(consumer.locator("#message")).to_be_visible()


@pytest.mark.parametrize("name,size", [SIZES[0], SIZES[2]])
def test_admin_keeps_holds_exports_and_erases(browser, shoot, console_errors, name, size):
    with running_parley() as server:
        marker = uuid.uuid4().hex[:5]
        consumer = open_widget(browser, server, console_errors)
        start_conversation(consumer, f"Please delete my data {marker}")
        agent = console_errors(browser.new_context(viewport=size, accept_downloads=True).new_page())
        login(agent, server)
        open_account(agent)
        section = agent.locator(".records")
        expect(section.locator(".purge-log tr")).to_have_count(1)  # drawn
        section.get_by_label("Keep conversations for (months)").fill("24")
        section.get_by_label("Customers see their conversations of the last (months)").fill("6")
        section.get_by_label("Customers see their closed conversations").uncheck()
        section.get_by_role("button", name="Save", exact=True).click()
        expect(section.locator(".records-note")).to_contain_text("Saved.")
        section.scroll_into_view_if_needed()
        shoot(agent, f"records-01-settings-{name}")
        settings = api(server, "GET", "/v1/records", None, admin_token(server))
        assert settings == {"retentionMonths": 24, "historyMonths": 6, "historyStates": ["open", "reopened"]}
        agent.locator(".account-close").click()

        agent.locator(".conversations li button", has_text=marker).click()
        show_details(agent, size["width"])
        details = agent.locator(".details-pane")
        agent.once("dialog", lambda dialog: dialog.accept("Customer dispute"))
        details.get_by_role("button", name="Hold conversation").click()
        expect(details.locator(".records-actions-note")).to_have_text("Held this conversation.")
        # Held: erasing is refused and says why.
        agent.once("dialog", lambda dialog: dialog.accept())
        details.get_by_role("button", name="Erase customer").click()
        expect(details.locator(".records-actions-note")).to_contain_text("legal hold")
        details.locator(".records-actions").scroll_into_view_if_needed()
        shoot(agent, f"records-02-held-so-not-erased-{name}")
        with agent.expect_download() as download:
            details.get_by_role("link", name="Export customer data").click()
        exported = json.loads(open(download.value.path(), encoding="utf-8").read())
        assert any(message["text"] == f"Please delete my data {marker}" for message in exported["messages"])
        if size["width"] < 1000:
            agent.keyboard.press("Escape")

        # The admin lifts the hold in the account dialog, then erases the customer.
        open_account(agent)
        holds = agent.locator(".records .hold-list li")
        expect(holds).to_have_count(1)
        expect(holds.first).to_contain_text("Customer dispute")
        agent.once("dialog", lambda dialog: dialog.accept())
        holds.first.get_by_role("button", name="Lift").click()
        expect(agent.locator(".records .hold-list li.empty")).to_be_visible()
        agent.locator(".account-close").click()
        show_details(agent, size["width"])  # the conversation is still open
        agent.once("dialog", lambda dialog: dialog.accept())
        agent.locator(".details-pane").get_by_role("button", name="Erase customer").click()
        expect(agent.locator(".topbar .status")).to_contain_text("Erased the customer: 1 conversations, 1 messages")
        expect(agent.locator(".conversations li button", has_text=marker)).to_have_count(0)
        shoot(agent, f"records-03-erased-{name}")
        open_account(agent)
        expect(agent.locator(".records .purge-log tr").first).to_contain_text("Erased csm_")
        agent.locator(".records .purge-log").scroll_into_view_if_needed()
        shoot(agent, f"records-04-the-log-{name}")
