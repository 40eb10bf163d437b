"""Job callback signatures are Standard Webhooks': what `signature_headers` makes is checked here
with the official `standardwebhooks` library, as a receiver would, never with our own code. During
a rotation's grace period receivers holding either secret verify; afterwards only the new one."""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from accounts import actions
from accounts.models import Organization
from synthesis.models import Job
from synthesis.service.callbacks import message_id_for, signature_headers

BODY = b'{"type":"job.succeeded","job":{"id":"j1","status":"succeeded"}}'
MSG_ID = "msg_0123456789abcdef0123456789abcdef"


@pytest.fixture
def org(db) -> Organization:
    return Organization.objects.create(name="Signing Co", slug="signing-co")


def test_a_new_secret_has_the_specifications_format(org):
    prefix, _, key = org.webhook_secret.partition("_")
    assert prefix == "whsec"
    assert len(base64.b64decode(key, validate=True)) == 32


def test_the_headers_verify_with_the_standard_webhooks_library(org):
    headers = signature_headers(org, MSG_ID, BODY)
    assert set(headers) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert headers["webhook-id"] == MSG_ID
    assert abs(int(headers["webhook-timestamp"]) - timezone.now().timestamp()) < 5
    assert Webhook(org.webhook_secret).verify(BODY, headers) == {
        "type": "job.succeeded",
        "job": {"id": "j1", "status": "succeeded"},
    }


def test_the_signature_is_the_specifications_hmac_of_id_timestamp_and_body(org):
    headers = signature_headers(org, MSG_ID, BODY)
    key = base64.b64decode(org.webhook_secret.removeprefix("whsec_"))
    signed = f"{MSG_ID}.{headers['webhook-timestamp']}.".encode() + BODY
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert headers["webhook-signature"] == f"v1,{expected}"


def test_a_secret_of_the_older_format_still_signs_verifiably(org):
    org.webhook_secret = "whsec_" + "Ab3" * 10 + "xY"  # 32 letters and digits, as secrets were made
    assert Webhook(org.webhook_secret).verify(BODY, signature_headers(org, MSG_ID, BODY))


@pytest.mark.parametrize("tampered", [BODY + b" ", BODY.replace(b"succeeded", b"failed", 1), b"{}"])
def test_a_tampered_body_is_rejected(org, tampered):
    with pytest.raises(WebhookVerificationError):
        Webhook(org.webhook_secret).verify(tampered, signature_headers(org, MSG_ID, BODY))


def test_another_secret_is_rejected(org):
    other = Organization.objects.create(name="Other Co", slug="other-co")
    with pytest.raises(WebhookVerificationError):
        Webhook(other.webhook_secret).verify(BODY, signature_headers(org, MSG_ID, BODY))


def test_another_message_id_is_rejected(org):
    headers = {**signature_headers(org, MSG_ID, BODY), "webhook-id": "msg_someone_else"}
    with pytest.raises(WebhookVerificationError):
        Webhook(org.webhook_secret).verify(BODY, headers)


@pytest.mark.parametrize("age", [timedelta(minutes=10), -timedelta(minutes=10)])
def test_a_stale_or_future_timestamp_is_rejected(org, age):
    headers = signature_headers(org, MSG_ID, BODY, now=timezone.now() - age)
    with pytest.raises(WebhookVerificationError):
        Webhook(org.webhook_secret).verify(BODY, headers)


def test_during_the_grace_period_receivers_with_the_old_or_the_new_secret_both_verify(org):
    old = org.webhook_secret
    new = actions.rotate_webhook_secret(org)
    assert new != old and new.startswith("whsec_")
    org = Organization.objects.get(pk=org.pk)  # as a delivery reads it
    headers = signature_headers(org, MSG_ID, BODY)
    assert len(headers["webhook-signature"].split(" ")) == 2
    assert Webhook(old).verify(BODY, headers)
    assert Webhook(new).verify(BODY, headers)


def test_after_the_grace_period_only_the_new_secret_verifies(org):
    old = org.webhook_secret
    new = actions.rotate_webhook_secret(org)
    Organization.objects.filter(pk=org.pk).update(webhook_secret_rotated_at=timezone.now() - timedelta(hours=24))
    org = Organization.objects.get(pk=org.pk)
    headers = signature_headers(org, MSG_ID, BODY)
    assert len(headers["webhook-signature"].split(" ")) == 1
    assert Webhook(new).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(old).verify(BODY, headers)


def test_a_second_rotation_keeps_only_the_secret_it_replaces(org):
    first = org.webhook_secret
    second = actions.rotate_webhook_secret(org)
    third = actions.rotate_webhook_secret(org)
    headers = signature_headers(Organization.objects.get(pk=org.pk), MSG_ID, BODY)
    assert Webhook(second).verify(BODY, headers) and Webhook(third).verify(BODY, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(first).verify(BODY, headers)


def test_the_message_id_is_the_jobs_so_retries_share_it():
    job_id = uuid.uuid4()
    assert message_id_for(Job(id=job_id)) == message_id_for(Job(id=job_id)) == f"msg_{job_id.hex}"
    assert message_id_for(Job(id=uuid.uuid4())) != message_id_for(Job(id=job_id))
