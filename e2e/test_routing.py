"""Routing (issue 16): with automatic routing and a limit of one conversation per agent, the first
customer is given to the online agent at once ("You're now talking to…"), the next ones wait and see
their place in the queue, live; when the agent resolves, the next is given to them; a manager
transfers a conversation to a colleague with a private note. Each at phone, tablet and desktop
widths, on a server of its own (routing is brand-wide). Screenshots are numbered steps."""
import uuid

import pytest
from conftest import api, login, running_parley
from playwright.sync_api import expect
from test_agent_tools import SIZES, open_account, show_details
from test_workspace import open_widget, start_conversation


@pytest.mark.parametrize("name,size", SIZES)
def test_queue_automatic_assignment_and_transfer(browser, shoot, console_errors, name, size):
    with running_parley(routing="automatic") as server:
        agent = console_errors(browser.new_context(viewport=size).new_page())
        login(agent, server)
        # The admin sets one conversation per agent, in the account dialog.
        open_account(agent)
        section = agent.locator(".routing")
        expect(section.locator(".agent-loads tr")).to_have_count(1)  # drawn: the form holds the brand's settings
        expect(section.get_by_label("Assignment")).to_have_value("automatic")
        section.get_by_label("Open conversations per agent").fill("1")
        section.get_by_role("button", name="Save routing").click()
        expect(section.locator(".routing-note")).to_have_text("Saved the routing settings.")
        expect(section.locator(".agent-loads tr").first).to_contain_text("Available")
        section.locator(".agent-table").scroll_into_view_if_needed()
        shoot(agent, f"admin-sets-one-conversation-per-agent-{name}")
        agent.locator(".account-close").click()

        marker = uuid.uuid4().hex[:5]
        first = open_widget(browser, server, console_errors)
        start_conversation(first, f"First customer {marker}")
        expect(first.locator(".row.system").last).to_contain_text("You're now talking to Demo Admin", timeout=10000)
        expect(first.locator(".queue-note")).to_be_hidden()
        shoot(first, "first-customer-is-given-to-the-agent-360")

        second = open_widget(browser, server, console_errors)
        start_conversation(second, f"Second customer {marker}")
        expect(second.locator(".queue-note")).to_have_text("You're next in line", timeout=10000)
        third = open_widget(browser, server, console_errors)
        start_conversation(third, f"Third customer {marker}")
        expect(third.locator(".queue-note")).to_have_text("You're number 2 in line", timeout=10000)
        shoot(third, "third-customer-waits-second-in-line-360")

        # The agent sees the first as theirs, the others waiting (unassigned).
        agent.locator(".filters [data-filter=mine]").click()
        conversation = agent.locator(".conversations li button", has_text=f"First customer {marker}")
        expect(conversation).to_be_visible()
        agent.locator(".filters [data-filter=unassigned]").click()
        expect(agent.locator(".conversations li button", has_text=marker)).to_have_count(2)
        shoot(agent, f"two-waiting-{name}")
        agent.locator(".filters [data-filter=mine]").click()
        conversation.click()
        expect(agent.locator(".row.system", has_text="Routing assigned it to you")).to_be_visible()
        show_details(agent, size["width"])
        agent.locator(".details-pane").get_by_role("button", name="Resolve").click()
        expect(agent.locator(".details-pane .d-state")).to_have_text("resolved")
        # The room is taken by the next in line; the last one moves up, live.
        expect(second.locator(".row.system").last).to_contain_text("You're now talking to Demo Admin", timeout=10000)
        expect(second.locator(".queue-note")).to_be_hidden()
        expect(third.locator(".queue-note")).to_have_text("You're next in line", timeout=10000)
        shoot(third, "third-customer-moves-up-360")

        # A manager (here the admin) transfers the second customer to a colleague, with a note.
        token = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password}, None)
        colleague = api(server, "POST", "/v1/agents", {"email": f"sam-{marker}@demo.test", "name": "Sam Rivera", "password": "a long password",
                                                         "role": "agent", "permissions": []}, token["token"])
        if size["width"] < 1000:
            agent.keyboard.press("Escape")
        if name == "360":
            agent.locator(".back").click()
        agent.locator(".filters [data-filter=mine]").click()
        agent.locator(".conversations li button", has_text=f"Second customer {marker}").click()
        show_details(agent, size["width"])
        agent.locator(".details-pane").get_by_role("button", name="Transfer").click()
        dialog = agent.locator(".transfer-dialog")
        expect(dialog).to_be_visible()
        dialog.get_by_label("To").select_option(label="Sam Rivera · not available")
        dialog.get_by_label("Note for the next agent").fill("Wants the invoice re-sent to a new address.")
        shoot(agent, f"transfer-to-a-colleague-{name}")
        dialog.get_by_role("button", name="Transfer").click()
        expect(dialog).to_be_hidden()
        expect(second.locator(".row.system").last).to_contain_text("You're now talking to Sam Rivera", timeout=10000)
        expect(second.locator(".widget-header")).to_contain_text("Sam Rivera")
        shoot(second, "second-customer-now-talks-to-sam-360")
        if size["width"] < 1000:
            agent.keyboard.press("Escape")
        expect(agent.locator(".row.note-row", has_text="Wants the invoice re-sent")).to_be_visible()
        expect(agent.locator(".row.system", has_text="assigned it to Sam Rivera")).to_be_visible()
        # The consumer never sees the note.
        expect(second.locator(".timeline")).not_to_contain_text("invoice re-sent")
        # Now the agent has room again: the third is theirs.
        expect(third.locator(".row.system").last).to_contain_text("You're now talking to Demo Admin", timeout=10000)
        shoot(agent, f"after-the-transfer-{name}")
        assert agent.evaluate("document.documentElement.scrollWidth") <= size["width"]
        assert colleague["name"] == "Sam Rivera"
    assert console_errors.errors == []


@pytest.mark.parametrize("name,size", [SIZES[0], SIZES[2]])
def test_manager_puts_a_customer_first_in_line(browser, shoot, console_errors, name, size):
    with running_parley() as server:  # manual take: both wait
        marker = uuid.uuid4().hex[:5]
        first = open_widget(browser, server, console_errors)
        start_conversation(first, f"Waiting first {marker}")
        second = open_widget(browser, server, console_errors)
        start_conversation(second, f"Urgent: my account is locked {marker}")
        expect(second.locator(".queue-note")).to_have_text("You're number 2 in line", timeout=10000)
        agent = console_errors(browser.new_context(viewport=size).new_page())
        login(agent, server)
        agent.locator(".filters [data-filter=unassigned]").click()
        agent.locator(".conversations li button", has_text=f"account is locked {marker}").click()
        show_details(agent, size["width"])
        button = agent.locator(".details-pane").get_by_role("button", name="Put first in line")
        button.click()
        expect(agent.locator(".details-pane .prioritise")).to_have_text("First in line")
        shoot(agent, f"priority-01-put-first-{name}")
        expect(second.locator(".queue-note")).to_have_text("You're next in line", timeout=10000)
        expect(first.locator(".queue-note")).to_have_text("You're number 2 in line", timeout=10000)
        shoot(second, "priority-02-the-customer-moves-up-360")
