"""API keys as objects, in Chromium against the live stack: the compact list fits 1280 and 390 px,
a capped key's 429 names its page, where the owner raises the cap (the key speaks again) and gives
the key a custom combination of scopes; axe finds no serious violation on the list or the page."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser import browser_page, sign_up
from tests.test_dashboard_ux_browser import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Twenty characters!!!"  # 20, billed one each on ChatTTS


def speak(base: str, raw: str) -> httpx.Response:
    return httpx.post(
        f"{base}/v1/audio/speech",
        headers={"Authorization": f"Bearer {raw}"},
        json={"model": "chattts", "input": TEXT, "voice": "alloy", "seed": 1, "response_format": "pcm"},
        timeout=60,
    )


def overflow(page) -> int:
    """How far the page is wider than the window (0: nothing cut or scrolled sideways)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_a_capped_keys_429_leads_to_its_page_where_the_cap_is_raised(live_stack):
    base = live_stack.base_url
    problems: dict[str, list[str]] = {}
    with browser_page() as page:
        sign_up(page, base, "cap@example.com", "Cap Co")
        page.goto(f"{base}/dashboard/keys")
        page.fill("#id_name", "a rather long key name for the nightly batch exporter")
        page.select_option("#id_kind", "speech")
        page.click("#key-more summary")  # limits and networks are folded
        page.fill("#id_monthly_character_cap", "20")
        page.click("text=Create key")
        raw = page.locator("#new-key").inner_text()
        for name in ("second", "third"):
            page.fill("#id_name", name)
            page.click("text=Create key")
            page.locator("#new-key").wait_for()
        assert speak(base, raw).status_code == 200
        refused = speak(base, raw)
        assert refused.status_code == 429, refused.text
        message = refused.json()["error"]["message"]
        path = re.search(r"(/dashboard/keys/\w+)\)", message).group(1)  # the page the message names
        assert "on the dashboard (API keys, then the key's page" in message

        rows = page.locator("table.keys-table tbody tr")
        expect(rows).to_have_count(3)
        row = rows.filter(has_text="nightly batch")
        expect(row.locator("td").nth(1)).to_have_text("speech only")  # its preset, not "restricted"
        for width, height in ((1280, 800), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            page.reload()
            assert overflow(page) <= 0, width  # every column on screen, the status too
            status = rows.first.locator("td").last  # the last column: on screen, not cut
            assert status.evaluate("td => td.getBoundingClientRect().right <= window.innerWidth"), width
            if found := serious_violations(page):
                problems[f"/dashboard/keys at {width}px"] = found
        page.set_viewport_size({"width": 1280, "height": 800})

        row.locator("a").click()
        page.wait_for_url(f"{base}{path}")
        facts = page.locator("#key-facts")
        expect(facts).to_contain_text("speech only: speech:write")
        expect(facts).to_contain_text("cap@example.com (revoked if they leave the organization)")
        expect(page.locator("#key-last-used")).to_contain_text("from 127.0.0.1")
        expect(facts).to_contain_text("20 of 20 characters")
        expect(page.locator("#custom-scopes")).to_be_hidden()  # only for a custom key
        page.fill("#id_monthly_character_cap", "1000")
        page.select_option("#id_access", "custom")
        expect(page.locator("#custom-scopes")).to_be_visible()
        page.select_option("#id_scope_speech", "write")
        page.select_option("#id_scope_tokens", "write")  # client tokens, without being an admin key
        page.click("text=Save changes")
        expect(page.locator(".messages")).to_contain_text("saved")
        expect(facts).to_contain_text("custom: speech:write, tokens:write")
        expect(facts).to_contain_text("20 of 1000 characters")
        assert speak(base, raw).status_code == 200  # the raised cap applies at once
        minted = httpx.post(f"{base}/v1/tokens", headers={"Authorization": f"Bearer {raw}"}, json={}, timeout=30)
        assert minted.status_code in (200, 201), minted.text

        for width, height in ((1280, 800), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            page.reload()
            assert overflow(page) <= 0, width
            if found := serious_violations(page):
                problems[f"the key's page at {width}px"] = found
        page.select_option("#id_scope_speech", "")
        page.select_option("#id_scope_tokens", "")
        page.click("text=Save changes")
        expect(page.locator("#id_access_error")).to_have_text("Choose at least one scope below, or a preset.")
        if found := serious_violations(page):
            problems["the key's page with an error"] = found

        page.click("button:has-text('Rotate')")
        new = page.locator("#new-key").inner_text()
        assert new != raw and page.url == f"{base}{path}"
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("button:has-text('Revoke')")
        expect(page.locator(".messages")).to_contain_text("revoked")
        assert page.errors == []
    assert speak(base, new).status_code == 401
    assert problems == {}
