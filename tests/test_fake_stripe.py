"""The Stripe fake (tests/fake_stripe.py) as the real `stripe` library sees it: every call here goes through
`stripe.StripeClient` over HTTP, so what passes here is what product code gets. No database, no Redis."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
import stripe

from tests.fake_stripe import API_VERSION, FakeStripe, sign

API_KEY = "sk_test_fake"


def make_client(fake: FakeStripe, timeout: float = 5.0, api_key: str = API_KEY) -> stripe.StripeClient:
    """A client configured as the product configures its own. HTTPXClient makes synchronous requests only
    with allow_sync_methods=True (without it the library raises RuntimeError on every sync call)."""
    return stripe.StripeClient(
        api_key,
        stripe_version=API_VERSION,
        base_addresses={"api": fake.url},
        max_network_retries=0,
        http_client=stripe.HTTPXClient(timeout=timeout, allow_sync_methods=True),
    )


@pytest.fixture
def fake():
    with FakeStripe() as server:
        yield server


@pytest.fixture
def client(fake: FakeStripe) -> stripe.StripeClient:
    return make_client(fake)


@pytest.fixture
def meter(client: stripe.StripeClient):
    return client.v1.billing.meters.create(
        params={
            "display_name": "Characters synthesized",
            "event_name": "tts_characters",
            "default_aggregation": {"formula": "sum"},
            "customer_mapping": {"event_payload_key": "stripe_customer_id", "type": "by_id"},
            "value_settings": {"event_payload_key": "value"},
        }
    )


def meter_event(
    client: stripe.StripeClient, customer: str, value: int, identifier: str, timestamp: int | None = None, **options
):
    """A retry must send the same timestamp: an idempotency key only replays identical parameters."""
    return client.v1.billing.meter_events.create(
        params={
            "event_name": "tts_characters",
            "payload": {"stripe_customer_id": customer, "value": str(value)},
            "identifier": identifier,
            "timestamp": timestamp or int(time.time()),
        },
        options=options,
    )


def test_customer_is_created_retrieved_and_updated(fake: FakeStripe, client: stripe.StripeClient):
    created = client.v1.customers.create(
        params={"email": "owner@example.com", "name": "Acme", "metadata": {"org_id": "3"}},
        options={"idempotency_key": "org-3-customer"},
    )
    assert created.id == "cus_1" and created.object == "customer"

    fetched = client.v1.customers.retrieve(created.id)
    assert (fetched.email, fetched.name, fetched.metadata.to_dict()) == ("owner@example.com", "Acme", {"org_id": "3"})

    updated = client.v1.customers.update(created.id, params={"email": "new@example.com", "metadata": {"plan": "pro"}})
    assert updated.email == "new@example.com"
    assert updated.metadata.to_dict() == {"org_id": "3", "plan": "pro"}  # metadata is merged, as by Stripe

    (post,) = fake.calls("POST", "/v1/customers/cus_1")
    assert post.params == {"email": "new@example.com", "metadata": {"plan": "pro"}}
    assert post.headers["authorization"] == f"Bearer {API_KEY}"
    assert post.headers["stripe-version"] == API_VERSION
    assert fake.calls("POST", "/v1/customers")[0].headers["idempotency-key"] == "org-3-customer"


def test_prices_by_lookup_key_and_transfer_lookup_key(fake: FakeStripe, client: stripe.StripeClient, meter):
    client.v1.products.create(params={"id": "tts_pro", "name": "Pro"})
    monthly = client.v1.prices.create(
        params={
            "product": "tts_pro",
            "currency": "usd",
            "unit_amount": 2900,
            "recurring": {"interval": "month"},
            "lookup_key": "pro_monthly",
        }
    )
    usage = client.v1.prices.create(
        params={
            "product": "tts_pro",
            "currency": "usd",
            "billing_scheme": "tiered",
            "tiers_mode": "graduated",
            "tiers": [{"up_to": 100_000, "unit_amount": 0}, {"up_to": "inf", "unit_amount_decimal": "0.002"}],
            "recurring": {"interval": "month", "usage_type": "metered", "meter": meter.id},
            "lookup_key": "pro_usage",
        }
    )
    found = client.v1.prices.list(params={"lookup_keys": ["pro_monthly", "pro_usage"], "expand": ["data.tiers"]})
    assert [p.id for p in found.data] == [usage.id, monthly.id]  # newest first
    # The library turns decimal strings into Decimal.
    assert found.data[0].tiers[1].up_to is None and found.data[0].tiers[1].unit_amount_decimal == Decimal("0.002")
    assert "tiers" not in monthly  # Stripe sends tiers only when expanded
    assert fake.calls("GET", "/v1/prices")[0].params["lookup_keys"] == ["pro_monthly", "pro_usage"]

    # A taken lookup key: refused, unless transferred.
    new_monthly = {"product": "tts_pro", "currency": "usd", "unit_amount": 3900, "recurring": {"interval": "month"}}
    with pytest.raises(stripe.InvalidRequestError) as refused:
        client.v1.prices.create(params={**new_monthly, "lookup_key": "pro_monthly"})
    assert refused.value.param == "lookup_key"
    moved = client.v1.prices.create(params={**new_monthly, "lookup_key": "pro_monthly", "transfer_lookup_key": True})

    (current,) = client.v1.prices.list(params={"lookup_keys": ["pro_monthly"]}).data
    assert current.id == moved.id and current.unit_amount == 3900
    assert fake.get(monthly.id)["lookup_key"] is None and fake.get(monthly.id)["active"]  # the old price stays

    with pytest.raises(stripe.InvalidRequestError, match="unknown parameter: amount"):
        client.v1.prices.create(params={**new_monthly, "amount": 5})  # a typo fails as against Stripe


def test_meter_events_are_summed_and_an_identifier_counts_once(fake: FakeStripe, client: stripe.StripeClient, meter):
    customer = client.v1.customers.create(params={"email": "a@example.com"}).id
    other = client.v1.customers.create(params={"email": "b@example.com"}).id
    start = int(time.time()) - 60
    meter_event(client, customer, 500, "job-1")
    meter_event(client, customer, 250, "job-2")
    meter_event(client, other, 1000, "job-3")
    again = meter_event(client, customer, 500, "job-1")  # a retry with a new idempotency key: not counted
    assert again.identifier == "job-1" and again.payload["value"] == "500"
    assert fake.duplicate_meter_events == 1
    assert [e["identifier"] for e in fake.meter_events] == ["job-1", "job-2", "job-3"]

    (summary,) = client.v1.billing.meters.event_summaries.list(
        meter.id, params={"customer": customer, "start_time": start, "end_time": start + 3600}
    ).data
    assert summary.object == "billing.meter_event_summary" and summary.aggregated_value == 750.0
    (empty,) = client.v1.billing.meters.event_summaries.list(
        meter.id, params={"customer": customer, "start_time": start - 3600, "end_time": start}
    ).data
    assert empty.aggregated_value == 0.0  # end_time is exclusive and the events are later

    bad_events = [
        ({"event_name": "nope", "payload": {"stripe_customer_id": customer, "value": "1"}}, "event_name"),
        ({"event_name": "tts_characters", "payload": {"stripe_customer_id": "cus_404", "value": "1"}}, None),
        (
            {
                "event_name": "tts_characters",
                "payload": {"stripe_customer_id": customer, "value": "1"},
                "timestamp": int(time.time()) - 36 * 86_400,
            },
            "timestamp",
        ),
    ]
    for params, param in bad_events:
        with pytest.raises(stripe.InvalidRequestError) as error:
            client.v1.billing.meter_events.create(params=params)
        assert error.value.http_status == 400 and (param is None or error.value.param == param)
    assert len(fake.meter_events) == 3


def test_an_idempotency_key_replays_the_first_answer(fake: FakeStripe, client: stripe.StripeClient):
    first = client.v1.customers.create(params={"email": "a@example.com"}, options={"idempotency_key": "k1"})
    second = client.v1.customers.create(params={"email": "a@example.com"}, options={"idempotency_key": "k1"})
    assert second.id == first.id == "cus_1"
    assert second.last_response.headers["Idempotent-Replayed"] == "true"
    assert len(fake.calls("POST", "/v1/customers")) == 2
    with pytest.raises(stripe.InvalidRequestError, match="No such customer"):
        client.v1.customers.retrieve("cus_2")  # the work was done once

    with pytest.raises(stripe.IdempotencyError):  # the same key for another request
        client.v1.customers.create(params={"email": "b@example.com"}, options={"idempotency_key": "k1"})


def test_fail_next_answers_an_error_without_doing_the_work(fake: FakeStripe, client: stripe.StripeClient, meter):
    customer = client.v1.customers.create(params={}).id
    now = int(time.time())
    fake.fail_next("POST", "/v1/billing/meter_events", status=503)
    with pytest.raises(stripe.APIError) as error:
        meter_event(client, customer, 10, "job-1", now, idempotency_key="ev-job-1")
    assert error.value.http_status == 503
    assert fake.meter_events == []

    meter_event(client, customer, 10, "job-1", now, idempotency_key="ev-job-1")  # only the next request failed
    assert [e["value"] for e in fake.meter_events] == [10] and fake.duplicate_meter_events == 0


def test_fail_after_next_does_the_work_and_a_retry_with_the_same_key_succeeds(
    fake: FakeStripe, client: stripe.StripeClient, meter
):
    customer = client.v1.customers.create(params={}).id
    now = int(time.time())
    fake.fail_after_next("POST", "/v1/billing/meter_events")
    with pytest.raises(stripe.APIError):
        meter_event(client, customer, 10, "job-1", now, idempotency_key="ev-job-1")
    assert [e["identifier"] for e in fake.meter_events] == ["job-1"]  # Stripe did it; the answer was lost

    retried = meter_event(client, customer, 10, "job-1", now, idempotency_key="ev-job-1")
    assert retried.identifier == "job-1"
    assert retried.last_response.headers["Idempotent-Replayed"] == "true"
    assert len(fake.meter_events) == 1 and fake.duplicate_meter_events == 0


def test_delay_next_makes_a_client_time_out(fake: FakeStripe, meter):
    client = make_client(fake, timeout=0.5)
    customer = client.v1.customers.create(params={}).id
    now = int(time.time())
    fake.delay_next("POST", "/v1/billing/meter_events", seconds=5)
    began = time.monotonic()
    with pytest.raises(stripe.APIConnectionError):
        meter_event(client, customer, 10, "job-1", now, idempotency_key="ev-job-1")
    assert time.monotonic() - began < 3
    # The fake did the work before sleeping, so the client cannot know; a retry with the key is safe.
    assert meter_event(client, customer, 10, "job-1", now, idempotency_key="ev-job-1").identifier == "job-1"
    assert len(fake.meter_events) == 1


def test_checkout_subscription_and_invoices(fake: FakeStripe, client: stripe.StripeClient, meter):
    client.v1.products.create(params={"id": "tts_pro", "name": "Pro"})
    base = client.v1.prices.create(
        params={
            "product": "tts_pro",
            "currency": "usd",
            "unit_amount": 2900,
            "recurring": {"interval": "month"},
            "lookup_key": "pro_monthly",
        }
    )
    usage = client.v1.prices.create(
        params={
            "product": "tts_pro",
            "currency": "usd",
            "unit_amount_decimal": "0.002",
            "recurring": {"interval": "month", "usage_type": "metered", "meter": meter.id},
        }
    )
    customer = client.v1.customers.create(params={"metadata": {"org_id": "3"}}).id
    session = client.v1.checkout.sessions.create(
        params={
            "mode": "subscription",
            "customer": customer,
            "client_reference_id": "3",
            "line_items": [{"price": base.id, "quantity": 1}, {"price": usage.id}],
            "success_url": "https://app.example/billing?ok=1",
            "cancel_url": "https://app.example/billing",
            "metadata": {"org_id": "3"},
            "subscription_data": {"metadata": {"org_id": "3"}},
        }
    )
    assert (session.status, session.url, session.subscription) == ("open", f"{fake.url}/pay/{session.id}", None)
    assert fake.calls("POST", "/v1/checkout/sessions")[0].params["line_items"][1] == {"price": usage.id}

    sub = fake.complete_checkout(session.id)
    fetched = client.v1.checkout.sessions.retrieve(session.id)
    assert (fetched.status, fetched.payment_status, fetched.subscription) == ("complete", "paid", sub["id"])
    subscription = client.v1.subscriptions.retrieve(sub["id"])
    assert subscription.status == "active" and subscription.metadata["org_id"] == "3"
    items = subscription["items"].data  # `subscription.items` is dict.items
    assert [(i.price.id, i.quantity) for i in items] == [(base.id, 1), (usage.id, None)]
    assert items[0].current_period_end == subscription.current_period_end > subscription.current_period_start

    fake.set_subscription(sub["id"], status="past_due")
    assert client.v1.subscriptions.retrieve(sub["id"]).status == "past_due"
    fake.cancel_subscription(sub["id"])
    assert client.v1.subscriptions.retrieve(sub["id"]).ended_at is not None

    older = fake.create_invoice(customer, status="paid", amount_due=2900, subscription=sub["id"])
    newer = fake.create_invoice(customer, amount_due=3100)
    listed = client.v1.invoices.list(params={"customer": customer, "limit": 5}).data
    assert [i.id for i in listed] == [newer["id"], older["id"]]
    assert listed[1].amount_paid == 2900 and listed[1].parent.subscription_details.subscription == sub["id"]
    assert listed[0].hosted_invoice_url == f"{fake.url}/invoice/{newer['id']}"

    portal = client.v1.billing_portal.sessions.create(params={"customer": customer, "return_url": "https://app/"})
    assert portal.object == "billing_portal.session" and portal.url == f"{fake.url}/portal/{portal.id}"


def test_a_signed_event_verifies_with_the_library(fake: FakeStripe):
    customer = {"id": "cus_9", "object": "customer"}
    payload, event = fake.event("customer.updated", customer)
    header = sign(payload, "whsec_right")
    verified = stripe.Webhook.construct_event(payload, header, "whsec_right")
    assert (verified.id, verified.type, verified.data.object.id) == (event["id"], "customer.updated", "cus_9")
    assert verified.api_version == API_VERSION

    with pytest.raises(stripe.SignatureVerificationError):
        stripe.Webhook.construct_event(payload, header, "whsec_wrong")
    with pytest.raises(stripe.SignatureVerificationError):  # signed too long ago
        stripe.Webhook.construct_event(payload, sign(payload, "whsec_right", int(time.time()) - 600), "whsec_right")


def test_unknown_objects_urls_and_keys(fake: FakeStripe, client: stripe.StripeClient):
    with pytest.raises(stripe.InvalidRequestError) as missing:
        client.v1.products.retrieve("prod_nope")
    assert (missing.value.http_status, missing.value.code, missing.value.param) == (404, "resource_missing", "id")

    with pytest.raises(stripe.InvalidRequestError, match="Unrecognized request URL"):
        client.v1.coupons.retrieve("c1")  # not modelled

    with pytest.raises(stripe.AuthenticationError):
        make_client(fake, api_key="pk_test_public").v1.customers.create(params={})
    assert len(fake.requests) == 3  # every request is recorded, failed ones too
