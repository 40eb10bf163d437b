"""The team page in a real browser (Debian's Chromium through Playwright): an owner invites
someone; the live server sends no e-mail (its EMAIL_BACKEND is the console one), so the page
offers the link and Copy link puts it on the clipboard; the invitee opens it in a browser of
their own and joins with a password; the owner's Team page then lists them as a member with no
"invited" row left, makes them an admin, and says what each role may do."""

from __future__ import annotations

import re

import pytest

from tests.browser import browser_page, sign_up

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_owner_invites_someone_who_joins_and_becomes_an_admin(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "olga@example.com", "Team Works")
        page.click("header >> text=Team")
        page.fill("#id_email", "Pat@Example.com")
        page.select_option("#id_role", "member")
        page.get_by_role("button", name="Invite", exact=True).click()
        message = page.locator(".messages").inner_text()
        assert "This server does not send e-mail" in message
        link = re.search(r"http://\S+/dashboard/invite/\S+", message).group(0)

        row = page.locator("tr[data-invitation='pat@example.com']")
        assert "invited" in row.inner_text()
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        copy = page.get_by_role("button", name="Copy link for pat@example.com")
        copy.click()
        page.wait_for_function("document.getElementById('copy-status').textContent === 'Invitation link copied.'")
        assert copy.inner_text() == "Copied"
        assert page.evaluate("navigator.clipboard.readText()") == link

        invitee = page.context.browser.new_context()  # the invitee's own browser: no session shared
        try:
            joining = invitee.new_page()
            joining.goto(link)
            assert joining.locator("h1").inner_text() == "Join Team Works"
            joining.fill("#id_password", "pats long password")
            joining.get_by_role("button", name="Create account and join").click()
            joining.wait_for_url(f"{base}/dashboard/")
            assert "Welcome to Team Works: you joined as member." in joining.locator(".messages").inner_text()
        finally:
            invitee.close()

        page.reload()
        assert page.locator("tr[data-invitation]").count() == 0
        assert "invited" not in page.locator("#team").inner_text()
        select = page.get_by_label("Role of pat@example.com", exact=True)
        assert select.input_value() == "member"
        select.select_option("admin")
        page.get_by_role("button", name="Save role of pat@example.com").click()
        assert page.locator(".messages").inner_text() == "pat@example.com is now admin."
        assert page.get_by_label("Role of pat@example.com", exact=True).input_value() == "admin"

        roles = page.locator("#roles")
        assert roles.is_visible()
        assert "sees, creates and revokes every API key" in roles.inner_text()
        assert "the only owner can be neither demoted nor removed" in roles.inner_text()
        assert page.errors == []
