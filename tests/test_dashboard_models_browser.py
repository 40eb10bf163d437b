"""Two models in a real browser (Debian's Chromium through Playwright): the playground's model picker
switches the voices and the options offered (and what is sent and copied follows it), the voices
page's form makes a Kokoro mix from rows of a voice and a weight; and the playground speaks on
Kokoro (the live stack's Kokoro worker, tiny random checkpoint) and the voices page previews
Kokoro's voices, built-in and mixed."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from accounts.models import Organization
from tests.browser import browser_page, off_loop, sign_up
from voices.actions import create_voice

pytestmark = pytest.mark.django_db(transaction=True)


def make_voices(organization: str) -> dict[str, str]:
    """A ChatTTS voice and a Kokoro mix of the organization, by name."""
    org = Organization.objects.get(name=organization)
    seeded = create_voice(org, {"name": "Narrator", "model": "chattts", "seed": 42})
    mix = create_voice(
        org,
        {
            "name": "Blend",
            "model": "kokoro",
            "mix": [{"voice": "af_heart", "weight": 1}, {"voice": "bm_george", "weight": 1}],
        },
    )
    return {"Narrator": seeded.id, "Blend": mix.id}


def options(page, selector: str) -> list[str]:
    return page.locator(f"{selector} option").evaluate_all("options => options.map(o => o.value)")


def test_the_playground_model_picker_switches_the_voices_and_the_options(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "picker@example.com", "Picker Co")
        voices = off_loop(make_voices, "Picker Co")
        page.context.grant_permissions(["clipboard-read", "clipboard-write"])
        page.goto(f"{base}/dashboard/playground")
        model = page.locator("#pg-model")
        assert model.input_value() == "chattts"
        assert model.locator("option").all_text_contents() == [
            "ChatTTS — non-commercial weights (CC BY-NC 4.0)",
            "Kokoro-82M — Apache-2.0, may be sold",
        ]
        on_chattts = options(page, "#pg-voice")
        assert "alloy" in on_chattts and voices["Narrator"] in on_chattts
        assert "af_heart" not in on_chattts and voices["Blend"] not in on_chattts
        expect(page.locator("#pg-seed")).to_be_visible()
        expect(page.locator("#pg-options")).to_be_visible()
        page.fill("#pg-seed", "7")
        page.fill("#pg-text", "Twenty characters!!")

        model.select_option("kokoro")
        on_kokoro = options(page, "#pg-voice")
        assert {"alloy", "af_heart", "bm_george", "zf_xiaobei", voices["Blend"]} <= set(on_kokoro)
        assert voices["Narrator"] not in on_kokoro
        assert page.locator("#pg-voice").input_value() == "alloy"  # OpenAI's name is on both: kept
        assert page.locator("#pg-voice optgroup[label='Your voices'] option").all_text_contents() == ["Blend"]
        expect(page.locator("#pg-seed")).to_be_hidden()  # Kokoro is deterministic
        expect(page.locator("#pg-options")).to_be_hidden()  # and takes none of ChatTTS's options
        assert "each character billed as 0.5" in page.locator("#pg-model-hint").inner_text()
        assert page.locator("#pg-count").inner_text().startswith("19 / 1,000 characters · 10 billed · ")
        page.select_option("#pg-voice", voices["Blend"])
        page.click("#pg-code")
        curl = page.evaluate("navigator.clipboard.readText()")
        sent = json.loads(curl.split(" -d '", 1)[1].split("' -o ", 1)[0])
        assert sent == {
            "input": "Twenty characters!!",
            "model": "kokoro",
            "voice": voices["Blend"],
            "speed": 1,
            "response_format": "wav",
        }  # no seed: the model picked does not take it
        page.click("#pg-python")
        python = page.evaluate("navigator.clipboard.readText()")
        assert f'model="kokoro", voice="{voices["Blend"]}"' in python and "extra_body" not in python

        model.select_option("chattts")
        assert "af_heart" not in options(page, "#pg-voice")
        expect(page.locator("#pg-seed")).to_be_visible()
        page.click("summary:has-text('More options')")
        page.fill("#pg-temperature", "0.5")
        page.click("#pg-python")
        python = page.evaluate("navigator.clipboard.readText()")
        assert 'model="chattts", voice="alloy"' in python and 'extra_body={"seed":7,"temperature":0.5}' in python
        page.click("#pg-play")  # the WebSocket message carries the model and its options
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
        state = page.evaluate("window.ttsPlayground")
        assert state["error"] is None and state["bytes"] > 0
        page.goto(f"{base}/dashboard/history")
        assert page.locator("#history tbody tr").first.locator("td.model").inner_text() == "ChatTTS"
        assert page.errors == []


def test_an_owner_mixes_a_kokoro_voice_on_the_voices_page(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "mixer@example.com", "Mixer Co")
        page.click("header >> text=Voices")
        form = page.locator("#voice-form")
        assert page.locator("#id_model_0").is_checked()  # the default model
        expect(form.locator("fieldset#mix")).to_be_hidden()
        page.fill("#id_seed", "5")  # typed, then another model picked: not sent
        page.check("text=Kokoro-82M — Apache-2.0, may be sold")
        expect(form.locator("fieldset#mix")).to_be_visible()
        expect(page.locator("#id_seed")).to_be_hidden()
        page.fill("#id_name", "Blend")
        page.select_option("#id_mix_voice_0", "af_heart")
        page.fill("#id_mix_weight_0", "3")
        page.select_option("#id_mix_voice_1", "af_heart")  # twice: refused, on that row
        page.click("text=Create voice")
        twice = page.locator("#id_mix_voice_1[aria-invalid=true]")
        expect(twice).to_be_focused()
        error = page.locator(f"#{twice.get_attribute('aria-describedby').split()[-1]}")
        assert error.inner_text() == "'af_heart' is in the mix twice."
        expect(form.locator("fieldset#mix")).to_be_visible()  # the model picked is still Kokoro
        page.select_option("#id_mix_voice_1", "bm_george")
        page.fill("#id_mix_weight_1", "1")
        page.click("text=Create voice")
        assert "Voice Blend created" in page.locator(".messages").inner_text()
        row = page.locator("#own-voices tbody tr[data-voice^='voice_']")
        voice_id = row.get_attribute("data-voice")
        assert row.get_attribute("data-model") == "kokoro"
        assert row.locator("td").all_inner_texts()[:5] == [
            "Blend",
            voice_id,
            "Kokoro-82M",
            "",
            "mix: af_heart 75%, bm_george 25%",
        ]
        row.locator("text=Use in playground").click()
        assert page.locator("#pg-model").input_value() == "kokoro"
        assert page.locator("#pg-voice").input_value() == voice_id
        assert page.errors == []


def test_kokoro_speaks_in_the_playground_and_its_voices_are_previewed(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "kokoro@example.com", "Kokoro Co")
        voices = off_loop(make_voices, "Kokoro Co")
        page.goto(f"{base}/dashboard/playground?model=kokoro&voice=af_heart")
        assert page.locator("#pg-voice").input_value() == "af_heart"
        page.fill("#pg-text", "Kokoro speaks. A second sentence.")
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=90_000)
        state = page.evaluate("window.ttsPlayground")
        assert state["error"] is None and state["bytes"] > 0 and state["bytes"] % 2 == 0
        assert "Done:" in page.locator("#pg-status").inner_text()
        page.select_option("#pg-voice", voices["Blend"])
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=90_000)
        assert page.evaluate("window.ttsPlayground.error") is None
        page.goto(f"{base}/dashboard/history?model=kokoro")
        assert page.locator("#history tbody td.model").all_inner_texts() == ["Kokoro-82M", "Kokoro-82M"]

        page.goto(f"{base}/dashboard/voices")
        for row in (
            page.locator("#voices-kokoro tbody tr[data-voice='af_heart']"),
            page.locator(f"#own-voices tbody tr[data-voice='{voices['Blend']}']"),
        ):
            row.locator("button.preview").click()
            page.wait_for_function("window.ttsPreview.ended || window.ttsPreview.error", timeout=90_000)
            preview = page.evaluate("window.ttsPreview")
            assert preview["error"] is None and preview["bytes"] > 0 and preview["model"] == "kokoro"
        assert page.errors == []
