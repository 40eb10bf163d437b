"""Webhook endpoints through the API (/v1/webhooks/endpoints, /v1/webhooks/deliveries): several per
organization, each receiving the event types it lists, signed with its own secret (rotated with a
day's grace), disabled ones sent nothing; every delivery logged with its bodies (bounded, secrets
masked) and attempts, sent again by Redeliver; another organization's ids are 404; the deprecated
single-endpoint route keeps working over the first endpoint."""

from __future__ import annotations

import json
import time
from datetime import date
from importlib import import_module

import pytest
from django.test import Client
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from billing.models import UsageAlert, UsageEvent
from synthesis import tasks
from synthesis.models import WebhookDelivery, WebhookEndpoint
from synthesis.service import closing, delivery_share, events
from synthesis.service.callbacks import open_delivery
from tests.factories import own_plan
from tests.receiver import Receiver
from tts_saas.errors import ApiError

ENDPOINTS = "/v1/webhooks/endpoints"


def api(key: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def add(key: str, url: str, events_: list[str], **fields) -> dict:
    response = api(key).post(ENDPOINTS, {"url": url, "events": events_, **fields}, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()


def alert_for(org, threshold: int = 80) -> UsageAlert:
    return UsageAlert.objects.create(
        organization=org,
        subject="organization",
        threshold=threshold,
        used=80,
        limit=100,
        period_start=date(2026, 12, 1),
    )


def deliver_published(org) -> list[WebhookDelivery]:
    """What the light worker does for each queued delivery: one attempt each."""
    rows = list(WebhookDelivery.objects.filter(organization=org, status__isnull=True, attempts=[]))
    return [events.deliver(row.pk) for row in rows]


@pytest.fixture
def receivers(settings, monkeypatch):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True  # the receivers listen on loopback
    # The test plays the light worker (deliver_published, events.deliver): nothing goes on the queue,
    # where a worker of the suite's shared stack would send each delivery a second time.
    monkeypatch.setattr(events, "send", lambda *args, **kwargs: None)
    made = [
        Receiver(failures=0, answer=b'{"ok": true, "echo": "whsec_c2VjcmV0c2VjcmV0", "pad": "' + b"x" * 6000 + b'"}'),
        Receiver(failures=0),
    ]
    yield made
    for receiver in made:
        receiver.close()


def test_endpoints_are_created_listed_changed_and_deleted(owner, receivers):
    usage = add(owner.key, receivers[0].url, ["usage.threshold_reached"], description="Billing alerts")
    assert usage["secret"].startswith("whsec_") and usage["enabled"] is True
    jobs = add(owner.key, receivers[1].url, ["job.succeeded", "job.failed"])
    assert jobs["secret"] != usage["secret"]

    listed = api(owner.key).get(ENDPOINTS).json()["data"]
    assert [(e["url"], e["events"]) for e in listed] == [
        (receivers[0].url, ["usage.threshold_reached"]),
        (receivers[1].url, ["job.failed", "job.succeeded"]),
    ]
    assert all("secret" not in e for e in listed)  # the list never carries secrets
    one = api(owner.key).get(f"{ENDPOINTS}/{jobs['id']}")
    assert one.json()["secret"] == jobs["secret"] and one["Cache-Control"] == "no-store"

    changed = api(owner.key).patch(
        f"{ENDPOINTS}/{jobs['id']}", {"events": ["job.expired"], "enabled": False}, content_type="application/json"
    )
    assert changed.status_code == 200 and changed.json()["events"] == ["job.expired"]
    assert changed.json()["enabled"] is False
    unknown = api(owner.key).patch(
        f"{ENDPOINTS}/{jobs['id']}", {"events": ["job.exploded"]}, content_type="application/json"
    )
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "events[0]"

    assert api(owner.key).delete(f"{ENDPOINTS}/{jobs['id']}").json()["deleted"] is True
    assert [e["id"] for e in api(owner.key).get(ENDPOINTS).json()["data"]] == [usage["id"]]


def test_a_private_address_is_refused_naming_the_operators_switch(owner, settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    response = api(owner.key).post(
        ENDPOINTS, {"url": "http://127.0.0.1:9/hook", "events": ["job.succeeded"]}, content_type="application/json"
    )
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "url must point at a public address" in message and "TTS_CALLBACK_ALLOW_PRIVATE" in message


def test_each_endpoint_gets_its_events_signed_with_its_own_secret_and_disabled_ones_nothing(owner, receivers):
    usage = add(owner.key, receivers[0].url, ["usage.threshold_reached"])
    jobs = add(owner.key, receivers[1].url, ["job.succeeded"])
    disabled = add(owner.key, receivers[1].url, ["usage.threshold_reached"], enabled=False)

    assert events.publish_alert(alert_for(owner.org).pk) == 1  # only the enabled endpoint that receives it
    sent = deliver_published(owner.org)
    assert [row.delivered for row in sent] == [True]
    assert len(receivers[0].deliveries) == 1 and receivers[1].deliveries == []
    headers, body = receivers[0].deliveries[0]
    headers = {name.lower(): value for name, value in headers.items()}
    assert json.loads(Webhook(usage["secret"]).verify(body, headers) and body)["type"] == "usage.threshold_reached"
    with pytest.raises(WebhookVerificationError):
        Webhook(jobs["secret"]).verify(body, headers)  # another endpoint's secret does not verify it
    assert not WebhookDelivery.objects.filter(endpoint_id=disabled["id"]).exists()


def test_a_rotated_secret_signs_with_both_for_the_grace_period(owner, receivers):
    endpoint = add(owner.key, receivers[0].url, ["usage.threshold_reached"])
    rotated = api(owner.key).post(f"{ENDPOINTS}/{endpoint['id']}/rotate_secret").json()
    assert rotated["secret"] != endpoint["secret"] and rotated["previous_secret_valid_until"]
    events.publish_alert(alert_for(owner.org).pk)
    deliver_published(owner.org)
    headers, body = receivers[0].deliveries[0]
    headers = {name.lower(): value for name, value in headers.items()}
    for secret in (endpoint["secret"], rotated["secret"]):  # receivers holding either verify it
        Webhook(secret).verify(body, headers)


def test_the_delivery_log_keeps_bounded_masked_bodies_and_attempts_and_redelivers_once(owner, receivers):
    endpoint = add(owner.key, receivers[0].url, ["usage.threshold_reached"])
    events.publish_alert(alert_for(owner.org).pk)
    deliver_published(owner.org)

    log = api(owner.key).get(f"{ENDPOINTS}/{endpoint['id']}/deliveries").json()["data"]
    assert len(log) == 1
    delivery = log[0]
    assert delivery["event_type"] == "usage.threshold_reached" and delivery["status"] == 200
    assert json.loads(delivery["request_body"])["data"]["threshold_percent"] == 80
    answer = delivery["response_body"]
    assert 4000 < len(answer) <= 4096 and not answer.endswith('"}')  # the receiver answered 6 KB: cut
    assert "whsec_••••••" in delivery["response_body"] and "c2VjcmV0" not in delivery["response_body"]
    assert [attempt["status"] for attempt in delivery["attempts"]] == [200]

    again = api(owner.key).post(f"/v1/webhooks/deliveries/{delivery['id']}/redeliver")
    assert again.status_code == 202 and again.json()["next_attempt_at"]
    twice = api(owner.key).post(f"/v1/webhooks/deliveries/{delivery['id']}/redeliver")
    assert twice.status_code == 409  # one redelivery at a time
    events.deliver(delivery["id"])  # the worker's attempt
    after = api(owner.key).get(f"/v1/webhooks/deliveries/{delivery['id']}").json()
    assert [attempt["status"] for attempt in after["attempts"]] == [200, 200]  # the same delivery, two attempts
    first, second = (headers for headers, _ in receivers[0].deliveries)
    assert first["webhook-id"] == second["webhook-id"]


def test_another_organizations_endpoints_and_deliveries_are_404(owner, outsider, receivers, member):
    endpoint = add(owner.key, receivers[0].url, ["usage.threshold_reached"])
    events.publish_alert(alert_for(owner.org).pk)
    delivery = deliver_published(owner.org)[0]
    stranger = api(outsider.key)
    for response in (
        stranger.get(f"{ENDPOINTS}/{endpoint['id']}"),
        stranger.patch(f"{ENDPOINTS}/{endpoint['id']}", {"enabled": False}, content_type="application/json"),
        stranger.delete(f"{ENDPOINTS}/{endpoint['id']}"),
        stranger.post(f"{ENDPOINTS}/{endpoint['id']}/rotate_secret"),
        stranger.get(f"{ENDPOINTS}/{endpoint['id']}/deliveries"),
        stranger.get(f"/v1/webhooks/deliveries/{delivery.pk}"),
        stranger.post(f"/v1/webhooks/deliveries/{delivery.pk}/redeliver"),
    ):
        assert response.status_code == 404, response.content
    assert stranger.get(ENDPOINTS).json()["data"] == []
    assert api(member.key).get(ENDPOINTS).status_code == 403  # a standard key has no webhooks scope
    assert WebhookEndpoint.objects.get(pk=endpoint["id"]).enabled


def test_the_deprecated_single_endpoint_route_works_over_the_first_endpoint(owner, receivers):
    put = api(owner.key).put("/v1/webhooks/endpoint", {"url": receivers[0].url}, content_type="application/json")
    assert put.status_code == 200
    listed = api(owner.key).get(ENDPOINTS).json()["data"]
    assert [(e["url"], e["events"]) for e in listed] == [(receivers[0].url, ["usage.threshold_reached"])]
    assert api(owner.key).get("/v1/webhooks/endpoint").json() == {"url": receivers[0].url}
    # Signed with the organization's secret, as the one endpoint was.
    secret = api(owner.key).get("/v1/webhooks/secret").json()["secret"]
    assert api(owner.key).get(f"{ENDPOINTS}/{listed[0]['id']}").json()["secret"] == secret
    api(owner.key).put("/v1/webhooks/endpoint", {"url": ""}, content_type="application/json")
    assert api(owner.key).get(ENDPOINTS).json()["data"] == []


def test_closing_the_organization_deletes_its_endpoints_and_their_secrets(owner, receivers):
    endpoint = add(owner.key, receivers[0].url, ["usage.threshold_reached"])
    UsageEvent.objects.create(organization=owner.org, characters=10, model="chattts", voice="alloy")  # kept: the ledger
    assert closing.close_organization(owner.org, None) is False  # closed, not deleted
    assert not WebhookEndpoint.objects.filter(pk=endpoint["id"]).exists()
    assert events.publish_alert(alert_for(owner.org).pk) == 0  # nothing is sent anywhere


@pytest.mark.django_db
def test_an_existing_event_endpoint_becomes_one_endpoint_with_the_same_secret():
    """The data migration (synthesis 0014) on an organization of before: its endpoint keeps receiving
    usage alerts, verifiable with the secret its receiver holds; its log entries become deliveries."""
    from django.db import connection  # noqa: PLC0415
    from django.db.migrations.loader import MigrationLoader  # noqa: PLC0415

    from accounts.models import Organization  # noqa: PLC0415

    migration = import_module("synthesis.migrations.0014_webhook_endpoints")
    org = Organization.objects.create(name="Before", slug="before", webhook_url="https://hooks.example.com/tts")
    old = WebhookDelivery.objects.create(
        organization=org,
        event="usage_alert",
        event_type="usage.threshold_reached",
        message_id="msg_usage_1",
        url=org.webhook_url,
        status=500,
        duration_ms=12,
    )
    apps = MigrationLoader(connection).project_state(("synthesis", "0014_webhook_endpoints")).apps
    migration.endpoints_from_organizations(apps, None)
    (endpoint,) = WebhookEndpoint.objects.filter(organization=org)
    assert (endpoint.url, endpoint.events, endpoint.enabled) == (org.webhook_url, ["usage.threshold_reached"], True)
    assert endpoint.signing_secrets() == [org.webhook_secret]
    old.refresh_from_db()
    assert old.endpoint_id == endpoint.pk and [a["status"] for a in old.attempts] == [500]
    # It was logged without its body: sent again it would be an empty, validly signed message.
    with pytest.raises(ApiError) as refused:
        events.redeliver(old)
    assert refused.value.status == 409 and "body is unknown" in refused.value.message
    # Found again by a retry of the same message, it takes that message's body.
    reused = open_delivery(
        org, org.webhook_url, {"type": "usage.threshold_reached"}, "msg_usage_1", "usage_alert", endpoint=endpoint
    )
    assert reused.pk == old.pk
    old.refresh_from_db()
    assert json.loads(old.request_body) == {"type": "usage.threshold_reached"}


def test_a_disabled_endpoint_gets_no_test_event_and_a_deleted_ones_test_says_it_was_deleted(owner, receivers):
    # The README: a disabled endpoint is sent nothing. Its Test button/route said otherwise.
    disabled = add(owner.key, receivers[0].url, ["usage.threshold_reached"], enabled=False)
    refused = api(owner.key).post(f"{ENDPOINTS}/{disabled['id']}/test")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "endpoint_disabled"
    assert "disabled" in refused.json()["error"]["message"] and receivers[0].deliveries == []
    assert not WebhookDelivery.objects.filter(endpoint_id=disabled["id"]).exists()
    # A test delivery of an endpoint deleted since: redelivering it says so (it said "a typed URL").
    live = add(owner.key, receivers[1].url, ["usage.threshold_reached"])
    tested = api(owner.key).post(f"{ENDPOINTS}/{live['id']}/test").json()
    assert api(owner.key).delete(f"{ENDPOINTS}/{live['id']}").status_code in (200, 204)
    again = api(owner.key).post(f"/v1/webhooks/deliveries/{tested['id']}/redeliver")
    assert again.status_code == 409 and again.json()["error"]["message"] == "Its endpoint was deleted."


def test_an_organization_keeps_at_most_its_plans_endpoints_within_the_deployments_ceiling(owner, receivers, settings):
    # 100 in a row were accepted: each event makes a delivery per endpoint on the queue every tenant shares.
    own_plan(owner.org, "three-endpoints", max_webhook_endpoints=3)
    for i in range(3):
        add(owner.key, f"{receivers[0].url}?n={i}", ["job.succeeded"])
    refused = api(owner.key).post(
        ENDPOINTS, {"url": receivers[0].url, "events": ["job.succeeded"]}, content_type="application/json"
    )
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["code"] == "webhook_endpoint_limit"
    assert "may keep 3 webhook endpoints" in error["message"]
    assert WebhookEndpoint.objects.filter(organization=owner.org).count() == 3
    settings.TTS_MAX_WEBHOOK_ENDPOINTS = 2  # the operator's ceiling wins over a plan's larger number
    first = WebhookEndpoint.objects.filter(organization=owner.org).first()
    assert api(owner.key).delete(f"{ENDPOINTS}/{first.pk}").status_code in (200, 204)
    again = api(owner.key).post(
        ENDPOINTS, {"url": receivers[0].url, "events": ["job.succeeded"]}, content_type="application/json"
    )
    assert again.status_code == 400 and "may keep 2 webhook endpoints" in again.json()["error"]["message"]


def test_one_organizations_deliveries_take_turns_while_anothers_run_at_once(owner, outsider, receivers, monkeypatch):
    # The light worker's queue is every tenant's: one organization's attempts (each up to 10 s at a
    # receiver that never answers) run one at a time; the others' are not held behind them.
    mine = add(owner.key, receivers[0].url, ["usage.threshold_reached"])
    theirs = add(outsider.key, receivers[1].url, ["usage.threshold_reached"])
    events.publish_alert(alert_for(owner.org).pk)
    events.publish_alert(alert_for(outsider.org).pk)
    my_delivery = WebhookDelivery.objects.get(endpoint_id=mine["id"])
    their_delivery = WebhookDelivery.objects.get(endpoint_id=theirs["id"])
    requeued = []
    monkeypatch.setattr(tasks.deliver_event, "apply_async", lambda *args, **kwargs: requeued.append((args, kwargs)))
    with delivery_share.slot(owner.org.pk) as held:  # an attempt of the owner's is running
        assert held
        tasks.deliver_event.apply(args=(str(my_delivery.pk),), retries=2)
        tasks.deliver_event.apply(args=(str(their_delivery.pk),))
    assert receivers[0].deliveries == [] and len(receivers[1].deliveries) == 1  # the other's went at once
    ((args, kwargs),) = requeued  # the owner's waits its turn on the queue, its attempts unspent
    assert list(args[0]) == [str(my_delivery.pk)]
    assert kwargs["retries"] == 2 and kwargs["queue"] == "default" and 0 < kwargs["countdown"] <= 2
    my_delivery.refresh_from_db()
    assert my_delivery.attempts == []
    tasks.deliver_event.apply(args=(str(my_delivery.pk),))  # its slot free: sent
    assert len(receivers[0].deliveries) == 1


def test_a_slot_left_by_a_killed_worker_lapses(redis_client):
    key = delivery_share.KEY.format(987_654)
    redis_client.delete(key)
    redis_client.zadd(key, {"killed": time.time() - delivery_share.SLOT_SECONDS - 1})
    with delivery_share.slot(987_654) as now:
        assert now
        with delivery_share.slot(987_654) as second:
            assert not second  # one at a time
    assert redis_client.zcard(key) == 0
