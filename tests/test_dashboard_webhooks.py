"""The Webhooks page: the delivery log of job callbacks (one delivery per job with every attempt
written by the real worker, a failing receiver retried), a delivery sent again from the page (the
same webhook-id), test events sent at once and signed with the organization's callback secret,
their refusals, and another organization's deliveries (404)."""

from __future__ import annotations

import html
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from accounts.models import Membership, Organization
from synthesis.models import Job, WebhookDelivery, WebhookEndpoint
from synthesis.service import deliveries
from tests.factories import make_job
from tests.receiver import Receiver
from tests.test_dashboard_team import messages_of, text
from tests.waiting import wait_until


def signed_in(org: Organization, email: str = "hooks@example.com", role: str = "member") -> Client:
    user = get_user_model().objects.create_user(email, email, "correct horse battery")
    Membership.objects.create(user=user, organization=org, role=role)
    client = Client()
    client.force_login(user)
    return client


def rows(response) -> list[str]:
    """The delivery log's rows as a user reads them."""
    body = re.search(r'<table id="deliveries">.*?</table>', response.content.decode(), re.S).group(0)
    return [text_of(row) for row in re.findall(r"<tr data-event.*?</tr>", body, re.S)]


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def test_job_callbacks_are_logged_and_a_job_is_redelivered_from_the_page(live_stack, owner, outsider):
    receiver, endpoint_receiver = Receiver(failures=1), Receiver(failures=0)
    try:
        with live_stack.client(owner.key) as api:
            ends = {"url": endpoint_receiver.url, "events": ["job.succeeded"]}
            endpoint = api.post("/webhooks/endpoints", json=ends).json()
            api.post("/webhooks/endpoints", json={**ends, "events": ["usage.threshold_reached", "job.failed"]})
            job = api.post("/jobs", json={"input": "Call me back.", "seed": 3, "callback_url": receiver.url}).json()
            receiver.wait(2)
            endpoint_receiver.wait(1)
            callback = WebhookDelivery.objects.filter(job_id=job["id"], event="job")
            wait_until(lambda: len(callback.get().attempts) >= 2, 30, "attempts logged")
        page = signed_in(owner.org)
        assert len(rows(page.get("/dashboard/webhooks"))) == 2  # the callback and the endpoint's event
        listed = rows(page.get("/dashboard/webhooks", {"event": "job"}))
        assert len(listed) == 1  # one delivery, its two attempts in it
        assert "✓ HTTP 200" in listed[0] and "2 attempts" in listed[0]
        assert "job.succeeded" in listed[0] and job["id"] in listed[0] and receiver.url in listed[0]
        assert rows(page.get("/dashboard/webhooks", {"outcome": "failed"})) == []  # delivered in the end
        detail = page.get("/dashboard/webhooks").content.decode()
        assert "HTTP 500" in detail and html.escape(f'"id":"{job["id"]}"', quote=True) in detail  # attempts, body

        delivery = callback.get()
        answer = page.post(f"/dashboard/webhooks/deliveries/{delivery.pk}/redeliver", follow=True)
        assert "Being sent again" in messages_of(answer)
        again = page.post(f"/dashboard/webhooks/deliveries/{delivery.pk}/redeliver", follow=True)
        assert "being sent again already" in messages_of(again)  # one redelivery at a time
        receiver.wait(3)
        wait_until(lambda: len(callback.get().attempts) >= 3, 30, "the redelivery logged")
        listed = rows(page.get("/dashboard/webhooks", {"job": job["id"], "event": "job"}))
        assert len(listed) == 1 and "3 attempts" in listed[0]
        assert len({headers["webhook-id"] for headers, _ in receiver.deliveries}) == 1  # the same message
        assert job_audio_url(receiver) == f"{live_stack.base_url}/v1/jobs/{job['id']}/audio"  # absolute
        # The endpoint receiving job.succeeded got the job's end, signed with its own secret; the other nothing.
        assert len(endpoint_receiver.deliveries) == 1
        headers, body = endpoint_receiver.deliveries[0]
        event = Webhook(endpoint["secret"]).verify(body, headers)
        assert event["type"] == "job.succeeded" and event["job"]["id"] == job["id"]

        # Another organization's member neither sees nor redelivers it.
        stranger = signed_in(outsider.org, "stranger@example.com", role="owner")
        assert rows(stranger.get("/dashboard/webhooks")) == []
        assert stranger.post(f"/dashboard/webhooks/deliveries/{delivery.pk}/redeliver").status_code == 404
        assert len(receiver.deliveries) == 3
    finally:
        receiver.close()
        endpoint_receiver.close()


def job_audio_url(receiver: Receiver) -> str:
    return json.loads(receiver.deliveries[-1][1])["job"]["audio_url"]


@pytest.mark.django_db
def test_a_test_event_is_signed_sent_at_once_and_logged(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    org = Organization.objects.create(name="Hooks Inc", slug="hooks-inc")
    page = signed_in(org)
    good, failing = Receiver(failures=0), Receiver(failures=5)
    try:
        answer = page.post("/dashboard/webhooks/test", {"url": good.url}, follow=True)
        assert re.search(r"Test event to \S+: HTTP 200 in \d+ ms\. Delivered\.", messages_of(answer))
        headers, body = good.deliveries[0]
        event = Webhook(org.webhook_secret).verify(body, headers)
        assert event["type"] == "test" and event["data"]["organization"] == "Hooks Inc"
        assert headers["webhook-id"].startswith("msg_test_")

        answer = page.post("/dashboard/webhooks/test", {"url": failing.url}, follow=True)
        assert "HTTP 500" in messages_of(answer) and "Not delivered" in messages_of(answer)
        assert len(failing.deliveries) == 1  # a test event is not retried
    finally:
        good.close()
        failing.close()
    listed = rows(page.get("/dashboard/webhooks", {"event": "test"}))
    assert len(listed) == 2 and "✗ HTTP 500" in listed[0] and "✓ HTTP 200" in listed[1]


@pytest.mark.django_db
def test_private_or_bad_urls_are_refused_and_credentials_never_shown(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    org = Organization.objects.create(name="Hooks Two", slug="hooks-two")
    page = signed_in(org, role="admin")
    answer = page.post("/dashboard/webhooks/test", {"url": ""}, follow=True)
    assert "Give a URL" in messages_of(answer)
    for url in ("http://127.0.0.1:9/hook", "http://169.254.169.254/latest", "ftp://example.com/x"):
        answer = page.post("/dashboard/webhooks/test", {"url": url}, follow=True)
        assert "The URL" in messages_of(answer), url
        assert 'value="' + url + '"' in answer.content.decode()  # kept in the field to correct
    private = page.post("/dashboard/webhooks/test", {"url": "http://127.0.0.1:9/hook"}, follow=True)
    assert "TTS_CALLBACK_ALLOW_PRIVATE=1" in messages_of(private)  # the operator's switch, named
    assert not WebhookDelivery.objects.filter(organization=org).exists()

    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    receiver = Receiver(failures=0)
    try:
        secret_url = receiver.url.replace("http://", "http://user:s3cret@") + "?token=abc"
        answer = page.post("/dashboard/webhooks/test", {"url": secret_url})
        assert answer["Location"] == "/dashboard/webhooks"  # the URL never goes into the address bar
        assert len(receiver.deliveries) == 1
        shown = page.get("/dashboard/webhooks").content.decode()
        assert "s3cret" not in shown and receiver.url + "?token=abc" in html.unescape(shown)
    finally:
        receiver.close()


def text_of_page(client) -> str:
    return client.get("/dashboard/webhooks").content.decode()


@pytest.mark.django_db
def test_test_events_are_throttled_per_user(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    org = Organization.objects.create(name="Hooks Three", slug="hooks-three")
    page = signed_in(org)
    statuses = [page.post("/dashboard/webhooks/test", {"url": "http://127.0.0.1:9/"}).status_code for _ in range(11)]
    assert statuses[:10] == [302] * 10 and statuses[10] == 429


@pytest.mark.django_db
def test_a_callback_of_a_job_not_ended_or_a_typed_test_event_is_not_redelivered():
    org = Organization.objects.create(name="Hooks Four", slug="hooks-four")
    page = signed_in(org)
    running = make_job(org, status=Job.Status.RUNNING, callback_url="https://example.com/hook")
    common = {"organization": org, "url": "https://example.com/hook", "status": 500}
    callback = WebhookDelivery.objects.create(
        event="job", event_type="job.running", job=running, message_id="m", **common
    )
    test = WebhookDelivery.objects.create(event="test", event_type="test", message_id="msg_test_1", **common)
    answer = page.post(f"/dashboard/webhooks/deliveries/{callback.pk}/redeliver", follow=True)
    assert "has not ended" in messages_of(answer)
    answer = page.post(f"/dashboard/webhooks/deliveries/{test.pk}/redeliver", follow=True)
    assert "send another" in messages_of(answer)
    assert page.post("/dashboard/webhooks/deliveries/999999/redeliver").status_code == 404
    assert "Send a test event" in text(page.get("/dashboard/webhooks"))


@pytest.mark.django_db
def test_old_test_and_alert_entries_are_deleted_job_entries_stay_with_their_job(settings):
    org = Organization.objects.create(name="Hooks Five", slug="hooks-five")
    job = make_job(org, status=Job.Status.SUCCEEDED, callback_url="https://example.com/hook")
    old = timezone.now() - timedelta(days=settings.TTS_WEBHOOK_LOG_DAYS + 1)
    common = {"organization": org, "message_id": "msg_x", "url": "https://example.com/hook", "at": old, "status": 200}
    WebhookDelivery.objects.create(event="test", event_type="test", **common)
    WebhookDelivery.objects.create(event="job", event_type="job.succeeded", job=job, **common)
    assert deliveries.delete_old() == 1
    assert list(WebhookDelivery.objects.values_list("event", flat=True)) == ["job"]
    assert json.loads(json.dumps(deliveries.test_event(org)))["type"] == "test"


@pytest.mark.django_db
def test_an_endpoints_page_is_its_organizations_and_its_secret_the_admins(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True  # URLs parsed, not looked up (no DNS here)
    org = Organization.objects.create(name="Hooks Six", slug="hooks-six")
    other = Organization.objects.create(name="Hooks Seven", slug="hooks-seven")
    endpoint = WebhookEndpoint.objects.create(organization=org, url="https://example.com/hook", events=["job.failed"])
    admin, member = signed_in(org, "admin6@example.com", role="admin"), signed_in(org, "member6@example.com")
    stranger = signed_in(other, "stranger6@example.com", role="owner")
    page_url = f"/dashboard/webhooks/endpoints/{endpoint.pk}"
    assert endpoint.secret in admin.get(page_url).content.decode()
    seen = member.get(page_url)
    assert seen.status_code == 200 and endpoint.secret not in seen.content.decode()
    assert "https://example.com/hook" not in text(member.get("/dashboard/webhooks"))  # the URL is the admins'
    assert member.post(f"{page_url}/rotate").status_code == 403
    assert member.post(page_url, {"url": "https://evil.example/", "events": ["job.failed"]}).status_code == 403
    assert stranger.get(page_url).status_code == 404
    assert stranger.post(f"{page_url}/delete").status_code == 404
    assert WebhookEndpoint.objects.get(pk=endpoint.pk).url == "https://example.com/hook"
    refused = admin.post(
        "/dashboard/webhooks/endpoints", {"url": "https://example.com/x", "description": "mine"}, follow=True
    )
    # Before: one error at a time in a banner, the URL and description cleared. Now every error at its
    # field, in the form as it was typed.
    shown = refused.content.decode()
    assert refused.status_code == 400 and not messages_of(refused)
    assert re.search(r'id="id_events_error">This field is required\.', shown), shown
    assert (
        'value="https://example.com/x"' in shown
        and 'value="mine"' in shown
        and '<details id="add-endpoint" open>' in shown
    )
    assert WebhookEndpoint.objects.filter(organization=org).count() == 1
    saved = admin.post(page_url, {"url": "https://example.com/v2", "events": ["job.failed", "job.succeeded"]})
    assert saved.status_code == 302
    endpoint.refresh_from_db()
    assert (endpoint.url, endpoint.events, endpoint.enabled) == (
        "https://example.com/v2",
        ["job.failed", "job.succeeded"],
        False,
    )
    tested = admin.post(f"{page_url}/test", follow=True)  # a disabled endpoint is sent nothing, tests too
    assert tested.status_code == 200 and "a disabled endpoint is sent nothing" in messages_of(tested)
    assert not endpoint.deliveries.exists()
