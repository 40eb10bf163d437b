"""The dashboard in a real browser (Debian's Chromium through Playwright): sign up → create a key →
call the API with it → the overview shows the usage → the playground plays streamed audio →
revoke the key → the API refuses it; a voice made from a seed (previewed, in the playground's
picker) and a lexicon made on their pages."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.browser import browser_page, sign_up

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_new_team_signs_up_uses_a_key_plays_audio_and_revokes_the_key(live_stack):
    base = live_stack.base_url
    text = "Browser test, 3 words."
    with browser_page() as page:
        sign_up(page, base, "grace@example.com", "Compilers Inc")
        assert page.locator("h1").inner_text() == "Compilers Inc"

        page.click("text=API keys")
        page.fill("#id_name", "browser test")
        page.click("text=Create key")
        secret = page.locator("#new-key").inner_text().strip()
        assert re.fullmatch(r"tts_[A-Za-z0-9]{12}_[A-Za-z0-9]{32}", secret)

        api = httpx.post(
            f"{base}/v1/audio/speech",
            headers={"Authorization": f"Bearer {secret}"},
            json={"input": text, "seed": 5, "response_format": "pcm"},
            timeout=60,
        )
        assert api.status_code == 200 and len(api.content) > 0

        page.click("text=Overview")
        assert page.locator("#stat-requests").inner_text() == "1"
        assert page.locator("#quota-used").inner_text() == str(len(text))

        page.click("text=Playground")
        assert not page.locator("#pg-download").is_visible()  # until there is audio to download
        page.fill("#pg-text", "Playground speaks now.")
        page.fill("#pg-seed", "9")
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        state = page.evaluate("window.ttsPlayground")
        assert state["error"] is None
        assert state["started"] is True and state["bytes"] > 0 and state["bytes"] % 2 == 0
        assert page.locator("#pg-download").is_visible()
        assert "Done:" in page.locator("#pg-status").inner_text()
        replay = page.locator("#pg-audio")  # replay and seeking of what was generated, not generated again
        assert replay.is_visible() and replay.get_attribute("src").startswith("blob:")
        count = page.locator("#pg-count").inner_text()
        assert count.startswith("22 / 1,000 characters") and "left this month" in count
        page.fill("#pg-text", "x" * 1001)  # too long: the counter says so and Play waits (no silent cut)
        assert "error" in page.locator("#pg-count").get_attribute("class") and page.locator("#pg-play").is_disabled()
        long = " ".join(f"Sentence number {i} of a text that is long enough to stop halfway." for i in range(12))
        page.fill("#pg-text", long)
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.started || window.ttsPlayground.error", timeout=60_000)
        page.click("#pg-stop")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        assert page.locator("#pg-status").inner_text() == "Stopped: only what was generated is billed."

        page.click("text=API keys")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("table >> a")  # the key's page
        page.click("button:has-text('Revoke')")
        assert "revoked" in page.locator(".messages").inner_text()
        assert page.errors == []

    refused = httpx.post(
        f"{base}/v1/audio/speech",
        headers={"Authorization": f"Bearer {secret}"},
        json={"input": text, "seed": 5},
        timeout=30,
    )
    assert refused.status_code == 401


def test_an_owner_makes_a_voice_and_a_lexicon(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "lin@example.com", "Voice Works")
        page.click("header >> text=Voices")
        assert page.locator("#voice-usage").inner_text() == "0 of 3 voices of your own used"
        page.locator("#id_speaker").wait_for(state="hidden")  # until "From a speaker embedding string" is chosen
        page.fill("#id_name", "Narrator")
        page.fill("#id_description", "Calm and slow.")
        page.fill("#id_seed", "42")
        page.click("text=Create voice")
        assert "Voice Narrator created" in page.locator(".messages").inner_text()
        assert page.locator("#voice-usage").inner_text() == "1 of 3 voices of your own used"
        row = page.locator("#own-voices tbody tr[data-voice^='voice_']")  # the one voice of its own
        voice_id = row.get_attribute("data-voice")
        assert row.locator("td").all_inner_texts()[:5] == ["Narrator", voice_id, "ChatTTS", "Calm and slow.", "seed 42"]
        assert "not billed" in row.inner_text()

        row.locator("button.preview").click()
        page.wait_for_function("window.ttsPreview.ended || window.ttsPreview.error", timeout=60_000)
        state = page.evaluate("window.ttsPreview")
        assert state["error"] is None and state["bytes"] > 0 and state["voice"] == voice_id
        assert row.locator(".preview-status").inner_text() == "Playing… (not billed)"

        row.locator("text=Use in playground").click()
        picker = page.locator("#pg-voice")
        assert picker.input_value() == voice_id
        assert picker.evaluate("select => select.selectedOptions[0].textContent") == "Narrator"
        assert picker.locator("optgroup[label='Your voices'] option").all_text_contents() == ["Narrator"]

        page.click("header >> text=Lexicons")
        page.fill("#id_name", "Brands")
        page.check("#id_is_default")
        page.fill("#id_entries", "SQL = sequel\nnginx = engine x (case)")
        page.click("text=Create lexicon")
        assert "Lexicon Brands created with 2 entries" in page.locator(".messages").inner_text()
        cells = page.locator("#lexicons tbody tr", has_text="Brands").locator("td").all_inner_texts()
        assert cells[0] == "Brands" and cells[2:4] == ["2", "yes"]
        assert page.locator("#entry-usage").inner_text() == "2 of 100 entries used"
        page.click("#lexicons >> text=Brands")
        page.wait_for_url(re.compile(r".*/dashboard/lexicons/lex_[0-9a-f]{16}$"))
        assert page.locator("#id_entries").input_value() == "SQL = sequel\nnginx = engine x (case)"
        assert page.errors == []


def test_pages_fit_a_phone_width(live_stack):
    with browser_page(width=390, height=844) as page:
        sign_up(page, live_stack.base_url, "phone@example.com", "Pocket Co")
        for path in (
            "/dashboard/",
            "/dashboard/keys",
            "/dashboard/playground",
            "/dashboard/voices",
            "/dashboard/lexicons",
            "/dashboard/jobs",
            "/dashboard/usage",
            "/dashboard/docs",
        ):
            page.goto(f"{live_stack.base_url}{path}")
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{path} scrolls sideways by {overflow}px"
        assert page.errors == []
