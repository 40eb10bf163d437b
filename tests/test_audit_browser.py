"""The audit log in a real browser: an owner makes a key on the Keys page and changes the IP
allowlist in Settings, then finds both on the Audit log page (linked from the header), filters it
and downloads it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import browser_page, sign_up

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_owner_finds_what_was_done_on_the_audit_page(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "audit@example.com", "Audit Co")
        page.goto(f"{base}/dashboard/keys")
        page.fill("#id_name", "backend")
        page.select_option("#id_kind", "speech")
        page.click("#key-more summary")  # limits and networks are folded
        page.fill("#id_allowed_ips", "203.0.113.0/24")
        page.click("text=Create key")
        page.locator("#new-key").wait_for()
        page.click("header >> text=Settings")  # the organization's list
        page.fill("#id_allowed_ips", "127.0.0.0/8")
        page.locator("#ip-allowlist-card button[type=submit]").click()
        expect(page.locator("body")).to_contain_text("IP allowlist saved")
        page.click("header >> text=Audit log")
        table = page.locator("table")
        expect(table).to_contain_text("API key created")
        expect(table).to_contain_text("IP allowlist changed")
        expect(table).to_contain_text("speech:write")
        expect(table).to_contain_text("audit@example.com")
        page.select_option("#id_action", "ip_allowlist.")
        page.click("text=Filter")
        expect(table).to_contain_text("IP allowlist changed")
        expect(table).not_to_contain_text("API key created")
        with page.expect_download() as download:
            page.click("text=Download CSV")
        text = open(download.value.path(), encoding="utf-8").read()
    assert text.splitlines()[0].startswith("time,action,actor_type") and "ip_allowlist.updated" in text
    assert "key.created" not in text  # the filter applies to the download too
