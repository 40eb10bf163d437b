"""Events to an organization's endpoints (`WebhookEndpoint`): `publish` makes one delivery per
enabled endpoint that receives the event's type and queues it; each is tried by its task
(`deliver`, retried with backoff by synthesis.tasks), signed with its endpoint's own secret.
A disabled or deleted endpoint gets nothing more, retries included. `redeliver` sends one
delivery again (the same body and `webhook-id`): a job's callback as deliveries.redeliver does,
an endpoint's event to that endpoint as it is now."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts.models import Organization
from accounts.tenancy import scoped
from billing.alerts import payload as alert_payload
from billing.models import UsageAlert
from synthesis.models import Job, WebhookDelivery, WebhookEndpoint
from tts_saas.errors import ApiError
from tts_saas.queueing import send
from tts_saas.redis import get_redis

from . import deliveries
from .callbacks import message_id_for, open_delivery, payload, try_delivery

DELIVER_EVENT = "synthesis.tasks.deliver_event"
MAX_ATTEMPTS = 50  # attempts one delivery gets in all, redeliveries included


def publish(org: Organization, event: dict, message_id: str, kind: str, job: Job | None = None) -> int:
    """`event` to each enabled endpoint of `org` that receives its type; the number queued."""
    made = [
        open_delivery(org, endpoint.url, event, message_id, kind, job=job, endpoint=endpoint)
        for endpoint in scoped(WebhookEndpoint, org).filter(enabled=True)
        if event["type"] in endpoint.events
    ]
    for delivery in made:
        transaction.on_commit(lambda pk=delivery.pk: send(DELIVER_EVENT, pk, queue="default"))
    return len(made)


def publish_job(job_id) -> int:
    """An ended asynchronous job's event (`job.<status>`, the callback's body) to the endpoints."""
    job = Job.objects.select_related("organization").get(pk=job_id)
    return publish(job.organization, payload(job), message_id_for(job), WebhookDelivery.Event.JOB_EVENT, job)


def publish_alert(alert_id: int) -> int:
    alert = UsageAlert.objects.select_related("organization").get(pk=alert_id)
    event = alert_payload(alert)
    return publish(alert.organization, event, f"msg_usage_{alert.pk}", WebhookDelivery.Event.USAGE_ALERT)


def deliver(delivery_id: int) -> WebhookDelivery | None:
    """One attempt at an endpoint's delivery; None when its endpoint is gone or disabled (nothing
    sent, no retry)."""
    delivery = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    endpoint = delivery.endpoint
    if endpoint is None or not endpoint.enabled:
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=None)
        return None
    sent = try_delivery(delivery, endpoint.url, endpoint)
    if sent.delivered:  # a redelivery that arrived: the next may be asked for at once
        get_redis().delete(f"tts:redelivery:d{delivery.pk}")
    return sent


def send_test(endpoint: WebhookEndpoint) -> WebhookDelivery:
    """A test event to the endpoint, at once (one attempt), signed with its secret, logged; 409 when
    the endpoint is disabled (a disabled endpoint is sent nothing)."""
    if not endpoint.enabled:
        said = "The endpoint is disabled, and a disabled endpoint is sent nothing: enable it first."
        raise ApiError(409, said, "endpoint_disabled")
    event = deliveries.test_event(endpoint.organization)
    message_id = deliveries.test_message_id()
    delivery = open_delivery(
        endpoint.organization, endpoint.url, event, message_id, WebhookDelivery.Event.TEST, endpoint=endpoint
    )
    return try_delivery(delivery, endpoint.url, endpoint)


def redeliver(delivery: WebhookDelivery, request_id: str = "") -> None:
    """Send `delivery` again with the usual retries; 409 (saying why) when it cannot be."""
    if delivery.endpoint_id is None:
        if delivery.to_endpoint:
            raise ApiError(409, "Its endpoint was deleted.", "not_redeliverable")
        if delivery.event == WebhookDelivery.Event.JOB and delivery.job is not None:
            deliveries.redeliver(delivery.job, request_id)
            return
        if delivery.event == WebhookDelivery.Event.TEST:
            raise ApiError(409, "A test event to a typed URL is not sent again: send another.", "not_redeliverable")
        raise ApiError(409, "Its endpoint was deleted.", "not_redeliverable")  # logged before to_endpoint
    if not delivery.endpoint.enabled:
        raise ApiError(409, "Its endpoint is disabled: enable it first.", "endpoint_disabled")
    if not delivery.request_body:
        raise ApiError(
            409, "This delivery was logged before bodies were kept: its body is unknown.", "not_redeliverable"
        )
    if len(delivery.attempts) >= MAX_ATTEMPTS:
        raise ApiError(409, f"This delivery was tried {MAX_ATTEMPTS} times: no more.", "too_many_attempts")
    if not get_redis().set(f"tts:redelivery:d{delivery.pk}", 1, nx=True, ex=deliveries.REDELIVERY_SECONDS):
        raise ApiError(409, "This delivery is being sent again already.", "redelivery_running")
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    send(DELIVER_EVENT, delivery.pk, request_id=request_id, queue="default")
