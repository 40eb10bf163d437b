"""Per-key limits that block (a monthly character cap, requests a minute), keys changed and rotated
(their counters kept), and usage alerts at 50/80/100 % of the organization's quota and of a key's
cap: a signed Standard Webhooks event to the organization's endpoint and an e-mail, once each."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from standardwebhooks.webhooks import Webhook

from accounts.models import ApiKey, AuditEvent, Membership
from billing import alerts as billing_alerts
from billing.limits import subscription_for
from billing.models import KeyQuotaPeriod, QuotaPeriod, UsageAlert
from synthesis import tasks
from synthesis.service import alerts
from synthesis.service import events as webhook_events
from tests.receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Twenty characters!!!"  # 20


def speak(client, text: str = TEXT):
    # ChatTTS: billed a character per character (Kokoro's plans weigh 0.5)
    return client.post("/audio/speech", json={"model": "chattts", "input": text, "voice": "alloy", "seed": 1})


def test_a_keys_monthly_cap_blocks_and_a_burst_cannot_overshoot_it(live_stack, owner):
    subscription = subscription_for(owner.org)
    subscription.concurrent_jobs = 5  # the burst meets the key's cap, not the plan's concurrency
    subscription.save()
    with live_stack.client(owner.key) as client:
        capped = client.post("/keys", json={"name": "capped", "monthly_character_cap": 60}).json()
    assert capped["monthly_character_cap"] == 60
    with live_stack.client(capped["key"]) as client, ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda i: speak(client, f"{TEXT[:-2]}{i:02d}"), range(5)))
    codes = sorted(a.status_code for a in answers)
    assert codes == [200, 200, 200, 429, 429], [a.text[:200] for a in answers]
    refused = next(a for a in answers if a.status_code == 429).json()["error"]
    assert refused["code"] == "insufficient_quota" and "API key's monthly character cap" in refused["message"]
    key = ApiKey.objects.get(prefix=capped["id"])
    row = KeyQuotaPeriod.objects.get(api_key=key)
    assert (row.used, row.reserved) == (60, 0)
    # The organization was charged for what was made, nothing for what the key's cap refused.
    assert QuotaPeriod.objects.get(organization=owner.org).used == 60


def test_a_keys_rate_limit_is_its_own(live_stack, owner):
    with live_stack.client(owner.key) as client:
        slow = client.post("/keys", json={"name": "slow", "requests_per_minute": 2}).json()
    with live_stack.client(slow["key"]) as client:
        answers = [client.get("/voices") for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 429]
    assert "for this API key" in answers[2].json()["error"]["message"]
    assert answers[1].headers["x-ratelimit-limit-requests"] == "2"
    with live_stack.client(owner.key) as client:
        assert client.get("/voices").status_code == 200  # the organization's window is not spent


def test_changing_and_rotating_a_key_keeps_its_id_and_counters(live_stack, owner):
    with live_stack.client(owner.key) as client:
        made = client.post("/keys", json={"name": "app", "monthly_character_cap": 1000}).json()
    with live_stack.client(made["key"]) as app:
        assert speak(app).status_code == 200
    with live_stack.client(owner.key) as client:
        changed = client.patch(
            f"/keys/{made['id']}", json={"scopes": ["speech:write"], "monthly_character_cap": 500, "name": "app 2"}
        )
        assert changed.status_code == 200, changed.text
        assert changed.json()["kind"] == "restricted" and changed.json()["monthly_character_cap"] == 500
        rotated = client.post(f"/keys/{made['id']}/rotate")
        bad = client.patch(f"/keys/{made['id']}", json={"scopes": ["root:write"]})
        empty = client.patch(f"/keys/{made['id']}", json={})
    assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
    new_raw = rotated.json()["key"]
    assert new_raw.startswith(f"tts_{made['id']}_") and new_raw != made["key"]
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "scopes"
    assert empty.status_code == 400
    with live_stack.client(made["key"]) as old:
        assert old.get("/voices").status_code == 401
    with live_stack.client(new_raw) as new:
        assert new.get("/usage").status_code == 403  # its new scopes: speech only
        assert speak(new, "Another twenty chars").status_code == 200
    assert KeyQuotaPeriod.objects.get(api_key__prefix=made["id"]).used == 40  # one row, both requests
    update = AuditEvent.objects.get(action="key.updated")
    assert update.before["monthly_character_cap"] == 1000 and update.after["monthly_character_cap"] == 500
    assert update.after["scopes"] == ["speech:write"] and update.after["name"] == "app 2"
    assert AuditEvent.objects.filter(action="key.rotated", target=f"key:{made['id']}").exists()


def test_thresholds_are_told_once_by_a_signed_event_and_an_e_mail(live_stack, settings, transactional_db):
    from tests.conftest import make_persona  # noqa: PLC0415

    persona = make_persona("Quotaco", monthly_characters=100, requests_per_minute=600)
    ada = get_user_model().objects.create_user("ada@quotaco.example", "ada@quotaco.example", "x" * 12)
    Membership.objects.create(organization=persona.org, user=ada, role="owner")
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True  # this process delivers too, to a loopback receiver
    receiver = Receiver(failures=0)
    try:
        with live_stack.client(persona.key) as client:
            bad = client.put("/webhooks/endpoint", json={"url": "not a url"})
            assert bad.status_code == 400 and bad.json()["error"]["param"] == "url"
            set_url = client.put("/webhooks/endpoint", json={"url": receiver.url})
            assert set_url.status_code == 200 and client.get("/webhooks/endpoint").json() == {"url": receiver.url}
            capped = client.post("/keys", json={"name": "capped", "monthly_character_cap": 40}).json()
            assert speak(client, "Thirty characters, give or ta!").status_code == 200  # 30 of 100
        assert billing_alerts.due() == []  # under 50 %
        with live_stack.client(capped["key"]) as client:
            assert speak(client).status_code == 200  # the organization 50 of 100, the key 20 of 40
            assert speak(client, "Another twenty chars").status_code == 200  # 70 and the key 40 of 40
        due = billing_alerts.due()
        told = sorted((a.subject, a.threshold) for a in due)
        assert told == [("key:" + capped["id"], 50), ("key:" + capped["id"], 80), ("key:" + capped["id"], 100)] + [
            ("organization", 50)
        ]
        assert billing_alerts.due() == []  # once per threshold
        for alert in due:  # to the endpoint set above (the live worker delivers), and by e-mail
            assert webhook_events.publish_alert(alert.pk) == 1
            assert alerts.email(alert.pk) == 1
        receiver.wait(4)
    finally:
        receiver.server.shutdown()
    secret = type(persona.org).objects.get(pk=persona.org.pk).webhook_secret
    events = []
    for headers, body in receiver.deliveries:
        assert Webhook(secret).verify(body, headers)
        events.append(json.loads(body))
    org_event = next(e for e in events if e["data"]["subject"] == "organization")
    assert org_event["type"] == "usage.threshold_reached"
    assert org_event["data"]["threshold_percent"] == 50 and org_event["data"]["character_limit"] == 100
    assert {m.to[0] for m in mail.outbox} == {"ada@quotaco.example"} and len(mail.outbox) == 4
    assert any("100% of Quotaco's API key" in m.subject for m in mail.outbox)
    # The beat task finds nothing new, and enqueues nothing.
    assert tasks.check_usage_alerts() == 0
    assert UsageAlert.objects.filter(organization=persona.org).count() == 4


def test_a_rotation_with_a_grace_period_keeps_the_old_secret_working_until_then(live_stack, owner):
    """Before: the old secret was refused at once, so every client had to switch in the same second."""
    with live_stack.client(owner.key) as client:
        made = client.post("/keys", json={"name": "rolling", "scopes": ["voices:read"]}).json()
        unknown = client.post(f"/keys/{made['id']}/rotate", json={"grace": 60})
        too_long = client.post(f"/keys/{made['id']}/rotate", json={"grace_seconds": 8 * 24 * 3600})
        rotated = client.post(f"/keys/{made['id']}/rotate", json={"grace_seconds": 3600})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "grace"
    assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "grace_seconds"
    assert rotated.status_code == 200 and rotated.json()["previous_valid_until"] is not None
    second = rotated.json()["key"]
    for raw in (made["key"], second):  # both, for the hour
        with live_stack.client(raw) as app:
            assert app.get("/voices").status_code == 200
    with live_stack.client(owner.key) as client:
        third = client.post(f"/keys/{made['id']}/rotate").json()  # no grace: only the newest works
    assert third["previous_valid_until"] is None
    for raw, status in ((made["key"], 401), (second, 401), (third["key"], 200)):
        with live_stack.client(raw) as app:
            assert app.get("/voices").status_code == status
    event = AuditEvent.objects.filter(action="key.rotated", target=f"key:{made['id']}").order_by("id").first()
    assert event.after["previous_valid_until"] == rotated.json()["previous_valid_until"].replace("Z", "+00:00")
