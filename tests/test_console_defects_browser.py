"""Defects a new user found in the console, each seen as they saw it, in Chromium:
- Copy without `navigator.clipboard` (plain http on a LAN address) threw a TypeError and copied
  nothing, the key's one-time secret included: now the text is selected for Ctrl+C, or offered in a
  box; "Copied" reads "Copy" again after a moment.
- Play looked enabled when it was not (text over the limit, quota used up): now greyed, the reason
  beside it.
- After Stop: "Cannot close a closed AudioContext"; focus fell to <body> after Play; "left this
  month" never changed after a play; quiet buttons turned red on hover like destructive ones."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import browser_page, sign_up

pytestmark = pytest.mark.django_db(transaction=True)

NO_CLIPBOARD = "Object.defineProperty(Navigator.prototype, 'clipboard', { get: () => undefined });"


def test_copy_without_a_clipboard_selects_the_text_instead_of_failing(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        page.add_init_script(NO_CLIPBOARD)  # as on http://192.168.1.20: no clipboard API at all
        sign_up(page, base, "copy@example.com", "Copy Co")
        page.goto(f"{base}/dashboard/keys")
        page.fill("#id_name", "lan")
        page.click("text=Create key")
        secret = page.locator("#new-key").inner_text().strip()
        button = page.locator("button[data-copy=snippet-env]")
        button.click()
        expect(button).to_have_text("Selected: press Ctrl+C")
        assert page.evaluate("window.getSelection().toString()") == f"export TTS_API_KEY={secret}"
        expect(button).to_have_text("Copy", timeout=5000)  # and reads as before

        page.goto(f"{base}/dashboard/playground")
        offered = []
        page.on(
            "dialog", lambda dialog: (offered.append(dialog.message + "\n" + dialog.default_value), dialog.accept())
        )
        page.click("#pg-code")
        page.wait_for_function("document.querySelector('#pg-code').textContent === 'Copy as curl'")
        assert len(offered) == 1 and "/v1/audio/speech" in offered[0] and "$TTS_API_KEY" in offered[0]
        assert page.errors == []


def test_play_says_why_it_waits_and_the_controls_keep_focus_and_counts(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "play@example.com", "Play Co")
        page.goto(f"{base}/dashboard/playground")
        play, reason = page.locator("#pg-play"), page.locator("#pg-play-reason")
        page.fill("#pg-text", "x" * 1001)
        expect(play).to_be_disabled()
        expect(reason).to_have_text("The text is over the 1,000-character limit: shorten it.")
        grey = play.evaluate("b => getComputedStyle(b).backgroundColor")
        page.fill("#pg-text", "")
        expect(reason).to_have_text("Type some text to play.")
        page.fill("#pg-text", "Short and sweet.")
        expect(reason).to_have_text("")
        assert play.evaluate("b => getComputedStyle(b).backgroundColor") != grey  # enabled looks enabled
        left_before = page.locator("#pg-count").inner_text()

        page.fill("#pg-seed", "4")
        play.click()
        expect(page.locator("#pg-stop")).to_be_focused()  # not <body>
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        expect(play).to_be_focused()
        left_after = page.locator("#pg-count").inner_text()
        assert left_before.endswith("left this month") and left_after != left_before
        assert int(left_before.split("·")[-1].split()[0].replace(",", "")) - int(
            left_after.split("·")[-1].split()[0].replace(",", "")
        ) == len("Short and sweet.")

        page.fill("#pg-text", " ".join(f"Sentence {i} is long enough to be stopped." for i in range(15)))
        play.click()
        page.wait_for_function("window.ttsPlayground.started || window.ttsPlayground.error", timeout=60_000)
        page.click("#pg-stop")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        page.wait_for_timeout(1500)  # the context's delayed close would have thrown by now
        assert page.errors == []

        quiet = page.locator("#pg-code")
        quiet.hover()
        hovered = quiet.evaluate("b => getComputedStyle(b).color")
        page.goto(f"{base}/dashboard/keys")
        page.fill("#id_name", "doomed")
        page.click("text=Create key")
        page.click("table >> text=doomed")  # the key's page
        revoke = page.locator("button:has-text('Revoke')")
        revoke.hover()
        assert revoke.evaluate("b => getComputedStyle(b).color") != hovered  # only destructive ones turn red
