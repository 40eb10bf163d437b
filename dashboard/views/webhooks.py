"""Webhooks: the delivery log (every attempt at a job's callback, a usage alert or a test event:
when, where, the receiver's status or why there is none, how long it took), filtered by job or
outcome and paged; a test event sent at once to a URL (for owners and admins, the organization's
event endpoint unless another is typed); a finished job's callback sent again. Members see the log
(the event endpoint's URL only owners and admins) and use both actions (they may submit jobs with
any callback URL already); both are throttled per member and per organization. URLs are never
shown or redirected to with their credentials."""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_ratelimit.core import is_ratelimited

from accounts.tenancy import scoped
from synthesis.models import Job, WebhookDelivery
from synthesis.service import deliveries
from synthesis.service.callbacks import shown
from tts_saas.errors import ApiError

from ..access import member_required, page, require_active
from ..throttles import too_many_attempts

PAGE_SIZE = 50
# Test events and redeliveries: per user and per organization (each test holds a web thread up to ~10 s).
RATES = {"user": "10/m", "organization": "30/m"}
LAST_TEST_URL = "webhooks:last_test_url"  # the session's last test URL (shown without credentials)
LISTED = ("id", "at", "event", "event_type", "message_id", "url", "status", "error", "duration_ms", "job_id")


def limited(request, action: str) -> bool:
    """Whether this member or their organization has done `action` too often this minute."""
    keys = {"user": str(request.user.pk), "organization": str(request.principal.organization.pk)}
    return any(
        is_ratelimited(
            request,
            group=f"dashboard:webhooks-{action}-{whose}",
            key=lambda group, request, whose=whose: keys[whose],
            rate=rate,
            method="POST",
            increment=True,
        )
        for whose, rate in RATES.items()
    )


class DeliveryFilter(forms.Form):
    job = forms.UUIDField(required=False, label="Job id")
    outcome = forms.ChoiceField(
        required=False,
        choices=[("", "Any"), ("delivered", "Delivered (2xx)"), ("failed", "Not delivered")],
    )
    event = forms.ChoiceField(required=False, choices=[("", "Any"), *WebhookDelivery.Event.choices])

    def apply(self, rows):
        if not self.is_bound:
            return rows
        self.is_valid()  # a bad filter is shown with its error, not applied
        data = self.cleaned_data
        if data.get("job"):
            rows = rows.filter(job_id=data["job"])
        if data.get("event"):
            rows = rows.filter(event=data["event"])
        delivered = {"status__gte": 200, "status__lt": 300}
        if data.get("outcome") == "delivered":
            rows = rows.filter(**delivered)
        elif data.get("outcome") == "failed":
            rows = rows.exclude(**delivered)
        return rows


def result_of(row: WebhookDelivery) -> str:
    if row.status is not None:
        return f"HTTP {row.status}"
    return row.error or "no answer"


ENDPOINT = "the organization's event endpoint"


def target_of(row: WebhookDelivery, org, admin: bool) -> str:
    """Where the row went, as this member may see it: the event endpoint's URL is the admins'."""
    endpoint = row.event == WebhookDelivery.Event.USAGE_ALERT or (org.webhook_url and row.url == shown(org.webhook_url))
    return ENDPOINT if endpoint and not admin else row.url


@member_required
def webhooks(request):
    org = request.principal.organization
    filtered = any(request.GET.get(name) for name in DeliveryFilter.base_fields)
    form = DeliveryFilter(request.GET if filtered else None)
    rows = scoped(WebhookDelivery, org).select_related("job").only(*LISTED, "job__callback_url", "job__status")
    rows = form.apply(rows)
    listed = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return page(
        request,
        "webhooks.html",
        "webhooks",
        form=form,
        filtered=filtered,
        deliveries=[(row, result_of(row), target_of(row, org, request.principal.is_admin)) for row in listed],
        listed=listed,
        # The event endpoint is the admins' to see (as on the API keys page), without credentials.
        test_url=request.session.get(LAST_TEST_URL) or (shown(org.webhook_url) if request.principal.is_admin else ""),
        final=Job.FINAL,
    )


@require_POST
@member_required
def send_test(request):
    require_active(request)
    if limited(request, "test"):
        return too_many_attempts(request)
    org = request.principal.organization
    url = request.POST.get("url", "").strip() or (org.webhook_url if request.principal.is_admin else "")
    request.session[LAST_TEST_URL] = shown(url)[:2000]  # never the credentials, never in the address bar
    try:
        sent = deliveries.send_test(org, url)
    except ApiError as exc:
        messages.error(request, exc.message)
        return redirect("dashboard:webhooks")
    said = f"Test event to {sent.url}: {result_of(sent)} in {sent.duration_ms} ms"
    if sent.delivered:
        messages.info(request, f"{said}. Delivered.")
    else:
        messages.error(request, f"{said}. Not delivered: the receiver must answer 2xx.")
    return redirect("dashboard:webhooks")


@require_POST
@member_required
def redeliver(request, job_id: uuid.UUID):
    require_active(request)
    if limited(request, "redeliver"):
        return too_many_attempts(request)
    job = scoped(Job, request.principal.organization).filter(pk=job_id).first()
    if job is None:
        raise Http404("No such job.")
    try:
        deliveries.redeliver(job, request.request_id)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        messages.info(request, f"Job {job.id}'s callback is being sent again: its attempts appear below.")
    return redirect(f"{reverse('dashboard:webhooks')}?job={job.id}")
