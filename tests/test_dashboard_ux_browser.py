"""The dashboard's defects found by using it as a new user would, each shown in Debian's Chromium:
a mixed-case address signs in as typed, a reload makes no second key, a full quota is red and says
what to do, errors are pages, the playground downloads in the format picked without billing again,
form errors are tied to their fields and focused, the header is a menu at phone width and wide
tables say that they scroll; and axe-core finds no serious or critical violation on any page."""

from __future__ import annotations

import io
import re

import av
import pytest
from axe_playwright_python.sync_playwright import Axe
from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import default_token_generator
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from playwright.sync_api import expect

from accounts import actions
from accounts.models import Organization
from billing import quota
from billing.models import UsageEvent
from tests.browser import browser_page, off_loop, sign_up
from voices.actions import create_voice
from voices.lexicons import save_lexicon
from voices.models import Lexicon

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

PASSWORD = "a long enough password"  # what tests.browser.sign_up types


def log_in(page, base: str, email: str, password: str = PASSWORD) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", email)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


def log_out(page) -> None:
    page.click("header >> text=Log out")
    page.wait_for_url(re.compile(r".*/accounts/login/$"))


def test_a_mixed_case_address_signs_in_exactly_as_it_was_typed(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "Dana.Dev@Example.com", "Case Co")
        log_out(page)
        log_in(page, base, "Dana.Dev@Example.com")  # what the password manager saved
        page.wait_for_url(f"{base}/dashboard/")
        assert page.locator("h1").inner_text() == "Case Co"
        log_out(page)
        log_in(page, base, "Dana.Dev@Example.com", "not the password")
        alert = page.locator("[role=alert]")  # read out by screen readers, not only shown
        assert "That e-mail address and password do not match an account" in alert.inner_text()
        assert page.errors == []


def test_reloading_the_keys_page_creates_no_second_key_and_a_taken_name_is_refused(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "reload@example.com", "Reload Co")
        page.goto(f"{base}/dashboard/keys")
        # The list before the form; the expiry date only once "On a date" is picked (it showed beside "Never").
        assert page.locator(".keys-table").bounding_box()["y"] < page.locator("#id_name").bounding_box()["y"]
        assert page.locator("#id_expires_on").is_hidden()
        # A short form: name, access, owner and expiry; limits and networks folded until asked for.
        shown = page.locator("#key-create .field:visible")
        assert shown.count() == 4, shown.all_inner_texts()
        assert page.locator("#id_allowed_ips").is_hidden() and page.locator("#id_requests_per_minute").is_hidden()
        page.select_option("#id_expires", "date")
        assert page.locator("#id_expires_on").is_visible()
        page.select_option("#id_expires", "never")
        page.fill("#id_name", "ci")
        page.click("text=Create key")
        secret = page.locator("#new-key").inner_text()
        assert page.url == f"{base}/dashboard/keys"  # redirected after the POST
        assert f"export TTS_API_KEY={secret}" in page.locator("#snippet-env").inner_text()
        page.reload()
        assert page.locator("#new-key").count() == 0  # the secret was shown once
        rows = page.locator("tbody tr", has_text="tts_")
        assert rows.count() == 1 and rows.locator("td").first.inner_text().splitlines()[0] == "ci"

        page.fill("#id_name", "CI")  # names are unique among active keys, in any case
        page.click("text=Create key")
        name = page.locator("#id_name[aria-invalid=true]")
        expect(name).to_be_focused()  # focus moved to the first error
        error = page.locator(f"#{name.get_attribute('aria-describedby').split()[-1]}")
        assert "exists already" in error.inner_text() and error.is_visible()
        assert page.locator("tbody tr", has_text="tts_").count() == 1
        assert page.errors == []


def meter_colour(page) -> tuple[int, int, int]:
    """The colour in the middle of the filled part of the quota meter, as drawn on screen."""
    shot = page.locator("#quota-meter").screenshot()
    frame = next(av.open(io.BytesIO(shot), format="png_pipe").decode(video=0))
    pixels = frame.to_ndarray(format="rgb24")
    height, width, _ = pixels.shape
    return tuple(int(v) for v in pixels[height // 2, min(width // 20, width - 1)])


def test_a_full_quota_is_red_and_says_what_to_do(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "meter@example.com", "Meter Co")  # the free plan: 10,000 characters
        org = off_loop(Organization.objects.get, name="Meter Co")
        off_loop(quota.charge, org, 2_000, 10_000)
        page.reload()
        red, green, blue = meter_colour(page)
        assert green > red and green > blue  # healthy
        assert page.locator("#quota-warning").count() == 0
        off_loop(quota.charge, org, 6_500, 10_000)
        page.reload()
        red, green, blue = meter_colour(page)
        assert red > 150 and green > 100 and blue < 100  # amber from 80 %
        assert "85.0% of this month's characters are used." in page.locator("#quota-warning").inner_text()
        off_loop(quota.charge, org, 1_500, 10_000)
        page.reload()
        red, green, blue = meter_colour(page)
        assert red > 150 and green < 100 and blue < 100  # red when used up
        warning = page.locator("#quota-warning")
        assert "characters are used up" in warning.inner_text() and "Ask your operator" in warning.inner_text()
        assert page.errors == []


def test_a_missing_dashboard_page_is_a_page_with_the_navigation(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "lost@example.com", "Lost Co")
        response = page.goto(f"{base}/dashboard/nope")
        assert response.status == 404
        assert page.locator("h1").inner_text() == "Page not found"
        assert page.locator("nav[aria-label=Dashboard]").is_visible()
        page.click("text=Back to the overview")
        page.wait_for_url(f"{base}/dashboard/")


def test_the_playground_downloads_the_format_picked_without_generating_again(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "formats@example.com", "Format Co")
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        page.goto(f"{base}/dashboard/playground")
        page.fill("#pg-text", "Pick a format.")
        page.fill("#pg-seed", "4")
        page.select_option("#pg-format", "mp3")
        assert page.locator("#pg-download").inner_text() == "Download MP3"
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        assert page.evaluate("window.ttsPlayground.error") is None
        with page.expect_download() as download:
            page.click("#pg-download")
        mp3 = download.value
        assert mp3.suggested_filename == "speech.mp3"
        with open(mp3.path(), "rb") as saved, av.open(saved) as container:
            stream = container.streams.audio[0]
            assert container.format.name == "mp3"
            seconds = sum(frame.samples for frame in container.decode(stream)) / stream.rate
        played = page.evaluate("window.ttsPlayground.bytes") / 2 / 24000
        assert abs(seconds - played) < 0.1  # what was played, encoded: not a new generation
        page.select_option("#pg-format", "wav")
        with page.expect_download() as download:
            page.click("#pg-download")
        assert download.value.suggested_filename == "speech.wav"

        page.click("#pg-python")
        code = page.evaluate("navigator.clipboard.readText()")
        assert f'OpenAI(base_url="{base}/v1", api_key=os.environ["TTS_API_KEY"])' in code
        assert 'response_format="wav"' in code and '"seed":4' in code

        page.goto(f"{base}/dashboard/")
        assert page.locator("#stat-requests").inner_text() == "1"  # one generation billed, two downloads
        assert page.errors == []


def test_at_phone_width_the_header_is_a_menu_and_wide_tables_say_they_scroll(live_stack):
    base = live_stack.base_url
    with browser_page(width=390, height=844) as page:
        sign_up(page, base, "pocket@example.com", "Pocket Menu Co")
        header = page.locator("header")
        assert header.bounding_box()["height"] < 70  # one row, not three
        nav = page.locator("nav[aria-label=Dashboard]")
        toggle = page.locator("button.menu-toggle")
        assert not nav.is_visible() and toggle.get_attribute("aria-expanded") == "false"
        toggle.click()
        assert nav.is_visible() and toggle.get_attribute("aria-expanded") == "true"
        page.click("nav >> text=API keys")
        page.wait_for_url(f"{base}/dashboard/keys")
        page.fill("#id_name", "phone key")
        page.click("text=Create key")
        expect(page.locator("table.keys-table a", has_text="phone key")).to_be_visible()  # fits: nothing to scroll
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1
        page.goto(f"{base}/dashboard/audit")  # six columns: wider than a phone
        wrap = page.locator(".table-wrap", has=page.locator("th", has_text="Change"))
        expect(wrap.locator(".scroll-hint")).to_be_visible()
        assert wrap.get_attribute("tabindex") == "0" and "scrolls sideways" in wrap.get_attribute("aria-label")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1  # the table scrolls, not the page
        page.set_viewport_size({"width": 1280, "height": 900})
        expect(nav).to_be_visible()
        expect(toggle).to_be_hidden()
        assert page.errors == []


def test_a_signup_error_is_tied_to_its_field_and_focused(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "taken@example.com", "Taken Co")
        log_out(page)
        page.goto(f"{base}/dashboard/signup")
        assert page.locator("#id_email").get_attribute("autocomplete") == "email"
        assert page.locator("#id_password").get_attribute("autocomplete") == "new-password"
        page.fill("#id_email", "Taken@Example.com")
        page.fill("#id_password", "short")
        page.fill("#id_organization", "Again")
        page.click("button[type=submit]")
        expect(page.locator("#id_email[aria-invalid=true]")).to_be_focused()  # the first field in error
        for field, says in (("email", "exists already"), ("password", "at least 10 characters")):
            widget = page.locator(f"#id_{field}")
            assert widget.get_attribute("aria-invalid") == "true"
            assert says in page.locator(f"#{widget.get_attribute('aria-describedby').split()[-1]}").inner_text()
        assert page.locator("#id_organization").get_attribute("aria-invalid") is None
        page.goto(f"{base}/accounts/login/")
        assert page.locator("#id_username").get_attribute("autocomplete") == "username"
        assert page.locator("#id_password").get_attribute("autocomplete") == "current-password"


# Every page a member or a visitor sees; "{voice}", "{lexicon}" and "{invitation}" are filled in.
MEMBER_PAGES = (
    "/dashboard/",
    "/dashboard/keys",
    "/dashboard/playground",
    "/dashboard/voices",
    "/dashboard/lexicons",
    "/dashboard/lexicons/{lexicon}",
    "/dashboard/usage",
    "/dashboard/usage?metric=requests&days=7",
    "/dashboard/history",
    "/dashboard/audit",
    "/dashboard/audit?action=key.",
    "/dashboard/webhooks",
    "/dashboard/webhooks?outcome=failed",
    "/dashboard/security",
    "/accounts/2fa/",
    "/dashboard/account",
    "/dashboard/organization",
    "/dashboard/signup",  # signed in: a new organization
    "/accounts/sessions/",
    "/accounts/password_change/",
    "/dashboard/members",
    "/dashboard/docs",
    "/dashboard/billing/",
    "/dashboard/nope",
)
VISITOR_PAGES = (
    "/accounts/login/",
    "/accounts/sso/",
    "/dashboard/invite/not-a-known-token",
    "/dashboard/signup",
    "/accounts/password_reset/",
    "/accounts/password_reset/done/",
    "/accounts/reset/MQ/set-password/",  # a reset link that is not valid (any more)
    "/dashboard/invite/{invitation}",
    "/dashboard/nope",
)


def serious_violations(page) -> list[str]:
    found = Axe().run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in found
        if v["impact"] in ("serious", "critical")
    ]


def make_things(email: str) -> dict[str, str]:
    """A key, a voice, a lexicon and an invitation in `email`'s organization (pages with rows), and
    `email` made staff (the operations page)."""
    owner = get_user_model().objects.get(username=email)
    owner.is_staff = True
    owner.save(update_fields=["is_staff"])
    org = owner.memberships.get().organization
    org.create_api_key("a key")
    create_voice(org, {"name": "Narrator", "seed": 42})
    create_voice(org, {"name": "Blend", "model": "kokoro", "mix": [{"voice": "af_heart", "weight": 1}]})
    lexicon = save_lexicon(Lexicon(organization=org), {"name": "Brands", "entries": [{"text": "SQL", "alias": "x"}]})
    invitation = actions.invite(org, "new@example.com", "member", invited_by=owner, accept_url=lambda token: token)
    key, _ = org.create_api_key("backend")
    for cached, status in ((False, "succeeded"), (True, "succeeded"), (False, "failed")):  # a chart and rows
        UsageEvent.objects.create(
            organization=org, api_key=key, characters=120, model="chattts", voice="alloy", cached=cached, status=status
        )
    reset = (
        f"/accounts/reset/{urlsafe_base64_encode(force_bytes(owner.pk))}/{default_token_generator.make_token(owner)}/"
    )
    return {"lexicon": lexicon.id, "invitation": invitation.token, "reset": reset}


def test_axe_finds_no_serious_violation_on_any_dashboard_page(live_stack):
    base = live_stack.base_url
    problems: dict[str, list[str]] = {}

    def check(page, label: str) -> None:
        if found := serious_violations(page):
            problems[label] = found

    with browser_page() as page:
        sign_up(page, base, "axe@example.com", "Axe Co")
        ids = off_loop(make_things, "axe@example.com")
        for width, height in ((1280, 900), (390, 844)):
            page.set_viewport_size({"width": width, "height": height})
            for path in (*MEMBER_PAGES, "/ops/"):
                page.goto(f"{base}{path.format(**ids)}")
                check(page, f"member {path} at {width}px")
        page.click("button.menu-toggle")
        check(page, "member /ops/ (phone width, menu open)")
        page.set_viewport_size({"width": 1280, "height": 900})
        page.goto(f"{base}/dashboard/keys")  # the new key's one-time panel, and a form with errors
        page.fill("#id_name", "shown once")
        page.click("text=Create key")
        page.locator("#new-key").wait_for()
        check(page, "member /dashboard/keys with a new key")
        page.fill("#id_name", "shown once")
        page.click("text=Create key")
        page.locator("#id_name[aria-invalid=true]").wait_for()
        check(page, "member /dashboard/keys with a form error")
        page.goto(f"{base}/dashboard/voices")  # the Kokoro mix form, with an error on a row
        page.check("#id_model_1")
        page.fill("#id_name", "Twice")
        page.select_option("#id_mix_voice_0", "af_heart")
        page.select_option("#id_mix_voice_1", "af_heart")
        page.click("text=Create voice")
        page.locator("#id_mix_voice_1[aria-invalid=true]").wait_for()
        check(page, "member /dashboard/voices with a mix error")
        page.goto(f"{base}/dashboard/playground?model=kokoro")  # the other model's voices and options
        page.locator("#pg-seed").wait_for(state="hidden")
        check(page, "member /dashboard/playground on Kokoro")
        page.goto(f"{base}/dashboard/playground")  # after playing: the player and the download
        page.fill("#pg-seed", "3")
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        check(page, "member /dashboard/playground after playing")
    with browser_page() as page:
        for path in VISITOR_PAGES:
            page.goto(f"{base}{path.format(**ids)}")
            check(page, f"visitor {path}")
        page.goto(f"{base}/accounts/login/")
        page.fill("#id_username", "axe@example.com")
        page.fill("#id_password", "wrong")
        page.click("button[type=submit]")
        page.locator("[role=alert]").wait_for()
        check(page, "visitor /accounts/login/ after a failure")
        page.goto(f"{base}/dashboard/signup")
        page.click("button[type=submit]")
        page.locator("[aria-invalid=true]").first.wait_for()
        check(page, "visitor /dashboard/signup with errors")
        page.goto(f"{base}{ids['reset']}")  # a valid reset link: the form with the password rules
        page.wait_for_url(re.compile(r".*/set-password/$"))
        rules = page.locator("#id_new_password1_helptext")
        assert "at least 10 characters" in rules.inner_text()  # what aria-describedby reads out
        assert "id_new_password1_helptext" in page.locator("#id_new_password1").get_attribute("aria-describedby")
        check(page, "visitor the password reset form")
    assert problems == {}


def test_an_ended_session_is_said_and_what_was_typed_stays(live_stack):
    """Before: Play said "Failed to construct 'WebSocket': The URL 'ws://…undefined' is invalid" and a
    voice preview "Playing… (not billed)" over the sign-in page it had fetched."""
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "ended@example.com", "Ended Co")
        page.goto(f"{base}/dashboard/playground")
        page.fill("#pg-text", "Words worth keeping.")
        page.context.clear_cookies(name="sessionid")  # the session ends (expired, or signed out elsewhere)
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.error", timeout=30_000)
        assert page.evaluate("window.ttsPlayground.error") == "session"
        assert "Your session ended: sign in again" in page.locator("#pg-status").inner_text()
        assert page.input_value("#pg-text") == "Words worth keeping."
        # Signed in again elsewhere in the same browser (another tab), as the message says: the new
        # session comes with a new CSRF token, which the kept page reads when Play is clicked.
        http = page.context.request
        form = http.get(f"{base}/accounts/login/").text()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
        signed = http.post(
            f"{base}/accounts/login/",
            form={"csrfmiddlewaretoken": token, "username": "ended@example.com", "password": PASSWORD},
            headers={"Referer": f"{base}/accounts/login/"},
        )
        assert signed.ok and signed.url.endswith("/dashboard/")
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error === 'ticket'", timeout=60_000)
        assert page.evaluate("window.ttsPlayground.error") is None
        page.goto(f"{base}/dashboard/voices")
        page.context.clear_cookies(name="sessionid")
        page.locator("button.preview").first.click()
        page.wait_for_function("window.ttsPreview.error", timeout=30_000)
        assert page.evaluate("window.ttsPreview.error") == "session"
        note = page.locator(".preview-status").first.inner_text()
        assert "Your session ended" in note and "Playing" not in note
