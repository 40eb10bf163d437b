"""Billing through Stripe, offline: the real `stripe` library against a local fake of Stripe's API
(tests/fake_stripe.py), webhooks signed for real and posted to a live web process, the dashboard
through Django's test client, usage reporting and dunning run as beat runs them."""

from __future__ import annotations

import html
import io
import json
import logging
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from accounts.models import Membership
from billing import metering, stripe_events
from billing.limits import limits_for, subscription_for
from billing.models import BillingStatus, MeterReport, Plan, QuotaPeriod, StripeEvent, UsageEvent
from billing.quota import period_start
from billing.stripe_client import StripeClient, first_of_next_month, meter_identifier
from billing.tasks import report_usage
from tests import stack
from tests.conftest import make_persona
from tests.fake_stripe import FakeStripe, sign

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_KEY = "sk_test_tts"
WEBHOOK_SECRET = "whsec_test_tts"


@pytest.fixture(scope="module")
def fake():
    with FakeStripe(api_key=SECRET_KEY) as server:
        yield server


def stripe_settings(fake: FakeStripe) -> dict[str, str]:
    return {
        "STRIPE_SECRET_KEY": SECRET_KEY,
        "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "STRIPE_API_BASE": fake.url,
        "STRIPE_TIMEOUT": "2",
        "STRIPE_MAX_NETWORK_RETRIES": "0",
    }


@pytest.fixture(scope="module")
def mail_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mail")


@pytest.fixture(scope="module")
def web(fake, mail_dir, django_db_setup, tmp_path_factory):
    """A live web process configured for Stripe (the fake), e-mail written to files."""
    env = stack.stack_env(
        stack.redis_db(11)[0],
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(mail_dir),
        **stripe_settings(fake),
    )
    proc, base = stack.start_web(env, tmp_path_factory.mktemp("billing-web"))
    yield base
    proc.stop()


@pytest.fixture(autouse=True)
def configured(settings, fake):
    """This process (the test's own calls: beat tasks, the dashboard) configured like the web."""
    settings.STRIPE_SECRET_KEY = SECRET_KEY
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    settings.STRIPE_API_BASE = fake.url
    settings.STRIPE_TIMEOUT = 2.0
    settings.STRIPE_MAX_NETWORK_RETRIES = 0


@pytest.fixture
def synced(fake):
    call_command("stripe_sync", stdout=io.StringIO())


def deliver(base: str, fake: FakeStripe, kind: str, obj: dict, secret: str = WEBHOOK_SECRET, at: int | None = None):
    payload, event = fake.event(kind, obj)
    response = httpx.post(
        f"{base}/billing/stripe/webhook",
        content=payload,
        headers={"Stripe-Signature": sign(payload, secret, at), "Content-Type": "application/json"},
        timeout=30,
    )
    return response, event, payload


def owner_user(org, email="owner@example.com", role=Membership.Role.OWNER):
    user = get_user_model().objects.create_user(email, email, "correct horse battery")
    Membership.objects.create(user=user, organization=org, role=role)
    return user


def subscribe(client, fake, web, org, plan="pro"):
    """The owner upgrades through Checkout, pays, and Stripe's webhook arrives: the subscription."""
    client.force_login(owner_user(org))
    response = client.post("/dashboard/billing/checkout", {"plan": plan})
    assert response.status_code == 302 and response["Location"].startswith(f"{fake.url}/pay/cs_")
    session_id = response["Location"].rsplit("/", 1)[1]
    stripe_sub = fake.complete_checkout(session_id)
    delivered, _, _ = deliver(web, fake, "checkout.session.completed", fake.get(session_id))
    assert delivered.status_code == 200, delivered.text
    return stripe_sub


def api(web: str, key: str, path: str, **kwargs) -> httpx.Response:
    return httpx.request(
        kwargs.pop("method", "GET"), f"{web}{path}", headers={"Authorization": f"Bearer {key}"}, timeout=30, **kwargs
    )


def test_the_catalogue_is_created_once_and_changed_plans_get_new_prices(fake):
    first, again = io.StringIO(), io.StringIO()
    call_command("stripe_sync", stdout=first)
    call_command("stripe_sync", stdout=again)
    assert "meter tts_characters: created" in first.getvalue()
    assert "price tts_pro_base: created" in first.getvalue() and "price tts_pro_overage: created" in first.getvalue()
    assert "created" not in again.getvalue() and "replaced" not in again.getvalue()
    prices = StripeClient().prices_by_lookup_key(["tts_pro_base", "tts_pro_overage", "tts_free_base"])
    assert prices["tts_pro_base"]["unit_amount"] == 2200
    assert prices["tts_pro_overage"]["recurring"]["usage_type"] == "metered"
    assert "tts_free_base" not in prices  # free plans are not sold
    Plan.objects.filter(slug="pro").update(monthly_price_cents=2500)
    changed = io.StringIO()
    call_command("stripe_sync", stdout=changed)
    assert "price tts_pro_base: replaced" in changed.getvalue()
    assert StripeClient().prices_by_lookup_key(["tts_pro_base"])["tts_pro_base"]["unit_amount"] == 2500


def test_without_stripe_the_page_says_so_and_the_webhook_is_not_there(client, settings):
    settings.STRIPE_SECRET_KEY = settings.STRIPE_WEBHOOK_SECRET = ""
    persona = make_persona("Plain")
    client.force_login(owner_user(persona.org))
    page = client.get("/dashboard/billing/")
    assert page.status_code == 200 and b"Plans are assigned by this service's operator" in page.content
    assert client.post("/billing/stripe/webhook", b"{}", content_type="application/json").status_code == 404
    # Before: a bare page. Now the plans side by side, and whom to ask when the operator said.
    shown = page.content.decode()
    assert "<caption>The plans side by side</caption>" in shown
    for plan in Plan.objects.all():
        assert f'<th scope="col">{plan.name}' in shown or f'<th scope="col" aria-current="true">{plan.name}' in shown
    # Whom to ask, in a tenant's words (before: the operator's setting's name, TTS_OPERATOR_CONTACT).
    assert 'id="operator-contact"' not in shown and "has published no contact: ask whoever gave you access" in shown
    assert "TTS_OPERATOR_CONTACT" not in shown and "billed through Stripe" not in shown  # no Stripe here
    # Sign-up promises no upgrade there is no way to make (before: "an owner can upgrade later").
    signup_page = html.unescape(Client().get("/dashboard/signup").content.decode())
    assert "this service's operator assigns other plans" in signup_page
    settings.TTS_OPERATOR_CONTACT = "plans@operator.example"
    shown = client.get("/dashboard/billing/").content.decode()
    assert '<a href="mailto:plans@operator.example" id="operator-contact">plans@operator.example</a>' in shown
    settings.TTS_OPERATOR_CONTACT = ""  # then whoever runs it: the service's superuser
    get_user_model().objects.create_superuser("root", "root@operator.example", "a long enough password")
    shown = client.get("/dashboard/billing/").content.decode()
    assert '<a href="mailto:root@operator.example" id="operator-contact">root@operator.example</a>' in shown
    # Units, the models each plan allows with their price weights, and what lies beyond the included characters.
    free, pro = Plan.objects.get(slug="free"), Plan.objects.get(slug="pro")
    assert (
        f"{free.monthly_characters:,} characters/month" in shown and f"{pro.requests_per_minute} requests/min" in shown
    )
    assert "Kokoro-82M ×" in shown and "ChatTTS ×" in shown
    assert f"{pro.overage_cents_per_1k}¢ per 1,000 characters" in shown and "a hard cap: requests get 429" in shown


def test_upgrading_through_checkout_changes_the_plan_and_limits_at_once(client, fake, web, synced):
    persona = make_persona("Upgrader")
    assert api(web, persona.key, "/v1/subscription").json()["plan"]["id"] == "free"
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    sub = subscription_for(persona.org)
    assert (sub.plan.slug, sub.billing_status, sub.stripe_subscription_id) == ("pro", "active", stripe_sub["id"])
    assert sub.stripe_customer_id == stripe_sub["customer"] and sub.metered_since is not None
    answer = api(web, persona.key, "/v1/subscription").json()
    assert answer["plan"]["id"] == "pro" and answer["requests_per_minute"] == 120
    assert answer["billing_status"] == "active" and answer["overage_cents_per_1k"] == 3
    checkout = fake.calls("POST", "/v1/checkout/sessions")[-1].params
    assert checkout["client_reference_id"] == str(persona.org.pk) and len(checkout["line_items"]) == 2
    page = client.get("/dashboard/billing/").content.decode()
    assert 'id="current-plan">Pro<' in page and 'id="billing-status">active<' in page
    anchor = checkout["subscription_data"]["billing_cycle_anchor"]  # periods on calendar months, as quotas
    assert int(anchor) == int(first_of_next_month(timezone.now()).timestamp())
    assert sub.current_period_end == first_of_next_month(timezone.now())


def test_members_see_the_plan_but_no_billing_actions(client, fake, synced):
    persona = make_persona("Members")
    member = owner_user(persona.org, "member@example.com", Membership.Role.MEMBER)
    client.force_login(member)
    page = client.get("/dashboard/billing/").content.decode()
    assert 'id="current-plan">Free<' in page and "Switch to" not in page and "Manage billing" not in page
    assert client.post("/dashboard/billing/checkout", {"plan": "pro"}).status_code == 403
    assert client.post("/dashboard/billing/portal").status_code == 403
    assert not fake.calls("POST", "/v1/customers") or all(
        c.params.get("metadata", {}).get("org_id") != str(persona.org.pk) for c in fake.calls("POST", "/v1/customers")
    )


def ledger_rows(org, characters: list[int], at=None, models=("chattts",)) -> list[UsageEvent]:
    return [
        UsageEvent.objects.create(
            organization=org,
            characters=c,
            model=models[i % len(models)],
            voice="alloy",
            created_at=at or timezone.now(),
        )
        for i, c in enumerate(characters)
    ]


def billed_customer(fake, org) -> str:
    """An organization Stripe bills (as after checkout), without going through the dashboard."""
    customer = StripeClient().create_customer(org_id=org.pk, name=org.name, email="x@example.com")
    sub = subscription_for(org)
    sub.stripe_customer_id = customer
    sub.stripe_subscription_id = "sub_direct"
    sub.billing_status = BillingStatus.ACTIVE
    sub.metered_since = timezone.now() - timedelta(days=60)
    sub.plan = Plan.objects.get(slug="pro")
    sub.save()
    return customer


def test_usage_goes_to_the_meter_once_per_ledger_row(fake, synced):
    persona = make_persona("Metered")
    customer = billed_customer(fake, persona.org)
    rows = ledger_rows(persona.org, [120, 0, 35], models=("chattts", "chattts", "kokoro"))  # 0: nothing to send
    other = make_persona("Unbilled")
    ledger_rows(other.org, [50])  # no Stripe customer: not reported
    assert metering.report_usage() == {"reported": 2, "too_old": 0, "rejected": 0}
    sent = [e for e in fake.meter_events if e["customer"] == customer]
    assert [(e["identifier"], e["value"]) for e in sent] == [
        (meter_identifier(rows[0].pk), 120),
        (meter_identifier(rows[2].pk), 35),
    ]
    assert sent[0]["timestamp"] == int(rows[0].created_at.timestamp())
    assert [e["payload"]["model"] for e in sent] == ["chattts", "kokoro"]  # each event names its model
    assert metering.report_usage() == {"reported": 0, "too_old": 0, "rejected": 0}
    assert len([e for e in fake.meter_events if e["customer"] == customer]) == 2


def test_a_failed_or_timed_out_meter_event_is_retried_and_counted_once(fake, synced, settings):
    persona = make_persona("Flaky")
    customer = billed_customer(fake, persona.org)
    rows = ledger_rows(persona.org, [10, 20, 30])
    fake.fail_next("POST", "/v1/billing/meter_events")  # Stripe down: nothing recorded
    with pytest.raises(metering.TransientStripeError):
        metering.report_usage()
    assert MeterReport.objects.filter(usage_event__in=rows).count() == 0
    fake.fail_after_next("POST", "/v1/billing/meter_events")  # recorded, but the answer is lost
    with pytest.raises(metering.TransientStripeError):
        metering.report_usage()
    settings.STRIPE_TIMEOUT = 0.5
    fake.delay_next("POST", "/v1/billing/meter_events", 2.0)  # recorded, the client times out
    with pytest.raises(metering.TransientStripeError):
        metering.report_usage()
    settings.STRIPE_TIMEOUT = 2.0
    reported = metering.report_usage()["reported"]
    assert reported == 3
    sent = sorted(e["value"] for e in fake.meter_events if e["customer"] == customer)
    assert sent == [10, 20, 30]  # every row once, whatever was retried
    assert MeterReport.objects.filter(usage_event__in=rows, status="reported").count() == 3


def test_rows_too_old_for_stripe_are_an_alert_not_dropped(fake, synced, caplog):
    persona = make_persona("Late")
    customer = billed_customer(fake, persona.org)
    (old,) = ledger_rows(persona.org, [77], at=timezone.now() - timedelta(days=40))
    with caplog.at_level(logging.ERROR, logger="billing.metering"):
        assert metering.report_usage()["too_old"] == 1
    assert MeterReport.objects.get(usage_event=old).status == MeterReport.Status.TOO_OLD
    assert "ALERT" in caplog.text
    assert not [e for e in fake.meter_events if e["customer"] == customer]


def test_replayed_and_out_of_order_webhooks_change_nothing_twice(client, fake, web, synced):
    persona = make_persona("Replays")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    created_payload, created_event = fake.event("customer.subscription.created", fake.get(stripe_sub["id"]))
    fake.set_subscription(stripe_sub["id"], price_lookup_key="tts_enterprise_base")
    updated, event, payload = deliver(web, fake, "customer.subscription.updated", fake.get(stripe_sub["id"]))
    assert updated.status_code == 200 and subscription_for(persona.org).plan.slug == "enterprise"
    replay = httpx.post(
        f"{web}/billing/stripe/webhook",
        content=payload,
        headers={"Stripe-Signature": sign(payload, WEBHOOK_SECRET), "Content-Type": "application/json"},
    )
    assert replay.status_code == 200
    assert StripeEvent.objects.get(pk=event["id"]).attempts == 1  # handled once
    late = httpx.post(  # the older "created" event arrives last: the subscription as it is now wins
        f"{web}/billing/stripe/webhook",
        content=created_payload,
        headers={"Stripe-Signature": sign(created_payload, WEBHOOK_SECRET), "Content-Type": "application/json"},
    )
    assert late.status_code == 200 and subscription_for(persona.org).plan.slug == "enterprise"
    assert limits_for(persona.org).concurrent_jobs == 16


def test_a_forged_or_stale_signature_is_refused_and_changes_nothing(client, fake, web, synced):
    persona = make_persona("Forged")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    fake.cancel_subscription(stripe_sub["id"])
    before = StripeEvent.objects.count()
    for secret, at in (("whsec_wrong", None), (WEBHOOK_SECRET, int(time.time()) - 3600)):
        response, _, _ = deliver(web, fake, "customer.subscription.deleted", fake.get(stripe_sub["id"]), secret, at)
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_signature"
    payload, _ = fake.event("customer.subscription.deleted", fake.get(stripe_sub["id"]))
    altered = payload.replace(b'"canceled"', b'"active"')
    response = httpx.post(
        f"{web}/billing/stripe/webhook",
        content=altered,
        headers={"Stripe-Signature": sign(payload, WEBHOOK_SECRET), "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert StripeEvent.objects.count() == before and subscription_for(persona.org).plan.slug == "pro"


def read_mail(mail_dir: Path) -> str:
    return "".join(p.read_text() for p in sorted(mail_dir.glob("*.log")))


def test_a_failed_payment_gives_grace_then_suspends_and_paying_reinstates(client, fake, web, synced, mail_dir):
    persona = make_persona("Dunning")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    customer = stripe_sub["customer"]
    invoice = fake.create_invoice(customer, status="open", amount_due=2200, subscription=stripe_sub["id"])
    failed, _, _ = deliver(web, fake, "invoice.payment_failed", invoice)
    assert failed.status_code == 200
    sub = subscription_for(persona.org)
    assert sub.billing_status == BillingStatus.PAST_DUE and sub.past_due_since is not None
    assert "Payment failed for Dunning" in read_mail(mail_dir) and invoice["hosted_invoice_url"] in read_mail(mail_dir)
    assert api(web, persona.key, "/v1/voices").status_code == 200  # grace: still working
    assert b"A payment failed" in client.get("/dashboard/").content  # the banner
    assert stripe_events.enforce_dunning() == 0  # within the grace period
    assert stripe_events.enforce_dunning(timezone.now() + timedelta(days=8)) == 1
    refused = api(web, persona.key, "/v1/voices")
    assert refused.status_code == 403 and "billing page" in refused.json()["error"]["message"]
    assert client.post("/dashboard/billing/portal").status_code == 302  # an owner can still go and pay
    paid = fake.set_invoice(invoice["id"], status="paid", amount_paid=2200)
    assert deliver(web, fake, "invoice.paid", paid)[0].status_code == 200
    assert api(web, persona.key, "/v1/voices").status_code == 200
    sub = subscription_for(persona.org)
    assert sub.billing_status == BillingStatus.ACTIVE and sub.past_due_since is None


def use(org, characters: int) -> None:
    QuotaPeriod.objects.update_or_create(organization=org, period_start=period_start(), defaults={"used": characters})


def job(web: str, key: str, text: str) -> httpx.Response:
    return api(web, key, "/v1/jobs", method="POST", json={"input": text, "voice": "alloy", "response_format": "pcm"})


def test_overage_is_sold_to_billed_plans_up_to_the_spending_limit_and_free_plans_stop_at_the_cap(
    client, fake, web, synced
):
    billed = make_persona("Overage", monthly_characters=100)  # an override Stripe cannot bill: ignored
    billed_customer(fake, billed.org)
    assert limits_for(billed.org).monthly_characters == 500_000  # the Pro plan's, as its Stripe price
    use(billed.org, 500_000)  # the included characters are used up
    assert job(web, billed.key, "Over the included characters.").status_code == 202  # overage
    client.force_login(owner_user(billed.org))
    assert client.post("/dashboard/billing/spending-limit", {"spending_limit": "0.01"}).status_code == 302
    assert subscription_for(billed.org).spending_limit_cents == 1  # 1 cent at 3 cents/1,000: 333 characters
    use(billed.org, 500_000 + 330)
    refused = job(web, billed.key, "This one goes past the spending limit.")
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "insufficient_quota" and "$0.01" in error["message"]
    page = client.get("/dashboard/billing/").content.decode()
    assert "Spending limit" in page and 'value="0.01"' in page
    capped = make_persona("Capped", monthly_characters=100)  # the free plan: a hard cap
    use(capped.org, 100)
    response = job(web, capped.key, "Over the cap.")
    assert response.status_code == 429 and response.json()["error"]["code"] == "insufficient_quota"


def test_reconciliation_finds_an_injected_difference(fake, synced):
    persona = make_persona("Reconciled")
    customer = billed_customer(fake, persona.org)
    ledger_rows(persona.org, [400, 600])
    metering.report_usage()
    out = io.StringIO()
    call_command("billing_reconcile", "--period", timezone.now().strftime("%Y-%m"), stdout=out)
    assert (
        f"ok      org {persona.org.pk}" in out.getvalue() and "ledger 1,000 characters, Stripe 1,000" in out.getvalue()
    )
    StripeClient().v1.billing.meter_events.create(  # usage Stripe has that the ledger does not
        params={
            "event_name": "tts_characters",
            "payload": {"stripe_customer_id": customer, "value": "25"},
            "identifier": "injected-1",
        }
    )
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_status:
        call_command("billing_reconcile", "--period", timezone.now().strftime("%Y-%m"), stdout=out)
    assert exit_status.value.code == 1
    assert f"DIFFERS org {persona.org.pk}" in out.getvalue() and "difference +25" in out.getvalue()
    assert subscription_for(persona.org).reconciliation["difference"] == 25


def test_the_billing_page_shows_usage_the_estimate_and_invoices(client, fake, web, synced):
    persona = make_persona("Invoiced")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    fake.create_invoice(stripe_sub["customer"], status="paid", amount_due=2200, amount_paid=2200)
    use(persona.org, 500_500)  # 500 beyond the included 500,000 at 3 cents/1,000: 1.5 cents, billed as 2
    page = client.get("/dashboard/billing/").content.decode()
    assert "500,500" in page and "500,000 characters a month included" in page
    assert "$22.02" in page and "500 characters of overage" in page
    invoices = page.split('id="invoices"', 1)[1]
    assert "$22.00 USD" in invoices and f"{fake.url}/invoice/" in invoices and ">paid<" in invoices
    assert json.loads(api(web, persona.key, "/v1/subscription").text)["plan"]["id"] == "pro"


def test_an_event_whose_handling_fails_changes_nothing_and_is_handled_when_delivered_again(client, fake, web, synced):
    persona = make_persona("Retried")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    fake.set_subscription(stripe_sub["id"], price_lookup_key="tts_enterprise_base")
    payload, event = fake.event("customer.subscription.updated", fake.get(stripe_sub["id"]))
    headers = {"Stripe-Signature": sign(payload, WEBHOOK_SECRET), "Content-Type": "application/json"}
    fake.fail_next("GET", f"/v1/subscriptions/{stripe_sub['id']}")  # the re-fetch fails: Stripe must retry
    first = httpx.post(f"{web}/billing/stripe/webhook", content=payload, headers=headers)
    assert first.status_code == 500 and first.json()["error"]["code"] == "event_failed"
    row = StripeEvent.objects.get(pk=event["id"])
    assert row.status == StripeEvent.Status.FAILED and "APIError" in row.error
    assert subscription_for(persona.org).plan.slug == "pro"
    again = httpx.post(f"{web}/billing/stripe/webhook", content=payload, headers=headers)
    assert again.status_code == 200 and subscription_for(persona.org).plan.slug == "enterprise"
    row.refresh_from_db()
    assert (row.status, row.attempts, row.error) == (StripeEvent.Status.PROCESSED, 2, "")


def test_cancelling_returns_to_the_free_plan_and_unsent_usage_still_reaches_the_meter(client, fake, web, synced):
    persona = make_persona("Leaving")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    (row,) = ledger_rows(persona.org, [42])  # not sent yet when the cancellation arrives
    fake.cancel_subscription(stripe_sub["id"])
    assert deliver(web, fake, "customer.subscription.deleted", fake.get(stripe_sub["id"]))[0].status_code == 200
    sub = subscription_for(persona.org)
    assert (sub.plan.slug, sub.billing_status, sub.stripe_subscription_id) == ("free", "canceled", "")
    assert not limits_for(persona.org).has_overage
    metering.report_usage()
    assert [e["value"] for e in fake.meter_events if e["identifier"] == meter_identifier(row.pk)] == [42]


def fail_payment(fake, web, stripe_sub) -> dict:
    invoice = fake.create_invoice(stripe_sub["customer"], status="open", amount_due=2200, subscription=stripe_sub["id"])
    assert deliver(web, fake, "invoice.payment_failed", invoice)[0].status_code == 200
    return invoice


def test_billing_never_lifts_an_operators_suspension(client, fake, web, synced):
    persona = make_persona("Operated")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    invoice = fail_payment(fake, web, stripe_sub)
    org = persona.org
    org.refresh_from_db()
    org.suspended_at, org.suspension_reason = timezone.now(), "abuse of the service"
    org.save()
    assert stripe_events.enforce_dunning(timezone.now() + timedelta(days=8)) == 0  # already suspended
    assert deliver(web, fake, "invoice.paid", fake.set_invoice(invoice["id"], status="paid"))[0].status_code == 200
    org.refresh_from_db()
    assert org.suspended_at is not None and org.suspension_reason == "abuse of the service"
    refused = api(web, persona.key, "/v1/voices")
    assert refused.status_code == 403 and "abuse" in refused.json()["error"]["message"]


def test_a_subscription_that_ends_unpaid_stays_suspended_until_the_invoice_is_paid(client, fake, web, synced):
    persona = make_persona("Unpaid")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    invoice = fail_payment(fake, web, stripe_sub)
    assert stripe_events.enforce_dunning(timezone.now() + timedelta(days=8)) == 1
    fake.cancel_subscription(stripe_sub["id"])  # Stripe gives up retrying and cancels
    assert deliver(web, fake, "customer.subscription.deleted", fake.get(stripe_sub["id"]))[0].status_code == 200
    sub = subscription_for(persona.org)
    assert (sub.plan.slug, sub.billing_status) == ("free", "suspended")
    assert api(web, persona.key, "/v1/voices").status_code == 403
    one_off = fake.create_invoice(stripe_sub["customer"], status="paid", amount_due=100)  # not the subscription's
    assert deliver(web, fake, "invoice.paid", one_off)[0].status_code == 200
    assert api(web, persona.key, "/v1/voices").status_code == 403
    assert deliver(web, fake, "invoice.paid", fake.set_invoice(invoice["id"], status="paid"))[0].status_code == 200
    assert api(web, persona.key, "/v1/voices").status_code == 200
    assert subscription_for(persona.org).billing_status == "canceled"


def test_a_second_checkout_goes_to_the_portal_and_never_makes_a_second_subscription(client, fake, web, synced):
    persona = make_persona("Twice")
    client.force_login(owner_user(persona.org))
    sessions = len(fake.calls("POST", "/v1/checkout/sessions"))
    first = client.post("/dashboard/billing/checkout", {"plan": "pro"})
    fake.complete_checkout(first["Location"].rsplit("/", 1)[1])  # paid; its webhook has not arrived yet
    second = client.post("/dashboard/billing/checkout", {"plan": "enterprise"})
    assert second.status_code == 302 and second["Location"].startswith(f"{fake.url}/portal/")
    assert len(fake.calls("POST", "/v1/checkout/sessions")) == sessions + 1


def test_a_subscription_made_elsewhere_cannot_attach_itself_to_an_organization(client, fake, web, synced):
    victim = make_persona("Victim")
    stranger = StripeClient()
    customer = stranger.v1.customers.create(params={"email": "mallory@example.com"}).id  # no org of ours
    base_price = stranger.prices_by_lookup_key(["tts_enterprise_base"])["tts_enterprise_base"]["id"]
    session = stranger.v1.checkout.sessions.create(
        params={
            "mode": "subscription",
            "customer": customer,
            "client_reference_id": str(victim.org.pk),
            "line_items": [{"price": base_price, "quantity": 1}],
            "success_url": "https://example.com/ok",
            "metadata": {"org_id": str(victim.org.pk)},
            "subscription_data": {"metadata": {"org_id": str(victim.org.pk)}},
        }
    )
    stripe_sub = fake.complete_checkout(session.id)
    assert deliver(web, fake, "checkout.session.completed", fake.get(session.id))[0].status_code == 200
    assert deliver(web, fake, "customer.subscription.created", fake.get(stripe_sub["id"]))[0].status_code == 200
    sub = subscription_for(victim.org)
    assert (sub.plan.slug, sub.stripe_customer_id, sub.billing_status) == ("free", "", "none")


def test_a_refused_key_stops_reporting_without_giving_up_on_any_row(fake, synced, settings):
    persona = make_persona("Revoked")
    billed_customer(fake, persona.org)
    rows = ledger_rows(persona.org, [5, 6])
    settings.STRIPE_SECRET_KEY = "sk_test_revoked"  # Stripe answers 401 to every call
    with pytest.raises(metering.StripeRefused):
        metering.report_usage()
    assert not MeterReport.objects.filter(usage_event__in=rows).exists()  # all still pending
    settings.STRIPE_SECRET_KEY = SECRET_KEY
    assert metering.report_usage()["reported"] == 2


def test_the_beat_task_retries_a_failed_report_with_backoff(fake, synced):
    persona = make_persona("Backoff")
    billed_customer(fake, persona.org)
    rows = ledger_rows(persona.org, [9])
    attempts = len(fake.calls("POST", "/v1/billing/meter_events"))
    fake.fail_next("POST", "/v1/billing/meter_events")
    result = report_usage.apply()  # eager: Celery runs the retry at once instead of after its countdown
    assert result.successful() and result.result["reported"] == 1
    assert len(fake.calls("POST", "/v1/billing/meter_events")) == attempts + 2
    assert MeterReport.objects.get(usage_event=rows[0]).status == "reported"
    assert report_usage.autoretry_for == (metering.TransientStripeError,) and report_usage.retry_backoff


def test_stripes_meter_error_reports_are_stored_and_raised_as_an_alert(fake, web, synced):
    report = {"id": "mtr_err_1", "object": "billing.meter_error_report", "reason": {"error_count": 3}}
    response, event, _ = deliver(web, fake, "billing.meter.error_report_triggered", report)
    assert response.status_code == 200 and response.json()["status"] == "processed"
    assert StripeEvent.objects.get(pk=event["id"]).type == "billing.meter.error_report_triggered"
    unknown, other, _ = deliver(web, fake, "customer.created", {"id": "cus_x", "object": "customer"})
    assert unknown.status_code == 200 and StripeEvent.objects.get(pk=other["id"]).status == "ignored"


def test_operators_see_each_organizations_stripe_side_and_resync_it_in_the_admin(client, fake, web, synced):
    persona = make_persona("Administered")
    stripe_sub = subscribe(client, fake, web, persona.org, "pro")
    ledger_rows(persona.org, [300])
    metering.report_usage()
    staff = get_user_model().objects.create_superuser("root@example.com", "root@example.com", "pw-root-12345")
    client.force_login(staff)
    fake.set_subscription(stripe_sub["id"], price_lookup_key="tts_enterprise_base")  # changed, no webhook yet
    response = client.post(
        "/admin/billing/subscription/",
        {"action": "resync", "_selected_action": [subscription_for(persona.org).pk]},
        follow=True,
    )
    assert response.status_code == 200 and b"Re-synced 1 organization" in response.content
    assert subscription_for(persona.org).plan.slug == "enterprise"
    listing = client.get("/admin/billing/subscription/").content.decode()
    assert f"https://dashboard.stripe.com/customers/{stripe_sub['customer']}" in listing
    assert f"https://dashboard.stripe.com/subscriptions/{stripe_sub['id']}" in listing
    assert f'field-reconciled">{timezone.now():%Y-%m}: ok<' in listing
    assert 'field-last_reported">#' in listing  # the last ledger row Stripe accepted, and when
    for path in ("/admin/billing/stripeevent/", "/admin/billing/meterreport/"):
        assert client.get(path).status_code == 200, path
