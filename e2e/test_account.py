"""Locking an agent out from the workspace: an admin disables, re-enables and deletes an agent; the
agent's open workspace loses its session at once; an agent changes their password and signs out of
every device. Screenshots at phone and desktop sizes."""
import re
from playwright.sync_api import expect

from test_voice import DESKTOP, PHONE, login


def sign_in(page, server, email, password):
    page.goto(server.url + "/")
    page.fill("input[name=email]", email)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    expect(page.locator(".topbar .status")).to_have_text("Online", timeout=10000)


def test_admin_locks_an_agent_out(server, browser, shoot, console_errors):
    admin = console_errors(browser.new_context(viewport=DESKTOP).new_page())
    login(admin, server)
    created = admin.request.post(f"{server.url}/v1/agents", data={
        "email": "sam@demo.test", "name": "Sam Lock", "password": "a long password", "role": "agent", "permissions": []})
    assert created.status == 201, created.text()

    # Sam works on a phone.
    sam_context = browser.new_context(viewport=PHONE)
    sam = sam_context.new_page()
    sign_in(sam, server, "sam@demo.test", "a long password")
    shoot(sam, "account-1-agent-signed-in-360")

    # The admin opens the team and disables Sam: Sam's real-time connection ends at once.
    admin.click(".account-open")
    dialog = admin.locator("dialog.account")
    expect(dialog).to_be_visible()
    # Which Parley this is, at the foot of the dialog (what an admin quotes in a support request).
    expect(dialog.locator(".about-version")).to_have_text(re.compile(r"^Parley \d+\.\d+\.\d+( · commit [0-9a-f]{7})?$"))
    row = dialog.locator(".team-list li", has_text="Sam Lock")
    expect(row.locator(".tag")).to_have_text("Active")
    shoot(admin, "account-2-team-1280")
    row.get_by_role("button", name="Disable Sam Lock").click()
    expect(row.locator(".tag")).to_have_text("Disabled")
    expect(dialog.locator(".team-note")).to_contain_text("cannot sign in")
    shoot(admin, "account-3-disabled-1280")
    expect(sam.locator(".login")).to_be_visible(timeout=10000)
    expect(sam.locator(".login .error-text")).to_have_text("You were signed out. Sign in again.")
    assert sam.request.get(f"{server.url}/v1/me").status == 401

    # Sam cannot sign in again, and is told why.
    sam.goto(server.url + "/")
    sam.fill("input[name=email]", "sam@demo.test")
    sam.fill("input[name=password]", "a long password")
    sam.click("button[type=submit]")
    expect(sam.locator(".login .error-text")).to_contain_text("disabled")
    shoot(sam, "account-4-disabled-sign-in-360")

    # Enabled again: Sam signs in. Deleted: Sam is gone from the team and signed out.
    row.get_by_role("button", name="Enable Sam Lock").click()
    expect(row.locator(".tag")).to_have_text("Active")
    sign_in(sam, server, "sam@demo.test", "a long password")
    admin.once("dialog", lambda prompt: prompt.accept())
    row.get_by_role("button", name="Delete Sam Lock").click()
    expect(dialog.locator(".team-list li", has_text="Sam Lock")).to_have_count(0)
    expect(sam.locator(".login")).to_be_visible(timeout=10000)
    shoot(admin, "account-5-deleted-1280")
    sam_context.close()
    assert console_errors.errors == [] or all("401" in error or "403" in error for error in console_errors.errors)


def test_agent_changes_password_and_signs_out_everywhere(server, browser, shoot, console_errors):
    admin = browser.new_context(viewport=DESKTOP).new_page()
    login(admin, server)
    created = admin.request.post(f"{server.url}/v1/agents", data={
        "email": "kim@demo.test", "name": "Kim Keys", "password": "a long password", "role": "agent", "permissions": []})
    assert created.status == 201, created.text()

    laptop = browser.new_context(viewport=DESKTOP).new_page()
    phone = console_errors(browser.new_context(viewport=PHONE).new_page())
    sign_in(laptop, server, "kim@demo.test", "a long password")
    sign_in(phone, server, "kim@demo.test", "a long password")

    # On the phone Kim changes the password: the phone stays signed in, the laptop is signed out.
    phone.click(".account-open")
    dialog = phone.locator("dialog.account")
    expect(dialog).to_be_visible()
    expect(dialog.locator(".team")).to_be_hidden()  # not an admin
    dialog.locator("input[name=current]").fill("a long password")
    dialog.locator("input[name=next]").fill("a newer long password")
    shoot(phone, "account-6-change-password-360")
    dialog.get_by_role("button", name="Change password").click()
    expect(dialog.locator(".password-form .form-note")).to_contain_text("Password changed")
    shoot(phone, "account-7-password-changed-360")
    expect(laptop.locator(".login")).to_be_visible(timeout=10000)
    assert laptop.request.get(f"{server.url}/v1/me").status == 401
    assert phone.request.get(f"{server.url}/v1/me").status == 200

    # Sign out everywhere: the phone goes back to the sign-in page.
    dialog.get_by_role("button", name="Sign out everywhere").click()
    expect(phone.locator(".login")).to_be_visible(timeout=10000)
    assert phone.request.get(f"{server.url}/v1/me").status == 401
    shoot(phone, "account-8-signed-out-everywhere-360")
