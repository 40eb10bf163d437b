"""What teams looked for in the console and now find, in Chromium against the live stack: a voice
made from a recording on the Voices page (upload, transcript, plain errors, its status followed
while a worker encodes it, then heard); lexicons picked in the playground (defaults checked, one
tried from its page), the same text played without them, what is spoken checked in the job."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from synthesis.models import Job
from tests.browser import browser_page, off_loop, sign_up
from tests.test_custom_voices import lying_wav, recording

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_voice_is_made_from_a_recording_and_its_status_is_followed(live_stack, tmp_path):
    base = live_stack.base_url
    short, good, big = tmp_path / "short.wav", tmp_path / "me.wav", tmp_path / "big.wav"
    lying = tmp_path / "lying.wav"
    lying.write_bytes(lying_wav())
    short.write_bytes(recording(0.5))
    big.write_bytes(recording(14, rate=96_000))  # 2.7 MB: over the request body limit
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

        page.set_input_files("#id_audio", str(lying))  # a header FFmpeg has no decoder for: was a 500
        page.click("button:has-text('Create voice')")
        expect(page.locator("#id_audio_error")).to_have_text(
            "The file is not audio FFmpeg can read (wav, mp3, flac, ogg, m4a, webm)."
        )

        sent = []
        page.on("request", lambda request: sent.append(request.url) if request.method == "POST" else None)
        page.set_input_files("#id_audio", str(big))
        page.click("button:has-text('Create voice')")
        expect(page.locator("#id_audio_error")).to_contain_text("The file is 2.7 MB; at most 2.0 MB are accepted")
        assert sent == []  # said in the page, not refused by the server unread

        page.set_input_files("#id_audio", str(good))
        page.click("button:has-text('Create voice')")
        expect(page.locator("#id_consent_error")).to_contain_text("Tick the statement")  # no copy without consent
        page.set_input_files("#id_audio", str(good))
        page.check("#id_consent")
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


def make_lexicon(page, base: str, name: str, entries: str, default: bool) -> str:
    page.goto(f"{base}/dashboard/lexicons")
    page.fill("#id_name", name)
    page.fill("#id_entries", entries)
    if default:
        page.check("#id_is_default")
    page.click("button:has-text('Create lexicon')")
    return page.locator("#lexicons tr", has_text=name).get_attribute("data-lexicon")


def spoken(org_name: str) -> str:
    """What the organization's last request said, lexicons applied (its job's segments)."""

    def last() -> str:
        return " ".join(Job.objects.filter(organization__name=org_name).order_by("-created_at").first().segments)

    return off_loop(last)


def test_lexicons_are_picked_in_the_playground_and_heard_with_and_without(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "lexi@example.com", "Lexi Co")
        page.goto(f"{base}/dashboard/playground")
        expect(page.locator("#pg-no-lexicons")).to_contain_text("No pronunciation lexicons yet")
        brand = make_lexicon(page, base, "Brand", "Acme = Ack me", default=True)
        names = make_lexicon(page, base, "Names", "Ada = Ay dah", default=False)

        page.goto(f"{base}/dashboard/lexicons/{names}")
        page.click("#try-lexicon")  # the lexicon's page links to the playground with it checked
        expect(page.locator(f"input[data-lexicon={names}]")).to_be_checked()
        expect(page.locator(f"input[data-lexicon={brand}]")).to_be_checked()  # a default: checked to start with
        page.fill("#pg-text", "Ada works at Acme.")
        page.fill("#pg-seed", "5")
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=120_000)
        assert page.evaluate("window.ttsPlayground.error") is None
        assert page.evaluate("window.ttsPlayground.request.lexicons") == [names]
        assert spoken("Lexi Co") == "Ay dah works at Ack me."

        page.click("#pg-without")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=120_000)
        expect(page.locator("#pg-status")).to_contain_text("Done (without lexicons)")
        assert spoken("Lexi Co") == "Ada works at Acme."

        page.uncheck(f"input[data-lexicon={brand}]")  # a default left out: only the checked ones apply
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=120_000)
        assert page.evaluate("window.ttsPlayground.request.default_lexicons") is False
        assert spoken("Lexi Co") == "Ay dah works at Acme."
        page.evaluate("window.ttsCopy = (button, text) => { window.copied = text; }")
        page.click("#pg-code")  # the code copied says the same
        copied = page.evaluate("window.copied")
        assert f'"lexicons":["{names}"],"default_lexicons":false' in copied
        assert page.errors == []
