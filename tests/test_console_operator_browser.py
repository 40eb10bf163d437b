"""Pages of the console's third look in Debian's Chromium, each checked by axe: browser origins set on
Settings let a page served elsewhere speak with a client token (and no other page); the audit log
filters settings changes, names every action, shows changes as lines and picks its actor by name;
the operations page says when it read its figures and reads them again until paused, staff find it
and the admin console in the menu, whose index has one Accounts section and no unused ones; billing
without Stripe names the operator's contact and the plans' units, models and overage."""

from __future__ import annotations

import contextlib
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts.keys import set_speech_defaults
from tests.browser import browser_page, off_loop, sign_up
from tests.test_dashboard_ux_browser import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)

SPEAK = {"model": "kokoro", "input": "From a page.", "voice": "af_heart", "response_format": "wav"}


def owner_of(email: str, staff: bool = False):
    user = get_user_model().objects.get(username=email)
    if staff:  # the operator's staff, with every right in the admin console
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
    return user, user.memberships.get().organization


def make_key(email: str) -> str:
    _, org = owner_of(email)
    return org.create_api_key("browser tokens", kind="admin")[1]


class AppPage(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"<!doctype html><title>app</title>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def app_origin():
    """A web page of another origin (another port of this machine), as a tenant's site would be."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), AppPage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def speak_from(page, origin: str, base: str, token: str) -> str:
    """Open a page of `origin` and call the speech API from it with `token`: what its script saw."""
    page.goto(f"{origin}/")
    return page.evaluate(
        """async ([url, token, body]) => {
            try {
              const r = await fetch(url, {method: "POST", body: JSON.stringify(body),
                headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json"}});
              return r.status + " " + (await r.arrayBuffer()).byteLength;
            } catch (error) { return "refused: " + error.name; }
        }""",
        [f"{base}/v1/audio/speech", token, SPEAK],
    )


def mint(live_stack, key: str) -> str:
    with live_stack.client(key) as client:
        return client.post("/tokens", json={}).json()["token"]


def test_origins_set_on_settings_let_that_page_speak_with_a_client_token_and_no_other(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "origins@example.com", "Origins Co")
        page.goto(f"{base}/dashboard/organization")
        page.fill("#browser-origins-input", "https://app.example.com/path")
        page.click("#browser-origins button[type=submit]")
        expect(page.locator(".messages")).to_contain_text("no path")
        with app_origin() as app, app_origin() as elsewhere:
            page.fill("#browser-origins-input", f"{app}\nhttps://app.example.com")
            page.click("#browser-origins button[type=submit]")
            expect(page.locator(".messages")).to_contain_text(f"Browser origins saved: {app}, https://app.example.com.")
            expect(page.locator("#browser-origins-input")).to_have_value(f"{app}\nhttps://app.example.com")
            assert serious_violations(page) == []
            key = off_loop(make_key, "origins@example.com")
            listed = speak_from(page, app, base, mint(live_stack, key))
            unlisted = speak_from(page, elsewhere, base, mint(live_stack, key))
            by_key = speak_from(page, app, base, key)  # a key in a page: never answered to it
    assert re.fullmatch(r"200 \d{4,}", listed), (listed, page.errors)
    assert unlisted == by_key == "refused: TypeError"


def test_the_audit_log_filters_settings_names_every_action_and_reads_changes_as_lines(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "auditor@example.com", "Audited Co")
        page.goto(f"{base}/dashboard/organization")
        page.fill("#browser-origins-input", "https://app.example.com")
        page.click("#browser-origins button[type=submit]")
        expect(page.locator(".messages")).to_contain_text("Browser origins saved")

        def defaults():
            user, org = owner_of("auditor@example.com")
            set_speech_defaults(org, "kokoro", "af_heart", user)
            org.create_api_key("backend")

        off_loop(defaults)
        page.goto(f"{base}/dashboard/audit")
        page.select_option("#id_action", "settings.")
        page.click("text=Filter")
        table = page.locator("table")
        expect(table).to_contain_text("default model and voice changed")
        expect(table).to_contain_text("browser origins changed")
        expect(table).to_contain_text("browser origins: none → https://app.example.com")
        expect(table).to_contain_text("model: none → kokoro")
        expect(table).not_to_contain_text("{")  # no Python dicts
        expect(table).not_to_contain_text("API key created")
        expect(table).not_to_contain_text("(member")  # the owner by address, not by number
        cell = page.locator("td.audit-change").first
        assert cell.evaluate("e => e.scrollWidth <= e.clientWidth")  # wrapped, not cut
        assert serious_violations(page) == []
        page.select_option("#id_action", "")
        page.select_option("#id_actor", page.locator("#id_actor option", has_text="backend (").get_attribute("value"))
        page.click("text=Filter")
        expect(table).to_contain_text("No events match these filters")  # the key did nothing
        page.select_option("#id_actor", label="auditor@example.com")
        page.click("text=Filter")
        expect(table).to_contain_text("browser origins changed")
        expect(table).to_contain_text("auditor@example.com")


def test_operations_says_when_it_read_and_reads_again_until_paused_and_staff_find_it(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "member@example.com", "Plain Co")
        expect(page.locator("#site-menu")).not_to_contain_text("Operations")  # not staff
        off_loop(owner_of, "member@example.com", staff=True)
        page.goto(f"{base}/dashboard/")
        menu = page.locator("#site-menu")
        expect(menu.locator("#operations-link")).to_have_text("Operations")
        expect(menu.locator("#admin-console-link")).to_have_text("Admin console")
        page.click("#operations-link")
        read_at = page.locator("#read-at")
        expect(read_at).to_have_text(re.compile(r"read at \d\d:\d\d:\d\d UTC"))
        assert serious_violations(page) == []
        first = read_at.inner_text()
        expect(read_at).not_to_have_text(first, timeout=15_000)  # read again by itself
        page.click("#refresh-pause")
        expect(page.locator("#refresh-pause")).to_have_attribute("aria-pressed", "true")
        paused_at = read_at.inner_text()
        time.sleep(11)
        assert read_at.inner_text() == paused_at
        page.click("#refresh-now")
        expect(read_at).to_have_text(re.compile(r"read at \d\d:\d\d:\d\d UTC"))
        page.goto(f"{base}/admin/")
        sections = page.locator("#content-main caption").all_inner_texts()
        assert sections.count("ACCOUNTS") + sections.count("Accounts") == 1, sections
        text = page.locator("#content-main").inner_text()
        for unused in ("Groups", "Sites", "Social applications", "Social application tokens"):
            assert unused not in text, unused
        assert "Organizations, members and keys" in text or "ORGANIZATIONS, MEMBERS AND KEYS" in text


def test_billing_without_stripe_names_the_operators_contact_and_the_plans_terms(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "payer@example.com", "Payer Co")
        off_loop(lambda: get_user_model().objects.create_superuser("ops", "ops@operator.example", "a long password!"))
        page.goto(f"{base}/dashboard/billing/")
        expect(page.locator("#operator-contact")).to_have_attribute("href", "mailto:ops@operator.example")
        table = page.locator("#plans-compared table")
        expect(table).to_contain_text("characters/month")
        expect(table).to_contain_text("requests/min")
        expect(table).to_contain_text("Kokoro-82M ×0.5")
        expect(table).to_contain_text("per 1,000 characters")
        assert serious_violations(page) == []
