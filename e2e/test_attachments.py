"""Images and files both ways (issue 13, "Attachments"): the consumer sends a photo from the widget,
the agent sees its thumbnail and opens it full size; the agent sends a PDF, the consumer downloads
it under its name. At 360, 768 and 1280 px; screenshots are numbered steps."""
import subprocess
import uuid

import pytest
from playwright.sync_api import expect
from test_workspace import DESKTOP, PHONE, agent_page, open_widget, signed_in, start_conversation  # noqa: F401

from test_workspace import TABLET  # noqa: E402,F811


@pytest.fixture(scope="module")
def photo(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "receipt-photo.png"
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=1200x900:rate=1", "-frames:v", "1", str(path)],
                   check=True)
    return path


@pytest.fixture(scope="module")
def invoice(tmp_path_factory):
    path = tmp_path_factory.mktemp("files") / "Invoice 2026-042.pdf"
    path.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n")
    return path


@pytest.mark.parametrize("name,size", [("360", PHONE), ("768", TABLET), ("1280", DESKTOP)])
def test_images_and_files_both_ways(server, browser, signed_in, shoot, console_errors, photo, invoice, name, size):
    marker = uuid.uuid4().hex[:6]
    consumer = open_widget(browser, server, console_errors)
    start_conversation(consumer, f"Attachment {marker}: the parcel arrived damaged")
    consumer.locator(".attach-input").set_input_files(str(photo))
    sent = consumer.locator(".row.out[data-kind=attachment]")
    expect(sent).to_have_count(1, timeout=15000)
    expect(sent.locator("img")).to_have_js_property("complete", True)
    expect(sent.locator(".attachment.image")).to_have_attribute("aria-label", "Image: receipt-photo.png. Open full size")
    shoot(consumer, "consumer-sent-a-photo-360")

    agent = agent_page(browser, server, signed_in, console_errors, size)
    # The list's preview now says "Image": the agent finds the conversation by its words.
    agent.locator("#search").fill(marker)
    agent.locator(".search-results .results button", has_text=marker).click()
    if name != "360":  # on a phone the conversation is its own screen, the search is on the list's
        agent.locator("#search").fill("")
        agent.locator("#search").press("Escape")
    received = agent.locator(".row.in[data-kind=attachment] .attachment.image")
    expect(received).to_be_visible(timeout=10000)
    expect(received.locator("img")).to_have_js_property("naturalWidth", 480)  # the server's thumbnail
    shoot(agent, f"agent-sees-the-thumbnail-{name}")
    received.click()
    lightbox = agent.locator("dialog.lightbox")
    expect(lightbox).to_be_visible()
    expect(lightbox.locator("img")).to_have_js_property("naturalWidth", 1200)  # the original
    shoot(agent, f"full-size-{name}")
    agent.keyboard.press("Escape")
    expect(lightbox).to_have_count(0)

    # The agent sends a PDF; the consumer downloads it under its name.
    agent.locator(".composer .attach-input").set_input_files(str(invoice))
    expect(agent.locator(".row.out[data-kind=attachment] .attachment.file strong")).to_have_text("Invoice 2026-042.pdf", timeout=15000)
    card = consumer.locator(".row.in[data-kind=attachment] .attachment.file")
    expect(card.locator("strong")).to_have_text("Invoice 2026-042.pdf", timeout=10000)
    expect(card.locator("span")).to_have_text(f"PDF · {invoice.stat().st_size} B")
    shoot(consumer, "consumer-gets-the-invoice-360")
    with consumer.expect_download() as download:
        card.get_by_role("button", name="Download Invoice 2026-042.pdf").click()
    assert download.value.suggested_filename == "Invoice 2026-042.pdf"
    assert open(download.value.path(), "rb").read() == invoice.read_bytes()
    # The list says what came last.
    if name == "360":  # back to the list: the conversation that moved to the top says it
        agent.locator(".back").click()
        agent.locator("#search").fill("")
        agent.locator("#search").press("Escape")
        expect(agent.locator(".conversations li button .preview").first).to_have_text("File: Invoice 2026-042.pdf")
        shoot(agent, "the-list-says-file-360")
    else:
        expect(agent.locator(".conversations li button[aria-current=true] .preview")).to_have_text("File: Invoice 2026-042.pdf")
    assert agent.evaluate("document.documentElement.scrollWidth") <= size["width"]
    agent.context.close()
    consumer.context.close()
    assert console_errors.errors == []


def test_a_refused_file_says_why(server, browser, console_errors, shoot, tmp_path):
    program = tmp_path / "setup.pdf"
    program.write_bytes(bytes([0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0]) + bytes(200))
    consumer = open_widget(browser, server, console_errors)
    start_conversation(consumer, f"Refused {uuid.uuid4().hex[:6]}")
    consumer.locator(".attach-input").set_input_files(str(program))
    failed = consumer.locator(".row.pending[data-state=failed]")
    expect(failed).to_have_count(1, timeout=10000)
    expect(failed.locator(".failed")).to_contain_text("This kind of file is not accepted")
    shoot(consumer, "refused-360")
    consumer.context.close()
    assert [error for error in console_errors.errors if "415" not in error] == []
