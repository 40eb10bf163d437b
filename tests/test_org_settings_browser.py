"""Settings where people look for them, in Chromium against the live stack: data retention and the
IP allowlist on the Settings page (no longer on API keys, nor the webhook secret); an allowlist
without the browser's own address accepted there (it restricts API calls, not the dashboard) and
then refusing the API; the default voice list showing the chosen model's voices only, a voice of
another model refused in words; a member reading the default model's name. Axe on the page."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts.models import Membership, Organization
from tests.browser import browser_page, off_loop, sign_up
from tests.test_dashboard_ux_browser import log_in, log_out, serious_violations

pytestmark = pytest.mark.django_db(transaction=True)


def add_member(email: str, organization: str) -> None:
    user = get_user_model().objects.create_user(email, email, "a long enough password")
    Membership.objects.create(user=user, organization=Organization.objects.get(name=organization), role="member")


def test_retention_allowlist_and_defaults_are_set_in_settings(live_stack):
    base = live_stack.base_url
    problems: dict[str, list[str]] = {}
    with browser_page() as page:
        sign_up(page, base, "set@example.com", "Settings Co")
        page.goto(f"{base}/dashboard/keys")
        page.fill("#id_name", "app")
        page.click("text=Create key")
        raw = page.locator("#new-key").inner_text()
        sections = page.locator("main h2, main h3").all_inner_texts()
        assert sections == ["Create a key"]  # no retention, allowlist, webhook secret or endpoint here

        page.click("header >> text=Settings")
        card = page.locator("#ip-allowlist-card")
        expect(card).to_contain_text("It applies to API calls only, not to this dashboard")
        page.fill("#id_allowed_ips", "203.0.113.0/24")  # the browser calls from 127.0.0.1
        card.locator("button[type=submit]").click()
        expect(page.locator(".messages")).to_contain_text("IP allowlist saved")
        expect(page.locator("#id_allowed_ips")).to_have_value("203.0.113.0/24")
        page.reload()  # the dashboard still answers
        expect(page.locator("h1")).to_have_text("Organization settings")
        refused = httpx.get(f"{base}/v1/voices", headers={"Authorization": f"Bearer {raw}"}, timeout=30)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "ip_not_allowed"
        page.fill("#id_allowed_ips", "")
        card.locator("button[type=submit]").click()
        expect(page.locator(".messages")).to_contain_text("IP allowlist saved")

        page.select_option("#data-retention", "zero")
        page.locator("#data-retention ~ button").click()
        expect(page.locator(".messages")).to_contain_text("Data retention: Zero")
        expect(page.locator("#data-retention")).to_have_value("zero")

        voice = page.locator("#id_voice")
        page.select_option("#id_model", "chattts")
        visible = voice.evaluate("s => [...s.querySelectorAll('optgroup:not([hidden])')].map(g => g.label)")
        assert visible == ["ChatTTS"]
        assert voice.evaluate("s => s.querySelector('option[value=af_heart]').closest('optgroup').hidden")
        page.select_option("#id_model", "kokoro")
        page.select_option("#id_voice", "af_heart")
        page.select_option("#id_model", "chattts")  # a Kokoro voice is no longer offered: cleared
        expect(voice).to_have_value("")
        page.evaluate(  # a voice of another model posted anyway (an old page, a script): said in words
            "() => { const s = document.getElementById('id_voice'); "
            "s.querySelectorAll('optgroup').forEach(g => { g.hidden = g.disabled = false; }); s.value = 'af_heart'; }"
        )
        page.click("text=Save defaults")
        expect(page.locator("#id_voice_error")).to_have_text(
            "af_heart is a Kokoro-82M voice; ChatTTS cannot speak with it. "
            "Choose one of ChatTTS's voices, or none for its default."
        )
        for width, height in ((1280, 800), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            if found := serious_violations(page):
                problems[f"/dashboard/organization at {width}px"] = found
        page.set_viewport_size({"width": 1280, "height": 800})
        assert page.errors == []

        off_loop(add_member, "mem@example.com", "Settings Co")
        log_out(page)
        log_in(page, base, "mem@example.com")
        page.goto(f"{base}/dashboard/organization")
        expect(page.locator("#speech-defaults-now")).to_contain_text("The service's default (ChatTTS) · alloy")
    assert problems == {}
