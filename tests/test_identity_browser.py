"""Single sign-on and second factors in a real browser, against the live stack.

SSO: an owner connects a real OpenID Connect provider (on loopback) on the Security page, proves
the domain through the stack's DNS server, requires SSO; a colleague then signs in from the login
page through the provider's own page and lands in the organization, made an admin by their group.
Second factors: a member enrols an authenticator app (its code computed from the secret the page
shows) and a passkey on Chromium's virtual authenticator, then signs in again with the passkey."""

from __future__ import annotations

import re

import pytest
from allauth.mfa.totp.internal.auth import format_hotp_value, hotp_value, yield_hotp_counters_from_time
from playwright.sync_api import expect

from tests.browser import browser_page, sign_up
from tests.identity import oidc_provider, sign_in_at_provider, stub_provider_stylesheet
from tests.test_dashboard_ux_browser import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_colleague_signs_in_through_the_organizations_identity_provider(live_stack):
    base = live_stack.base_url
    with oidc_provider() as idp, browser_page() as owner:
        colleague = owner.context.browser.new_page()  # a context of its own: another person's cookies
        colleague.errors = []
        colleague.on("console", lambda m: m.type == "error" and colleague.errors.append(m.text))
        sign_up(owner, base, "olive@acme.example", "Acme SSO")
        owner.click("header >> text=Security")
        owner.fill("#id_issuer", idp.issuer)
        owner.fill("#id_client_id", "tts-dashboard")
        owner.fill("#id_client_secret", "a client secret")
        owner.fill("#id_domain", "acme.example")
        owner.fill("#id_group_roles", "tts-admins")
        owner.locator("#sso-card").get_by_role("button", name="Connect").click()
        expect(owner.locator(".messages")).to_contain_text("Single sign-on saved.")
        expect(owner.locator("#sso-redirect-uri")).to_have_text(
            re.compile(r"/accounts/sso/org-[0-9a-f]+/login/callback/$")
        )
        live_stack.dns.records["_tts-saas.acme.example"] = [owner.locator("#sso-txt-value").inner_text()]
        owner.get_by_role("button", name="Verify domain").click()
        expect(owner.locator(".messages")).to_contain_text("acme.example is proven")
        owner.check("#id_enforced")
        owner.locator("#sso-card").get_by_role("button", name="Save").click()
        expect(owner.locator(".messages")).to_contain_text("Single sign-on saved.")
        assert owner.locator("#id_enforced").is_checked()
        assert serious_violations(owner) == []

        idp.set_user("dana", email="dana@acme.example", email_verified=True, name="Dana", groups=["tts-admins"])
        stub_provider_stylesheet(colleague)
        colleague.goto(f"{base}/accounts/login/")
        colleague.click("#sso-link")
        assert serious_violations(colleague) == []
        colleague.fill("#id_email", "dana@acme.example")
        colleague.click("text=Continue")
        colleague.wait_for_url(f"{idp.issuer}/**")  # the provider's own page
        sign_in_at_provider(colleague, "dana")
        colleague.wait_for_url(f"{base}/dashboard/")
        expect(colleague.locator("header")).to_contain_text("Acme SSO")
        colleague.click("header >> text=Team")
        expect(colleague.locator("table")).to_contain_text(re.compile(r"dana@acme\.example.*admin", re.S))
        assert colleague.errors == []

        owner.click("header >> text=Audit log")
        expect(owner.locator("table")).to_contain_text("signed in with single sign-on")
        expect(owner.locator("table")).to_contain_text("single sign-on domain proven")
    assert owner.errors == []


def totp_code(secret: str) -> str:
    counter = next(iter(yield_hotp_counters_from_time()))
    return format_hotp_value(hotp_value(secret, counter))


def test_a_member_enrols_an_authenticator_app_and_a_passkey_then_signs_in_with_the_passkey(live_stack):
    base = live_stack.base_url.replace("127.0.0.1", "localhost")  # WebAuthn: a domain, not an address
    with browser_page() as page:
        cdp = page.context.new_cdp_session(page)
        cdp.send("WebAuthn.enable")
        authenticator = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True}
        cdp.send(
            "WebAuthn.addVirtualAuthenticator",
            {"options": {**authenticator, "hasUserVerification": True, "isUserVerified": True}},
        )
        sign_up(page, base, "mia@example.com", "Factors Co")
        page.click("header >> text=Security")
        expect(page.locator("#my-factors")).to_contain_text("You sign in with a password only.")
        page.click("text=Manage second factors")
        assert serious_violations(page) == []
        page.click("a[href='/accounts/2fa/totp/activate/']")
        page.wait_for_url(re.compile(r".*/accounts/reauthenticate/"))  # the password again first
        assert serious_violations(page) == []
        page.fill("input[name=password]", "a long enough password")
        with page.expect_response(re.compile(r".*/accounts/2fa/totp/activate/$")) as activation:
            page.click("main button[type=submit]")
        page.wait_for_url(re.compile(r".*/accounts/2fa/totp/activate/$"))
        assert "no-store" in activation.value.headers["cache-control"]  # it shows the secret: never cached
        assert serious_violations(page) == []
        secret = page.locator("#authenticator_secret").input_value()
        page.fill("input[name=code]", totp_code(secret))
        with page.expect_response(re.compile(r".*/accounts/2fa/recovery-codes/$")) as codes:
            page.get_by_role("button", name="Activate").click()
        page.wait_for_url(re.compile(r".*/accounts/2fa/recovery-codes/$"))  # allauth shows the codes next
        assert "no-store" in codes.value.headers["cache-control"]
        expect(page.locator("main")).to_contain_text(re.compile(r"\b\d{8}\b"))  # ten codes to keep
        page.goto(f"{base}/accounts/2fa/webauthn/add/")
        page.fill("input[name=name]", "Laptop")
        page.click("#mfa_webauthn_add")
        page.wait_for_url(re.compile(r".*/accounts/2fa/(webauthn/)?$"))
        page.goto(f"{base}/dashboard/security")
        expect(page.locator("#my-factors")).to_contain_text(
            "an authenticator app, a passkey or security key, recovery codes"
        )
        page.click("header >> text=Log out")

        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", "mia@example.com")
        page.fill("#id_password", "a long enough password")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/accounts/2fa/authenticate/$"))
        assert serious_violations(page) == []
        page.click("#mfa_webauthn_authenticate")  # the virtual authenticator answers
        page.wait_for_url(f"{base}/dashboard/")
        expect(page.locator("header")).to_contain_text("Factors Co")
        assert page.errors == []
