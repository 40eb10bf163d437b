"""Second factors, sessions and the account page in Chromium, against the live stack.

A passkey is added at localhost (at 127.0.0.1 the page says why it cannot be, and links there); the
sign-in then offers that passkey and a recovery code, and no authenticator-code box. The sessions
page names browsers, marks this device and fits a phone. A member held by one organization's
second-factor rule switches to another from the factor page, and after adding an app continues to
the dashboard. A last owner is shown the way to close the organization in its Settings."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from accounts.models import Organization
from tests.browser import browser_page, off_loop, sign_up
from tests.test_dashboard_ux_browser import serious_violations
from tests.test_identity_browser import totp_code

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "a long enough password"
FIREFOX_ON_WINDOWS = "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0"


def sign_in(page, base: str, email: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", email)
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_a_passkey_is_added_at_localhost_and_the_sign_in_offers_it_and_a_recovery_code(live_stack):
    at_ip = live_stack.base_url
    base = at_ip.replace("127.0.0.1", "localhost")
    with browser_page() as page:
        cdp = page.context.new_cdp_session(page)
        cdp.send("WebAuthn.enable")
        options = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True}
        cdp.send(
            "WebAuthn.addVirtualAuthenticator",
            {"options": {**options, "hasUserVerification": True, "isUserVerified": True}},
        )
        sign_up(page, base, "pia@example.com", "Passkey Co")
        page.goto(f"{base}/accounts/2fa/")
        expect(page.locator("header nav")).to_contain_text("API keys")  # the dashboard's menu
        expect(page.locator("#mfa-webauthn")).to_contain_text("None added.")
        assert serious_violations(page) == []
        page.get_by_role("link", name="Add a passkey or security key").click()
        page.wait_for_url(re.compile(r".*/accounts/reauthenticate/"))
        page.fill("input[name=password]", PASSWORD)
        page.click("main button[type=submit]")
        page.wait_for_url(re.compile(r".*/accounts/2fa/webauthn/add/$"))
        assert serious_violations(page) == []
        page.fill("input[name=name]", "Laptop")
        page.click("#mfa_webauthn_add")
        page.wait_for_url(re.compile(r".*/accounts/2fa/recovery-codes/$"))  # a first factor: its codes next
        codes = page.locator("#recovery_codes").input_value().split()
        assert len(codes) == 10
        assert serious_violations(page) == []
        page.get_by_role("link", name="Saved them: continue to the dashboard").click()
        page.wait_for_url(f"{base}/dashboard/")
        page.click("header >> text=Log out")

        sign_in(page, base, "pia@example.com")
        page.wait_for_url(re.compile(r".*/accounts/2fa/authenticate/$"))
        expect(page.locator("input[name=code]")).to_have_count(0)  # no app: no code box
        expect(page.get_by_role("button", name="Use a passkey or security key")).to_be_visible()
        assert serious_violations(page) == []
        page.get_by_role("link", name="Use a recovery code").click()
        expect(page.locator("h1")).to_have_text("Use a recovery code")
        page.get_by_role("textbox", name="Recovery code").fill(codes[0])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{base}/dashboard/")
        page.click("header >> text=Log out")
        sign_in(page, base, "pia@example.com")
        page.get_by_role("button", name="Use a passkey or security key").click()  # the virtual authenticator answers
        page.wait_for_url(f"{base}/dashboard/")

        # At the address itself: no dead button, but why, and where passkeys work.
        sign_in(page, at_ip, "pia@example.com")
        page.wait_for_url(re.compile(r".*/accounts/2fa/authenticate/$"))
        expect(page.locator("#passkey")).to_contain_text("browsers refuse them at an IP address such as 127.0.0.1")
        expect(page.locator("#passkeys-elsewhere")).to_have_attribute("href", f"{base}/accounts/login/")
        expect(page.get_by_role("button", name="Use a passkey or security key")).to_have_count(0)
        assert serious_violations(page) == []
        page.get_by_role("link", name="Use a recovery code").click()
        page.get_by_role("textbox", name="Recovery code").fill(codes[1])
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{at_ip}/dashboard/")
        page.goto(f"{at_ip}/accounts/2fa/")
        expect(page.locator("#mfa-webauthn")).to_contain_text("You have added 1 passkey or security key.")
        expect(page.locator("#passkeys-elsewhere")).to_have_attribute("href", f"{base}/accounts/2fa/")
        expect(page.get_by_role("link", name="Add a passkey or security key")).to_have_count(0)
        page.goto(f"{at_ip}/accounts/2fa/webauthn/add/")
        page.wait_for_url(re.compile(r".*/accounts/reauthenticate/"))
        page.fill("input[name=password]", PASSWORD)
        page.click("main button[type=submit]")
        page.wait_for_url(f"{at_ip}/accounts/2fa/webauthn/add/")
        expect(page.locator("#passkeys-refused")).to_contain_text("a passkey belongs to the name it was added at")
        expect(page.locator("#mfa_webauthn_add")).to_have_count(0)
        assert serious_violations(page) == []
        assert page.errors == []


def test_the_sessions_page_names_browsers_marks_this_device_and_fits_a_phone(live_stack):
    base = live_stack.base_url
    with browser_page(width=390, height=844) as page:
        sign_up(page, base, "sam@example.com", "Sessions Co")
        elsewhere = page.context.browser.new_context(user_agent=FIREFOX_ON_WINDOWS).new_page()
        sign_in(elsewhere, base, "sam@example.com")
        elsewhere.wait_for_url(f"{base}/dashboard/")

        page.goto(f"{base}/dashboard/account")
        page.get_by_role("link", name="Where you are signed in").click()
        expect(page.locator("#sessions li")).to_have_count(2)
        this_one = page.locator("#sessions li[aria-current=true]")
        expect(this_one).to_contain_text("Chrome on Linux")
        expect(this_one).to_contain_text("This device")
        expect(page.locator("#sessions li", has_text="Firefox on Windows")).not_to_contain_text("This device")
        expect(page.locator("main")).not_to_contain_text("Mozilla/5.0")
        assert page_width(page) <= 390
        page.get_by_role("button", name="Menu").click()
        expect(page.locator("#site-menu")).to_contain_text("API keys")
        assert serious_violations(page) == []
        page.get_by_role("button", name="Sign out the other sessions").click()
        expect(page.locator("#sessions li")).to_have_count(1)
        elsewhere.goto(f"{base}/dashboard/keys")
        elsewhere.wait_for_url(re.compile(r".*/accounts/login/"))
        assert page.errors == []


def test_a_member_held_by_one_organizations_rule_switches_to_another_then_adds_an_app(live_stack):
    base = live_stack.base_url
    with browser_page(width=390, height=844) as page:
        sign_up(page, base, "tia@example.com", "Calm Co")
        page.goto(f"{base}/dashboard/signup")
        page.fill("#id_organization", "Strict Co")
        page.click("main button[type=submit]")
        page.wait_for_url(f"{base}/dashboard/")
        off_loop(lambda: Organization.objects.filter(name="Strict Co").update(require_mfa=True))

        page.goto(f"{base}/dashboard/keys")
        page.wait_for_url(f"{base}/accounts/2fa/")
        expect(page.locator("#mfa-required")).to_contain_text("Strict Co requires a second factor")
        assert page_width(page) <= 390
        assert serious_violations(page) == []
        page.get_by_role("button", name="Switch to Calm Co").click()
        page.wait_for_url(f"{base}/dashboard/")
        expect(page.locator("h1")).to_have_text("Calm Co")
        page.goto(f"{base}/dashboard/keys")
        expect(page.locator("h1")).to_contain_text("API keys")  # not held here

        page.get_by_role("button", name="Menu").click()
        page.get_by_label("Organization").select_option(label="Strict Co")  # back: held again
        page.wait_for_url(f"{base}/accounts/2fa/")
        page.get_by_role("link", name="Activate").click()
        page.wait_for_url(re.compile(r".*/accounts/reauthenticate/"))
        page.fill("input[name=password]", PASSWORD)
        page.click("main button[type=submit]")
        page.wait_for_url(re.compile(r".*/accounts/2fa/totp/activate/$"))
        assert page_width(page) <= 390
        assert serious_violations(page) == []
        page.fill("input[name=code]", totp_code(page.locator("#authenticator_secret").input_value()))
        page.get_by_role("button", name="Activate").click()
        page.wait_for_url(re.compile(r".*/accounts/2fa/recovery-codes/$"))
        assert page_width(page) <= 390
        page.get_by_role("link", name="Saved them: continue to the dashboard").click()
        page.wait_for_url(f"{base}/dashboard/")
        expect(page.locator("h1")).to_have_text("Strict Co")
        assert page.errors == []


def test_a_last_owner_is_shown_how_to_close_the_organization_in_its_settings(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "uma@example.com", "First Co")
        page.goto(f"{base}/dashboard/signup")
        page.fill("#id_organization", "Second Co")
        page.click("main button[type=submit]")
        page.wait_for_url(f"{base}/dashboard/")
        page.click("#account-link")
        blocked = page.locator("#delete-blocked")
        expect(blocked).to_contain_text("close the organization yourself in its Settings")
        expect(blocked).not_to_contain_text("operator")
        expect(page.get_by_role("button", name="Delete my account")).to_have_count(0)
        assert serious_violations(page) == []
        page.locator("#delete-ways li", has_text="First Co").get_by_role("button", name="Close it in Settings").click()
        page.wait_for_url(f"{base}/dashboard/organization#close-org")
        expect(page.locator("#close-org")).to_contain_text("Close First Co")
        page.click("#account-link")
        page.locator("#delete-ways li", has_text="First Co").get_by_role("link", name="Close it in Settings").click()
        page.wait_for_url(f"{base}/dashboard/organization#close-org")
        expect(page.locator("#close-org")).to_contain_text("Close First Co")
        assert page.errors == []
