"""Webhooks: the delivery log (every attempt at a job's callback, a usage alert or a test event:
when, where, the receiver's status or why there is none, how long it took), filtered by job or
outcome and paged; a test event sent at once to a URL (the organization's event endpoint unless
another is typed); a finished job's callback sent again. Members see the log and use both
actions (they may submit jobs with any callback URL already); test events are throttled per user."""

from __future__ import annotations

import uuid

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST
from django_ratelimit.decorators import ratelimit

from accounts.tenancy import scoped
from synthesis.models import Job, WebhookDelivery
from synthesis.service import deliveries
from tts_saas.errors import ApiError

from ..access import member_required, page, require_active
from ..throttles import by_user, too_many_attempts

PAGE_SIZE = 50
TEST_RATE = "10/m"  # test events per user


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


@member_required
def webhooks(request):
    org = request.principal.organization
    filtered = any(request.GET.get(name) for name in DeliveryFilter.base_fields)
    form = DeliveryFilter(request.GET if filtered else None)
    rows = form.apply(scoped(WebhookDelivery, org).select_related("job"))
    listed = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return page(
        request,
        "webhooks.html",
        "webhooks",
        form=form,
        filtered=filtered,
        deliveries=[(row, result_of(row)) for row in listed],
        listed=listed,
        query=query.urlencode(),
        test_url=request.GET.get("url", org.webhook_url),
        final=Job.FINAL,
    )


@require_POST
@ratelimit(group="dashboard:webhook-test", key=by_user, rate=TEST_RATE, method="POST", block=False)
@member_required
def send_test(request):
    if getattr(request, "limited", False):
        return too_many_attempts(request)
    require_active(request)
    url = request.POST.get("url", "").strip() or request.principal.organization.webhook_url
    try:
        sent = deliveries.send_test(request.principal.organization, url)
    except ApiError as exc:
        messages.error(request, exc.message)
        return redirect(f"{reverse('dashboard:webhooks')}?{_url_query(url)}")
    said = f"Test event to {sent.url}: {result_of(sent)} in {sent.duration_ms} ms"
    if sent.delivered:
        messages.info(request, f"{said}. Delivered.")
    else:
        messages.error(request, f"{said}. Not delivered: the receiver must answer 2xx.")
    return redirect(f"{reverse('dashboard:webhooks')}?{_url_query(url)}")


def _url_query(url: str) -> str:
    return urlencode({"url": url[:2000]})


@require_POST
@member_required
def redeliver(request, job_id: uuid.UUID):
    require_active(request)
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
