"""The sessions page's browser names: a user-agent string read as "<browser> on <system>"."""

from __future__ import annotations

import pytest

from dashboard.templatetags.identity import browser_label

BLINK = "AppleWebKit/537.36 (KHTML, like Gecko)"
WEBKIT = "AppleWebKit/605.1.15 (KHTML, like Gecko)"
CHROME = "Chrome/131.0.0.0 Safari/537.36"
WINDOWS = "Mozilla/5.0 (Windows NT 10.0; Win64; x64)"
AGENTS = [
    (f"Mozilla/5.0 (X11; Linux x86_64) {BLINK} {CHROME}", "Chrome on Linux"),
    (f"Mozilla/5.0 (X11; Linux x86_64) {BLINK} HeadlessChrome/131.0.0.0 Safari/537.36", "Chrome on Linux"),
    (f"{WINDOWS} {BLINK} {CHROME} Edg/131.0.0.0", "Edge on Windows"),
    (f"{WINDOWS} {BLINK} {CHROME} OPR/115.0.0.0", "Opera on Windows"),
    ("Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0", "Firefox on Windows"),
    (f"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) {WEBKIT} Version/17.5 Safari/605.1.15", "Safari on macOS"),
    (
        f"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) {WEBKIT} Version/17.5 Mobile/15E148 Safari/604.1",
        "Safari on iOS",
    ),
    (f"Mozilla/5.0 (Linux; Android 14; Pixel 8) {BLINK} Chrome/131.0.0.0 Mobile Safari/537.36", "Chrome on Android"),
    (f"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) {BLINK} {CHROME}", "Chrome on ChromeOS"),
    ("curl/8.5.0", "curl"),
    ("", "Unknown browser"),
]


@pytest.mark.parametrize(("agent", "label"), AGENTS)
def test_a_user_agent_reads_as_browser_on_system(agent, label):
    assert browser_label(agent) == label
