"""What teams looked for in the console and now find, in Chromium against the live stack: a voice
made from a recording on the Voices page (upload, transcript, plain errors, its status followed
while a worker encodes it, then heard)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import browser_page, sign_up
from tests.test_custom_voices import recording

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_voice_is_made_from_a_recording_and_its_status_is_followed(live_stack, tmp_path):
    base = live_stack.base_url
    short, good = tmp_path / "short.wav", tmp_path / "me.wav"
    short.write_bytes(recording(0.5))
    good.write_bytes(recording(1.5))
    with browser_page() as page:
        sign_up(page, base, "recorder@example.com", "Recorder Co")
        page.goto(f"{base}/dashboard/voices")
        page.check("input[name=model][value=chattts]")
        page.check("input[name=source][value=recording]")
        expect(page.locator("#id_seed")).to_be_hidden()
        page.fill("#id_name", "Narrator")
        page.fill("#id_transcript", "A short reference sentence.")
        page.click("button:has-text('Create voice')")
        expect(page.locator("#id_audio_error")).to_have_text("Choose a recording to upload.")
        expect(page.locator("#id_audio")).to_be_visible()  # the recording's fields stay shown

        page.set_input_files("#id_audio", str(short))
        page.click("button:has-text('Create voice')")
        expect(page.locator("#id_audio_error")).to_have_text("The recording is 0.5 s long; use 1 to 15 s.")

        page.set_input_files("#id_audio", str(good))
        page.click("button:has-text('Create voice')")
        expect(page.locator(".messages")).to_contain_text("Voice Narrator is being made from the recording")
        page.evaluate("window.notReloaded = true")
        row = page.locator("#own-voices tr", has_text="Narrator")
        expect(row).to_have_attribute("data-status", "ready", timeout=60_000)
        assert page.evaluate("window.notReloaded") is True  # followed in place, the form kept
        expect(row.locator("td.made-from")).to_have_text("recording")
        row.locator("button.preview").click()
        page.wait_for_function("window.ttsPreview.ended || window.ttsPreview.error", timeout=60_000)
        assert page.evaluate("window.ttsPreview.error") is None and page.evaluate("window.ttsPreview.bytes") > 0

        # Kokoro makes no voices from recordings: it is not offered there.
        page.check("input[name=model][value=kokoro]")
        expect(page.locator("input[name=source][value=recording]")).to_be_hidden()
        assert page.errors == []
