"""Smaller defects of the console's pages, each seen as a new user saw it, in Chromium:
- SSO set-up: the redirect URI and the DNS TXT record were shown only after "Connect", which needs
  them; the client secret was lost by a refused save; removing SSO asked nothing; the card was wider
  than a phone.
- Voices: 62 built-in voices on one long page with no search or filter; the create form offered at
  "3 of 3 used"; ChatTTS voices described with timbres a random seed cannot promise.
- Playground: Kokoro's word timings not shown; "for 26 characters" after 52 typed.
- History: a seeded request under zero retention said it was not kept for want of a seed; the Voice
  column showed an own voice's id instead of its name.
- Team at phone width: the invitation link widened the page; admins saw an empty Actions column."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts.models import Membership, Organization
from tests.browser import browser_page, off_loop, sign_up
from tests.test_dashboard_ux_browser import log_in, serious_violations
from voices.actions import create_voice

pytestmark = pytest.mark.django_db(transaction=True)


def page_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


def test_sso_setup_shows_what_the_provider_and_dns_need_before_connect(live_stack):
    base = live_stack.base_url
    with browser_page(390, 844) as page:
        sign_up(page, base, "sam@setup.example", "Setup Co")
        page.goto(f"{base}/dashboard/security")
        card = page.locator("#sso-card")
        redirect = page.locator("#sso-redirect-uri").inner_text()
        assert re.fullmatch(rf"{base}/accounts/sso/org-[0-9a-f]+/login/callback/", redirect)
        token = page.locator("#sso-txt-value").inner_text()
        assert token.startswith("tts-verify=") and len(token) > 30
        page.fill("#id_domain", "Setup.Example")
        expect(page.locator("#sso-txt-name")).to_have_text("_tts-saas.setup.example")
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        card.get_by_role("button", name="Copy the redirect URI").click()
        assert page.evaluate("navigator.clipboard.readText()") == redirect
        card.get_by_role("button", name="Copy the TXT record's value").click()
        assert page.evaluate("navigator.clipboard.readText()") == token
        assert page_width(page) <= 390
        assert serious_violations(page) == []
        live_stack.dns.records["_tts-saas.setup.example"] = [token]  # published before connecting

        page.fill("#id_issuer", "http://127.0.0.1:9/idp")
        page.fill("#id_client_secret", "the provider's secret")
        card.get_by_role("button", name="Connect").click()  # no client ID: refused
        expect(page.locator("#id_client_id[aria-invalid=true]")).to_be_visible()
        assert page.locator("#id_client_secret").input_value() == "the provider's secret"
        page.fill("#id_client_id", "tts")
        card.get_by_role("button", name="Connect").click()
        expect(page.locator(".messages")).to_contain_text("Single sign-on saved.")
        assert page.locator("#sso-redirect-uri").inner_text() == redirect  # what the provider was told
        assert page.locator("#sso-txt-value").inner_text() == token
        page.get_by_role("button", name="Verify domain").click()
        expect(page.locator(".messages")).to_contain_text("setup.example is proven")
        assert page.locator("#id_client_secret").input_value() == ""  # the stored one is never shown
        assert "Kept when left empty" in card.inner_text()
        assert page_width(page) <= 390

        asked = []
        page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
        card.get_by_role("button", name="Remove single sign-on").click()
        assert asked and "Remove single sign-on from Setup Co?" in asked[0]
        expect(page.locator("#sso-domain-status")).to_contain_text("proven")  # still there
        page.once("dialog", lambda dialog: dialog.accept())
        card.get_by_role("button", name="Remove single sign-on").click()
        expect(page.locator(".messages")).to_contain_text("Single sign-on removed")
        assert page.locator("#sso-redirect-uri").inner_text() == redirect  # the same to connect again
        assert page.errors == []


def visible_voices(page) -> list[tuple[str, str, str]]:
    return [
        tuple(row)
        for row in page.eval_on_selector_all(
            "section[id^=builtin-] tbody tr:not([hidden])",
            "rows => rows.filter(r => r.offsetParent).map(r => [r.dataset.model, r.dataset.voice, r.dataset.language])",
        )
    ]


def test_voices_are_searched_and_filtered_and_a_full_plan_shows_the_way_forward(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "vera@example.com", "Voice Co")
        page.goto(f"{base}/dashboard/voices")
        every = visible_voices(page)
        assert len(every) > 50 and page.locator("#vs-count").inner_text() == f"{len(every)} built-in voices."
        alloy = page.locator("#voices-chattts tr[data-voice=alloy]").inner_text()
        assert "Seed 1111: a fixed random speaker; listen to the preview." in alloy
        heights = page.eval_on_selector_all("section[id^=builtin-] tbody tr", "rows => rows.map(r => r.offsetHeight)")
        assert max(heights) < 40  # one line a voice
        # One short line a voice: 4,682 px for Kokoro's 54, ChatTTS's 13 and OpenAI's names (two lines each: 6,000 px+).
        assert page.evaluate("document.documentElement.scrollHeight") < 40 * len(every) + 1600

        page.fill("#vs-q", "heart")  # as one types
        shown = visible_voices(page)
        assert ("kokoro", "af_heart", "en-us") in shown and len(shown) < 5
        assert page.locator("#vs-count").inner_text() == f"{len(shown)} of {len(every)} built-in voices match."
        assert "q=heart" in page.url  # the address keeps the filter
        assert serious_violations(page) == []

        british = sorted(v for v in every if v[0] == "kokoro" and v[2] == "en-gb")
        assert british
        without_js = page.context.browser.new_context(java_script_enabled=False)
        try:
            plain = without_js.new_page()
            log_in(plain, base, "vera@example.com")
            plain.wait_for_url(f"{base}/dashboard/")
            plain.goto(f"{base}/dashboard/voices")
            plain.select_option("#vs-model", "kokoro")
            plain.select_option("#vs-language", "en-gb")
            plain.get_by_role("button", name="Filter").click()
            plain.wait_for_url(re.compile(r".*model=kokoro.*language=en-gb"))
            assert sorted(visible_voices(plain)) == british
            assert plain.locator("#vs-count").inner_text() == f"{len(british)} of {len(every)} built-in voices match."
            assert plain.locator("section#builtin-chattts").is_hidden()
        finally:
            without_js.close()

        org = off_loop(Organization.objects.get, name="Voice Co")
        for n in range(3):
            off_loop(create_voice, org, {"name": f"Mine {n}", "seed": 10 + n})
        page.goto(f"{base}/dashboard/voices")
        assert page.locator("#voice-usage").inner_text() == "3 of 3 voices of your own used"
        assert page.locator("#voice-form").count() == 0
        full = page.locator("#voices-full")
        assert "delete one of yours above" in full.inner_text()
        full.get_by_role("link", name="move to a plan with more voices").click()
        page.wait_for_url(f"{base}/dashboard/billing/")
        assert page.errors == []


def test_the_playground_shows_kokoros_word_timings_and_says_characters_are_billed(live_stack):
    base = live_stack.base_url
    text = "Words are lit as they are spoken, one after another."
    assert len(text) == 52
    with browser_page() as page:
        sign_up(page, base, "kim@example.com", "Kokoro Co")
        page.goto(f"{base}/dashboard/playground?model=kokoro")
        page.fill("#pg-text", text)
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        assert page.evaluate("window.ttsPlayground.error") is None
        status = page.locator("#pg-status").inner_text()
        assert "52 characters typed, 26 billed (this model counts each character as 0.5 on your plan)" in status
        words = page.locator("#pg-word-list button")
        expect(page.locator("#pg-words")).to_be_visible()
        assert [w.strip() for w in words.all_inner_texts()][:3] == ["Words", "are", "lit"]
        assert re.fullmatch(r"\d+\.\d\d–\d+\.\d\d s", words.nth(2).get_attribute("title"))
        words.nth(2).click()  # heard from there, lit as it plays
        page.wait_for_function("document.querySelector('#pg-word-list button.lit')", timeout=10_000)
        assert serious_violations(page) == []

        page.goto(f"{base}/dashboard/playground?model=chattts")  # weight 1, no word timings
        page.fill("#pg-text", "Short.")
        page.fill("#pg-seed", "3")
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        assert "6 characters billed." in page.locator("#pg-status").inner_text()
        assert page.locator("#pg-words").is_hidden()
        assert page.errors == []


def zero_retention_with_a_voice(email: str) -> tuple[str, str]:
    org = get_user_model().objects.get(username=email).memberships.get().organization
    org.data_retention = Organization.Retention.ZERO
    org.save(update_fields=["data_retention"])
    voice = create_voice(org, {"name": "Narrator", "seed": 42})
    _, raw = org.create_api_key("backend")
    return voice.id, raw


def test_history_names_own_voices_and_says_zero_retention_kept_no_audio(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "hal@example.com", "History Co")
        voice, key = off_loop(zero_retention_with_a_voice, "hal@example.com")
        with live_stack.client(key) as api:
            spoken = api.post("/audio/speech", json={"model": "chattts", "voice": voice, "input": "Hi.", "seed": 7})
            assert spoken.status_code == 200, spoken.text
        page.goto(f"{base}/dashboard/history")
        row = page.locator("#history tbody tr").first
        expect(row.locator(".audio")).to_have_text("Not kept: zero retention (its audio is neither cached nor stored).")
        name = row.locator("td.voice span")
        assert name.inner_text() == "Narrator" and name.get_attribute("title") == voice  # the id on hover
        assert serious_violations(page) == []
        assert page.errors == []


def make_admin(email: str, organization: str) -> None:
    user = get_user_model().objects.create_user(username=email, email=email, password="a long enough password")
    Membership.objects.create(user=user, organization=Organization.objects.get(name=organization), role="admin")


def test_the_team_page_fits_a_phone_and_shows_actions_only_to_who_has_some(live_stack):
    base = live_stack.base_url
    with browser_page(390, 844) as page:
        sign_up(page, base, "tia@example.com", "Phone Team")
        page.goto(f"{base}/dashboard/members")
        assert page.locator("#team th", has_text="Actions").count() == 0  # the only owner: nothing to do
        page.fill("#id_email", "pat@example.com")
        page.get_by_role("button", name="Invite", exact=True).click()
        expect(page.locator(".messages")).to_contain_text("/dashboard/invite/")
        assert page_width(page) <= 390  # the link wraps
        assert page.locator("#team th", has_text="Actions").count() == 1
        assert serious_violations(page) == []

        off_loop(make_admin, "ada@example.com", "Phone Team")
        admin = page.context.browser.new_context(viewport={"width": 390, "height": 844})
        try:
            other = admin.new_page()
            log_in(other, base, "ada@example.com")
            other.wait_for_url(f"{base}/dashboard/")
            other.goto(f"{base}/dashboard/members")
            assert other.locator("#team th", has_text="Actions").count() == 1  # the invitation's
            other.once("dialog", lambda dialog: dialog.accept())
            other.get_by_role("button", name="Withdraw invitation to pat@example.com").click()
            expect(other.locator(".messages")).to_contain_text("pat@example.com")
            assert other.locator("#team th", has_text="Actions").count() == 0  # an admin removes nobody
            assert other.locator("#team tr[data-member] td").count() == 2 * 3
        finally:
            admin.close()
        page.reload()
        assert page.locator("#team th", has_text="Actions").count() == 1  # the owner may remove the admin
        assert page.errors == []
