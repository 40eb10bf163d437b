"""Debian's Chromium driven by Playwright for Python (never `playwright install`)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os

from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("TTS_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
    "--autoplay-policy=no-user-gesture-required",
]


@contextlib.contextmanager
def browser_page(width: int = 1280, height: int = 900):
    """A fresh page; console errors and uncaught page errors are collected in `page.errors`."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.errors = []
            page.on("console", lambda m: m.type == "error" and page.errors.append(m.text))
            page.on("pageerror", lambda e: page.errors.append(str(e)))
            yield page
        finally:
            browser.close()


def sign_up(page, base_url: str, email: str, organization: str) -> None:
    """Through the sign-up form, as a new team would; ends on the overview."""
    page.goto(f"{base_url}/dashboard/signup")
    page.fill("#id_email", email)
    page.fill("#id_password", "a long enough password")
    page.fill("#id_organization", organization)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/dashboard/")


def off_loop(fn, *args, **kwargs):
    """Call `fn` (ORM work) in another thread: Playwright's sync API keeps an event loop running in
    this one, where Django refuses database calls."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()
