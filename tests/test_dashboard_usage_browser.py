"""Usage and History in a real browser (Debian's Chromium through Playwright) against the live
stack: real API calls with a key, a repeated seeded request served from the cache; the usage page
shows the key's row and a bar's tooltip on hover and from the keyboard; History has every request,
the cache hit as its own row, and plays the seeded request's audio; both fit a phone's width."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser import browser_page, sign_up

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Usage page test."


def test_usage_and_history_show_each_request_and_play_kept_audio(live_stack):
    base = live_stack.base_url
    with browser_page() as page:
        sign_up(page, base, "uma@example.com", "Speech Co")
        nav = page.locator("nav[aria-label=Dashboard]")
        nav.get_by_role("link", name="API keys").click()
        page.wait_for_url(f"{base}/dashboard/keys")
        page.fill("#id_name", "usage test")
        page.click("text=Create key")
        secret = page.locator("#new-key").inner_text().strip()
        prefix = secret.split("_")[1]

        def speak(request_id: str, **body) -> httpx.Response:
            response = httpx.post(
                f"{base}/v1/audio/speech",
                headers={"Authorization": f"Bearer {secret}", "X-Request-ID": request_id},
                json={"input": TEXT, "response_format": "mp3", **body},
                timeout=60,
            )
            assert response.status_code == 200 and response.content, response.text
            return response

        speak("req-seeded", seed=11)
        assert speak("req-again", seed=11).headers.get("x-cache") == "hit"  # the same seeded request
        speak("req-unseeded")

        # Each click loads a new page: wait for it (and let expect() retry) before reading what it shows.
        nav.get_by_role("link", name="Usage", exact=True).click()
        page.wait_for_url(f"{base}/dashboard/usage")
        key_row = page.locator(f"#usage-keys tr[data-key='{prefix}']")
        expect(key_row.locator("th, td")).to_have_count(7)
        cells = key_row.locator("th, td").all_inner_texts()
        assert cells[0] == "usage test" and cells[2:4] == ["3", str(3 * len(TEXT))] and cells[5] == "1"
        today = datetime.now(UTC).date()
        bars = page.locator("#usage-chart .bar")
        expect(bars).to_have_count(30)
        tip = page.locator("#usage-chart-tip")
        expect(tip).to_be_hidden()
        bars.last.hover()
        expect(tip).to_be_visible()
        expect(tip).to_have_text(f"{today:%a}, {today:%b} {today.day}, {today.year}: {3 * len(TEXT)} characters")
        bars.last.focus()  # the one bar in the tab order; the arrow keys move to the day before
        page.keyboard.press("ArrowLeft")
        day = today - timedelta(days=1)
        expect(tip).to_have_text(f"{day:%a}, {day:%b} {day.day}, {day.year}: 0 characters")
        assert bars.nth(28).evaluate("bar => bar === document.activeElement && bar.tabIndex === 0")

        nav.get_by_role("link", name="History", exact=True).click()
        page.wait_for_url(f"{base}/dashboard/history")
        rows = page.locator("#history tbody tr")
        expect(rows).to_have_count(3)
        ids = [rows.nth(i).get_attribute("data-request") for i in range(3)]
        assert ids == ["req-unseeded", "req-again", "req-seeded"]  # newest first; the cache hit its own row
        hit = page.locator("#history tr[data-request='req-again']")
        assert hit.locator("td.cached").inner_text() == "yes"
        hit_src = hit.locator("audio").get_attribute("src")  # the cached audio it replayed
        assert re.fullmatch(r"/dashboard/history/\d+/audio", hit_src)
        replayed = page.request.get(f"{base}{hit_src}")
        assert replayed.status == 200 and replayed.headers["content-type"] == "audio/wav"
        assert (
            "streamed to the caller" in page.locator("#history tr[data-request='req-unseeded'] td.audio").inner_text()
        )

        player = page.locator("#history tr[data-request='req-seeded'] audio")
        src = player.get_attribute("src")
        assert re.fullmatch(r"/dashboard/jobs/[0-9a-f-]{36}/audio", src)
        fetched = page.request.get(f"{base}{src}")
        assert fetched.status == 200 and fetched.headers["content-type"] == "audio/mpeg" and len(fetched.body()) > 0
        duration = player.evaluate(
            """audio => new Promise((done) => {
                audio.addEventListener("loadedmetadata", () => done(audio.duration), { once: true });
                audio.addEventListener("error", () => done(-1), { once: true });
                audio.load();
            })"""
        )
        assert duration > 0  # the browser decodes it

        page.set_viewport_size({"width": 390, "height": 844})
        for path in ("/dashboard/usage", "/dashboard/history"):
            page.goto(f"{base}{path}")
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{path} scrolls sideways by {overflow}px"
        assert page.errors == []
