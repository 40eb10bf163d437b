"""The docs page in a real browser (Debian's Chromium through Playwright): the WebSocket protocol
reads as headings and tables, Copy puts an example on the clipboard exactly, the copied examples run
as they are against the server once TTS_API_KEY is exported, the API reference renders without a
single request leaving the server, and its back link returns to the docs page; on a phone the page
does not scroll sideways."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.browser import browser_page, sign_up

pytestmark = pytest.mark.django_db(transaction=True)


def copy(page, snippet: str) -> str:
    """Clicks the snippet's Copy button; what the clipboard then holds."""
    button = page.locator(f"button[data-copy={snippet}]")
    button.click()
    page.wait_for_function(f"document.querySelector('button[data-copy={snippet}]').textContent === 'Copied'")
    return page.evaluate("navigator.clipboard.readText()")


def run(command: list[str], cwd, key: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TTS_API_KEY": key}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_docs_page_copies_runnable_examples_and_the_reference_stays_on_the_server(live_stack, tmp_path):
    base = live_stack.base_url
    with browser_page() as page:
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
        sign_up(page, base, "ida@example.com", "Reference Readers")
        page.click("header >> text=API keys")
        page.fill("#id_name", "docs test")
        page.click("text=Create key")
        key = page.locator("#new-key").inner_text().strip()

        page.click("header >> text=Docs")
        protocol = page.locator("#websocket")
        assert protocol.locator("h2").inner_text() == "WebSocket streaming protocol — tts.v1 and tts.v2"
        assert "Close codes" in protocol.locator("h3").all_inner_texts()
        assert protocol.locator("table").count() == 3
        assert protocol.locator("table >> text=4008").is_visible()
        assert "```" not in protocol.inner_text() and "## " not in protocol.inner_text()
        protocol.locator("nav >> text=Close codes").click()  # the contents lead to the section
        assert page.url.endswith("#ws-close-codes")

        curl = copy(page, "snippet-curl")
        assert curl == page.locator("#snippet-curl").inner_text()
        assert curl.startswith(f'curl "{base}/v1/audio/speech"') and "$TTS_API_KEY" in curl and "…" not in curl
        python = copy(page, "snippet-python")
        websocket = copy(page, "snippet-websocket")
        assert page.locator("#copy-status").inner_text() == "Copied: Python (WebSocket, websockets package)"

        # What was copied runs as is, with the key in the environment.
        done = run(["bash", "-c", curl], tmp_path, key)
        assert done.returncode == 0, done.stderr
        audio = (tmp_path / "hello.mp3").read_bytes()
        assert audio[:3] == b"ID3" or audio[:2] in (b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"), audio[:64]
        (tmp_path / "hello.mp3").unlink()
        done = run([sys.executable, "-c", python], tmp_path, key)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / "hello.mp3").stat().st_size > 0
        done = run([sys.executable, "-c", websocket], tmp_path, key)
        assert done.returncode == 0, done.stderr
        assert '"type": "end"' in done.stdout and (tmp_path / "hello.wav").read_bytes()[:4] == b"RIFF"

        page.click("main >> text=API reference")
        page.wait_for_url(f"{base}/v1/docs")
        page.locator("#redoc-container h1").first.wait_for()  # Redoc has rendered the schema
        assert "tts_saas API" in page.locator("#redoc-container h1").first.inner_text()
        page.wait_for_load_state("networkidle")
        assert any(url.endswith("redoc.standalone.js") for url in requested)
        assert any(url.endswith("/v1/openapi.json") for url in requested)
        # blob: URLs are made in the page from what it loaded (Redoc's search worker): same origin.
        outside = [url for url in requested if not url.removeprefix("blob:").startswith(f"{base}/")]
        assert outside == []
        assert page.errors == []

        page.click("#back-to-dashboard")
        page.wait_for_url(f"{base}/dashboard/docs")
        assert page.locator("h1").inner_text() == "Docs"

        # A phone: no sideways scrolling of the page; long code scrolls inside its block.
        page.set_viewport_size({"width": 390, "height": 844})
        page.reload()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        assert page.evaluate("document.querySelector('#snippet-websocket').parentElement.scrollWidth") > 390
