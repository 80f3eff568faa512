"""The contact centre end to end (issue 16): with automatic routing and one conversation per agent, a
customer waits in the queue and sees their place, is given to the agent when the first customer's
conversation is resolved, is answered, the conversation is resolved, the customer rates it 4 with a
comment, the manager's report shows the rating live and for the period, and the transcript they
download contains it. At phone and desktop widths for the workspace. Screenshots are numbered steps."""
import uuid

import pytest
from conftest import api, login, running_parley
from playwright.sync_api import expect
from test_agent_tools import SIZES, show_details
from test_workspace import open_widget, start_conversation


@pytest.mark.parametrize("name,size", [SIZES[0], SIZES[2]])
def test_queue_to_rating_to_report_to_transcript(browser, shoot, console_errors, name, size):
    with running_parley(routing="automatic") as server:
        token = api(server, "POST", "/v1/auth/login", {"email": server.email, "password": server.password})["token"]
        api(server, "PATCH", "/v1/routing", {"maxConversations": 1}, token)
        api(server, "PATCH", "/v1/lifecycle", {"survey": True}, token)
        agent = console_errors(browser.new_context(viewport=size, accept_downloads=True).new_page())
        login(agent, server)
        marker = uuid.uuid4().hex[:5]

        first = open_widget(browser, server, console_errors)
        start_conversation(first, f"First customer {marker}")
        expect(first.locator(".row.system").last).to_contain_text("You're now talking to Demo Admin", timeout=10000)
        second = open_widget(browser, server, console_errors)
        start_conversation(second, f"My parcel {marker} never came")
        expect(second.locator(".queue-note")).to_have_text("You're next in line", timeout=10000)
        shoot(second, "contact-centre-01-waiting-in-line-360")

        # The agent resolves the first; the second is given to them at once.
        agent.locator(".filters [data-filter=mine]").click()
        agent.locator(".conversations li button", has_text=f"First customer {marker}").click()
        show_details(agent, size["width"])
        agent.locator(".details-pane").get_by_role("button", name="Resolve").click()
        expect(second.locator(".row.system").last).to_contain_text("You're now talking to Demo Admin", timeout=10000)
        expect(second.locator(".queue-note")).to_be_hidden()
        shoot(second, "contact-centre-02-given-to-the-agent-360")
        if size["width"] < 1000:
            agent.keyboard.press("Escape")
        if name == "360":
            agent.locator(".back").click()
        agent.locator(".conversations li button", has_text=f"My parcel {marker}").click()
        agent.fill("#reply", "Found it: it ships today, here is the tracking link.")
        agent.keyboard.press("Enter")
        expect(second.locator(".row.in .bubble").last).to_contain_text("it ships today", timeout=10000)
        show_details(agent, size["width"])
        agent.locator(".details-pane").get_by_role("button", name="Resolve").click()

        # The customer rates it 4 with a comment.
        card = second.locator(".rating-card")
        expect(card).to_be_visible(timeout=10000)
        card.get_by_role("radio", name="4 of 5: Good").click()
        card.get_by_label("Comment").fill(f"Helpful {marker}, a bit slow")
        card.get_by_role("button", name="Send rating").click()
        expect(card).to_contain_text("Thanks for your rating!")
        shoot(second, "contact-centre-03-rated-four-360")

        # The transcript the agent downloads holds the conversation and its rating.
        expect(agent.locator(".details-pane .d-state")).to_contain_text("rated ★★★★☆", timeout=10000)
        with agent.expect_download() as download:
            agent.locator(".details-pane").get_by_role("link", name="Download the transcript as text").click()
        transcript = open(download.value.path(), encoding="utf-8").read()
        assert f"My parcel {marker} never came" in transcript
        assert "Demo Admin: Found it: it ships today" in transcript
        assert f'The customer rated it 4 out of 5: "Helpful {marker}, a bit slow"' in transcript
        assert "Demo Admin resolved the conversation" in transcript
        if size["width"] < 1000:
            agent.keyboard.press("Escape")

        # The manager's report: live numbers, then the period with the rating.
        agent.locator(".reports-open").click()
        dialog = agent.locator(".reports")
        expect(dialog).to_be_visible()
        expect(dialog.locator(".live-agents tr")).to_have_count(1)
        expect(dialog.locator(".live-tiles .tile.waiting .tile-value")).to_have_text("0")
        expect(dialog.locator(".totals")).to_contain_text("4.0 of 5", timeout=10000)
        expect(dialog.locator(".totals")).to_contain_text("2New conversations")
        expect(dialog.locator(".chart-card")).to_have_count(6)
        shoot(agent, f"contact-centre-04-report-{name}")
        dialog.locator(".chart-card", has_text="Satisfaction").scroll_into_view_if_needed()
        shoot(agent, f"contact-centre-05-satisfaction-chart-{name}")
        with agent.expect_download() as download:
            dialog.get_by_role("link", name="Download the data of “Satisfaction” as CSV").click()
        csv = open(download.value.path(), encoding="utf-8").read().splitlines()
        assert csv[0] == "day,label,ratings,csatAverage,csatPositivePercent"
        assert csv[-1] == "total,Total,1,4.00,100"

        # A new customer appears in the live numbers while the dialog is open.
        third = open_widget(browser, server, console_errors)
        start_conversation(third, f"Third {marker}")
        expect(dialog.locator(".live-agents tr").first).to_contain_text("1 of 1", timeout=10000)
