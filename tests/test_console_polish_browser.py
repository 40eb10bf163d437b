"""The console's polish, in Chromium at 1280 px: the menu is one row; every dashboard page's content
has one width, centred (History and Voices were the full window); Settings' save buttons look alike
(two were quiet, two not); the operations page groups its figures (traffic, each engine, the
queues) where it showed 14 tiles in one grid."""

from __future__ import annotations

import pytest

from tests.browser import browser_page, off_loop, sign_up
from tests.test_console_operator_browser import owner_of

pytestmark = pytest.mark.django_db(transaction=True)


def rows(page, selector: str) -> list[int]:
    """The distinct tops (px) of what `selector` finds: one row is one top."""
    tops = page.eval_on_selector_all(selector, "els => els.map(e => Math.round(e.getBoundingClientRect().top))")
    return sorted(set(tops))


def test_at_1280px_the_menu_is_one_row_pages_share_a_width_and_saves_look_alike(live_stack):
    base = live_stack.base_url
    with browser_page(1280, 800) as page:
        sign_up(page, base, "polish@example.com", "Polish Co")
        page.goto(f"{base}/dashboard/")
        tops = rows(page, "nav[aria-label=Dashboard] a")
        assert max(tops) - min(tops) <= 4, f"the menu wraps to {len(tops)} rows at 1280 px: {tops}"

        widths = {}
        for path in ("", "history", "voices", "keys", "usage", "organization", "docs", "billing", "webhooks"):
            page.goto(f"{base}/dashboard/{path}")
            box = page.locator("main").bounding_box()
            widths[path or "overview"] = (round(box["x"]), round(box["width"]))
        assert len(set(widths.values())) == 1, widths  # one width, centred alike
        assert next(iter(widths.values()))[0] > 0  # centred, not the window's full width

        page.goto(f"{base}/dashboard/organization")
        saves = page.eval_on_selector_all(
            "main form button[type=submit]:not(.danger):not(.destructive)",
            "els => els.map(e => [e.innerText, getComputedStyle(e).backgroundColor, getComputedStyle(e).padding])",
        )
        assert len(saves) >= 4 and len({(colour, padding) for _, colour, padding in saves}) == 1, saves

        off_loop(owner_of, "polish@example.com", staff=True)
        page.goto(f"{base}/ops/")
        groups = page.locator("#ops-figures h2.ops-group").all_inner_texts()
        assert groups == ["Traffic, the last hour", "Engines, now", "Celery queues, now"], groups
        engines = page.locator("#ops-figures section.engine-figures")
        assert engines.count() == 2  # the stack serves ChatTTS and Kokoro: one card each, its three figures
        for i in range(engines.count()):
            card = engines.nth(i)
            assert card.locator("h3").inner_text() in ("ChatTTS", "Kokoro-82M"), card.inner_text()
            assert card.locator(".stat").count() == 3
