"""Webhook endpoints on the dashboard, in Chromium against the live stack: an owner adds an endpoint
for one event type from the Webhooks page, lands on its page, reads its signing secret, sends a
test event a local receiver verifies with that secret, opens the delivery's bodies and attempts,
sends it again with one Redeliver (the worker adds the attempt to the same delivery), rotates the
secret and disables the endpoint; both pages fit 1280 and 390 px and axe finds no serious
violation on them."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect
from standardwebhooks.webhooks import Webhook

from tests.browser import browser_page, sign_up
from tests.receiver import Receiver
from tests.test_dashboard_ux_browser import serious_violations

pytestmark = pytest.mark.django_db(transaction=True)


def overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_an_endpoint_is_added_tested_redelivered_rotated_and_disabled(live_stack):
    base = live_stack.base_url
    receiver = Receiver(failures=0, answer=b'{"received": true}')
    problems: dict[str, list[str]] = {}
    try:
        with browser_page() as page:
            page.on("dialog", lambda dialog: dialog.accept())  # the rotation's confirmation
            sign_up(page, base, "hooks@example.com", "Hooks Co")
            page.goto(f"{base}/dashboard/webhooks")
            expect(page.locator("#no-endpoints")).to_contain_text("No endpoints yet")
            if found := serious_violations(page):
                problems["webhooks, empty"] = found
            page.fill("#id_url", receiver.url)
            page.fill("#id_description", "Usage alerts")
            page.get_by_label(
                "usage.threshold_reached: 50, 80 or 100 % of the monthly quota or of a key's cap used"
            ).check()
            page.click("text=Add endpoint")
            expect(page.locator(".messages")).to_contain_text("Endpoint added")
            expect(page.locator("h1")).to_have_text("Webhook endpoint")
            expect(page.locator("#endpoint-summary")).to_contain_text("enabled")
            expect(page.locator("#endpoint-summary")).to_contain_text("usage.threshold_reached")

            page.click("#endpoint-secret-card >> text=Show")
            secret = page.locator("#endpoint-secret").inner_text().strip()
            assert secret.startswith("whsec_") and "•" not in secret

            page.click("text=Send test event")
            expect(page.locator(".messages")).to_contain_text("HTTP 200")
            headers, body = receiver.deliveries[0]
            assert Webhook(secret).verify(body, headers)["type"] == "test"  # its own secret signs it
            row = page.locator("#deliveries tr[data-delivery]")
            expect(row).to_have_count(1)
            expect(row).to_contain_text("✓ HTTP 200")
            expect(row).to_contain_text("1 attempt")
            page.click("#deliveries summary")
            bodies = page.locator("#deliveries pre.body")
            assert json.loads(bodies.nth(0).inner_text())["type"] == "test"
            expect(bodies.nth(1)).to_have_text('{"received": true}')
            if found := serious_violations(page):
                problems["endpoint page"] = found

            page.click("#deliveries >> text=Redeliver")
            expect(page.locator(".messages")).to_contain_text("Being sent again")
            receiver.wait(2)
            for _ in range(30):  # the worker records the attempt on the same delivery
                page.reload()
                if "2 attempts" in page.locator("#deliveries tr[data-delivery]").inner_text():
                    break
                page.wait_for_timeout(500)
            expect(page.locator("#deliveries tr[data-delivery]")).to_contain_text("2 attempts")
            assert len({h["webhook-id"] for h, _ in receiver.deliveries}) == 1  # the same message

            page.click("#endpoint-secret-card >> text=Rotate secret")
            expect(page.locator(".messages")).to_contain_text("Secret rotated")
            expect(page.locator("#previous-secret")).to_contain_text("previous secret")

            page.uncheck("#id_enabled")
            page.click("#endpoint-settings >> text=Save")
            expect(page.locator("#endpoint-summary")).to_contain_text("disabled: it is sent nothing")
            for width in (1280, 390):
                page.set_viewport_size({"width": width, "height": 844})
                assert overflow(page) <= 0, ("endpoint page", width)

            page.click("text=← Webhooks")
            listed = page.locator("#endpoints tbody tr")
            expect(listed).to_have_count(1)
            expect(listed).to_contain_text(receiver.url)
            expect(listed).to_contain_text("Disabled")
            for width in (390, 1280):
                page.set_viewport_size({"width": width, "height": 844})
                assert overflow(page) <= 0, ("webhooks page", width)
            if found := serious_violations(page):
                problems["webhooks, an endpoint"] = found
            assert page.errors == []
    finally:
        receiver.close()
    assert problems == {}
