"""Voice aliases on the Settings page, in Chromium against the live stack: an owner gives OpenAI's
"nova" a Kokoro voice and "alloy" ChatTTS's "echo"; they are stored as the API stores them, shown
chosen when the page comes back, and a request through the API that names "nova" speaks Kokoro's
voice; set back to "as built in", the alias is gone. Axe on the page."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import expect

from accounts.models import Organization
from billing.models import UsageEvent
from tests.browser import browser_page, off_loop, sign_up
from tests.test_dashboard_ux_browser import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)


def aliases_of(name: str) -> dict:
    return Organization.objects.get(name=name).voice_aliases


def last_spoken(name: str) -> tuple[str, str]:
    event = UsageEvent.objects.filter(organization__name=name).order_by("-id").first()
    return event.model, event.voice


def test_voice_aliases_are_set_in_settings_and_speak_through_the_api(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "alias@example.com", "Alias Co")
        page.goto(f"{base}/dashboard/keys")
        page.fill("#id_name", "app")
        page.click("text=Create key")
        raw = page.locator("#new-key").inner_text()

        page.click("header >> text=Settings")
        card = page.locator("#voice-aliases")
        expect(card).to_contain_text("Some clients send only OpenAI's voice names")
        page.select_option("#id_nova", "kokoro:af_bella")
        page.select_option("#id_alloy", "chattts:echo")
        card.locator("text=Save aliases").click()
        expect(page.locator("main")).to_contain_text("Voice aliases saved: 2 of OpenAI's names speak your choices.")
        assert off_loop(aliases_of, "Alias Co") == {
            "alloy": {"model": "chattts", "voice": "echo"},
            "nova": {"model": "kokoro", "voice": "af_bella"},
        }
        expect(page.locator("#id_nova")).to_have_value("kokoro:af_bella")  # shown chosen when the page comes back
        assert serious_violations(page) == []

        with httpx.Client(base_url=f"{base}/v1", headers={"Authorization": f"Bearer {raw}"}) as api:
            listed = {v["voice_id"]: v for v in api.get("/voices").json()["data"]}
            assert listed["nova"]["alias"] == {"model": "kokoro", "voice": "af_bella", "name": "af_bella"}
            spoken = api.post("/audio/speech", json={"input": "Aliased.", "voice": "nova", "response_format": "pcm"})
            assert spoken.status_code == 200 and len(spoken.content) > 0
        assert off_loop(last_spoken, "Alias Co") == ("kokoro", "af_bella")

        page.select_option("#id_nova", "")
        card.locator("text=Save aliases").click()
        expect(page.locator("main")).to_contain_text("Voice aliases saved: 1 of OpenAI's names speak your choices.")
        assert off_loop(aliases_of, "Alias Co") == {"alloy": {"model": "chattts", "voice": "echo"}}
        assert page.errors == []
