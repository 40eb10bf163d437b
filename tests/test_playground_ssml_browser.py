"""The playground's SSML toggle in a real browser (Debian's Chromium through Playwright): turned on
with an empty box it starts a document, its snippets go in at the caret, Kokoro speaks it with its
mark listed and only the spoken characters billed; a broken document's error is said under the box
as "Line L, column C" of the text as typed (a fragment, leading blank lines and characters beyond
UTF-16's one unit included) with the caret put there; off, a text that starts with <speak is sent as plain text."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from tests.browser import browser_page, sign_up

pytestmark = pytest.mark.django_db(transaction=True)


def play(page) -> dict:
    page.click("#pg-play")
    page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=60_000)
    return page.evaluate("window.ttsPlayground")


def serious_violations(page) -> list[str]:
    found = Axe().run(page).response["violations"]
    return [f"{v['id']}: {v['help']}" for v in found if v["impact"] in ("serious", "critical")]


def caret(page) -> list:
    """Who has the focus, the text box's selection, and the character at its start."""
    return page.evaluate(
        "(box => [document.activeElement.id, box.selectionStart, box.selectionEnd,"
        " box.value.charAt(box.selectionStart)])(document.getElementById('pg-text'))"
    )


def test_ssml_is_spoken_with_snippets_and_its_errors_point_at_their_place(live_stack):
    base = live_stack.base_url
    with browser_page(width=390, height=844) as page:
        sign_up(page, base, "ssml@example.com", "Markup Co")
        page.goto(f"{base}/dashboard/playground?model=kokoro")
        expect(page.locator("#pg-snippets")).to_be_hidden()
        page.fill("#pg-text", "")
        page.check("#pg-ssml")
        expect(page.locator("#pg-snippets")).to_be_visible()
        assert page.locator("#pg-text").input_value() == "<speak>\n\n</speak>"
        assert caret(page) == ["pg-text", 8, 8, "\n"]  # inside <speak>, on the empty line

        page.keyboard.type("Hello there.")
        snippets = page.get_by_role("group", name="Insert at the caret:")
        snippets.get_by_role("button", name="Pause").click()
        page.keyboard.type(' Goodbye.<mark name="end"/>')
        document = '<speak>\nHello there.<break time="500ms"/> Goodbye.<mark name="end"/>\n</speak>'
        assert page.locator("#pg-text").input_value() == document
        count = page.locator("#pg-count").inner_text()
        # Kokoro's characters weigh 0.5 on the plan: 21 spoken, 11 billed, the markup not at all.
        assert count.startswith(f"{len(document)} / 1,000 characters with the markup · about 21 spoken, 11 billed")

        snippets.get_by_role("button", name="Spell out").click()  # at the caret, its example selected to type over
        spelled = '<mark name="end"/><say-as interpret-as="characters">ABC</say-as>'
        assert page.locator("#pg-text").input_value() == document.replace('<mark name="end"/>', spelled)
        at = document.index("\n</speak>") + len('<say-as interpret-as="characters">')
        assert caret(page) == ["pg-text", at, at + 3, "A"]
        page.keyboard.press("Control+z")  # typed in as the person would: undone as such
        assert page.locator("#pg-text").input_value() == document

        state = play(page)
        assert state["error"] is None and state["bytes"] > 0
        assert state["request"]["input_format"] == "ssml"
        status = page.locator("#pg-status").inner_text()
        assert "11 billed: the characters spoken, not the markup (this model counts each" in status, status
        marks = page.locator("#pg-mark-list li")
        expect(marks).to_have_count(1)
        assert re.fullmatch(r"end at \d+\.\d\d s", marks.inner_text())
        assert page.locator("#pg-text").get_attribute("aria-invalid") == "false"
        assert serious_violations(page) == []  # the toggle, the snippets and the marks at 390 px

        # A broken document: said under the box at its line and column, the caret put there.
        for text, line, column, offset in (
            ('<speak>Hi <break time="soon"/></speak>', 1, 11, 10),
            ('Hi <break time="soon"/>', 1, 4, 3),  # a fragment: placed as sent, though read inside <speak>
            ('\n\n  <speak>\n  é😀 <break time="x"/>\n</speak>', 4, 6, 18),  # leading blank lines; UTF-16 in the box
        ):
            page.fill("#pg-text", text)
            state = play(page)
            assert state["error"] == "invalid_ssml"
            said = page.locator("#pg-ssml-error")
            expect(said).to_be_visible()
            assert said.inner_text().startswith(f"Line {line}, column {column}: break time ")
            assert caret(page) == ["pg-text", offset, offset, "<"], text
            assert page.locator("#pg-text").get_attribute("aria-invalid") == "true"
            assert "pg-ssml-error" in page.locator("#pg-text").get_attribute("aria-describedby")
            assert page.locator("#pg-status").inner_text() == "Error: the SSML is not valid: see under the text."
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 1  # fits 390 px
        assert serious_violations(page) == []  # with the error said under the box

        # Off: the toggle wins over the guess, the error goes, the snippets hide.
        page.uncheck("#pg-ssml")
        expect(page.locator("#pg-ssml-error")).to_be_hidden()
        expect(page.locator("#pg-snippets")).to_be_hidden()
        page.fill("#pg-text", "<speak>x</speak>")
        state = play(page)
        assert state["error"] is None and state["request"]["input_format"] == "text"
        assert "16 characters typed, 8 billed" in page.locator("#pg-status").inner_text()
        expect(page.locator("#pg-marks")).to_be_hidden()
        assert page.errors == []
