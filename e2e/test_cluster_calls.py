"""A voice call across nodes in two real Chromium pages: the customer's widget talks to node 1 only,
the agent's workspace to node 3 only (each through HAProxy, pinned), with coturn. The call is held by
node 3 (the agent's socket); the customer's answer, SDP and candidates reach it through the cluster's
bus. Runs in a private network namespace (scripts/e2e-isolated.sh), like the other call tests."""
import re
import subprocess
import tempfile

import pytest
from playwright.sync_api import expect

from conftest import ROOT
# private_network: the autouse check that this runs in its own network namespace, as in test_calls.
from test_calls import CAPTURE_PEERS, DESKTOP, PHONE, SECRET, private_network, wait_for_media  # noqa: F401
from test_cluster import Node, running_cluster


@pytest.fixture
def call_cluster():
    turn_dir = tempfile.mkdtemp(prefix="parley-e2e-turn-")
    turn_url = subprocess.run([str(ROOT / "scripts" / "coturn.sh"), "start", turn_dir, SECRET],
                              check=True, capture_output=True, text=True).stdout.strip()
    try:
        with running_cluster({"PARLEY_CLAMD": "off", "PARLEY_TURN_URLS": turn_url, "PARLEY_TURN_SECRET": SECRET}) as started:
            yield started
    finally:
        subprocess.run([str(ROOT / "scripts" / "coturn.sh"), "stop", turn_dir], check=False)


def test_a_voice_call_rings_and_connects_across_nodes(call_cluster, browser, shoot, console_errors):
    widget_node, workspace_node = Node(call_cluster, 1), Node(call_cluster, 3)
    consumer = console_errors(browser.new_context(viewport=PHONE).new_page())
    consumer.add_init_script(CAPTURE_PEERS)
    consumer.goto(f"{widget_node.url}/widget.html?app={widget_node.app_id}")
    expect(consumer.locator(".status")).to_have_attribute("data-state", "online", timeout=10000)
    consumer.fill("#message", "Hi, could you call me about my order?")
    consumer.press("#message", "Enter")
    expect(consumer.locator(".row.out")).to_have_count(1)

    agent = console_errors(browser.new_context(viewport=DESKTOP).new_page())
    agent.add_init_script(CAPTURE_PEERS)
    agent.goto(workspace_node.url + "/")
    agent.fill("input[name=email]", workspace_node.email)
    agent.fill("input[name=password]", workspace_node.password)
    agent.click("button[type=submit]")
    expect(agent.locator(".topbar .status")).to_have_text("Online", timeout=10000)
    agent.locator(".conversations li button", has_text="could you call me").first.click()
    expect(agent.locator(".row.in")).to_have_count(1, timeout=10000)
    me = agent.locator(".topbar .me").inner_text()

    # The agent on node 3 calls; the customer's phone on node 1 rings, with the agent's name.
    agent.click(".start-call[data-media=voice]")
    expect(agent.locator(".call-overlay[data-state=ringing]")).to_be_visible(timeout=10000)
    sheet = consumer.locator(".call-incoming")
    expect(sheet).to_be_visible(timeout=10000)
    expect(sheet.locator(".call-name")).to_have_text(me)
    shoot(consumer, "cluster-call-01-ringing-on-node-1-360")
    sheet.get_by_role("button", name=re.compile("^Accept")).click()

    # Answer, offer, answer and candidates crossed nodes: audio flows both ways.
    expect(agent.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    expect(consumer.locator(".call-overlay[data-state=active]")).to_be_visible(timeout=30000)
    assert wait_for_media(agent, ["audio"])["audio"] > 0
    assert wait_for_media(consumer, ["audio"])["audio"] > 0
    shoot(consumer, "cluster-call-02-active-on-node-1-360")
    shoot(agent, "cluster-call-03-active-on-node-3-1280")

    # Mute on node 1 shows on node 3; the customer hangs up on node 1 and node 3 ends the call.
    consumer.click(".call-overlay .mute")
    expect(agent.locator(".call-badges")).to_contain_text("muted", timeout=10000)
    consumer.get_by_role("button", name="Hang up").click()
    expect(agent.locator(".call-overlay .call-status")).to_have_text(re.compile(r"Call ended · 0:\d\d"), timeout=10000)
    expect(agent.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"), timeout=10000)
    expect(consumer.locator(".call-record")).to_have_text(re.compile(r"Voice call · 0:\d\d"), timeout=10000)
    shoot(agent, "cluster-call-04-record-1280")

    # The record, read through the round-robin frontend (any node): completed, ended by the customer.
    conversation = agent.evaluate("() => document.querySelector('.conversations [aria-current=true]').dataset.id")
    records = agent.request.get(f"{workspace_node.url}/v1/conversations/{conversation}/calls").json()["items"]
    assert records[0]["outcome"] == "completed" and records[0]["endedBy"] == "consumer", records[0]
    assert console_errors.errors == [], console_errors.errors
