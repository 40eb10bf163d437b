"""Webhooks: the organization's endpoints (listed, added: webhook_endpoints.py has a page for each),
the signing secret of job callbacks, and the delivery log (each job callback, event to an
endpoint or test event: its last result, attempts, next retry, bodies), filtered by job, event or
outcome and paged; a test event sent at once to a typed URL; a delivery sent again (one Redeliver
per delivery). Members see the log (endpoints' URLs only owners and admins) and send test events
and job callbacks again (they may submit jobs with any callback URL already); both are throttled
per member and per organization. URLs are never shown or redirected to with their credentials."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import redirect
from django.views.decorators.http import require_POST
from django_ratelimit.core import is_ratelimited

from accounts.tenancy import scoped
from synthesis.models import WebhookDelivery, WebhookEndpoint
from synthesis.service import deliveries
from tts_saas.errors import ApiError
from tts_saas.outbound import without_credentials

from ..access import member_required, page, require_active
from ..throttles import too_many_attempts
from ..webhook_form import EndpointForm

PAGE_SIZE = 50
# Test events and redeliveries: per user and per organization (each test holds a web thread up to ~10 s).
RATES = {"user": "10/m", "organization": "30/m"}
LAST_TEST_URL = "webhooks:last_test_url"  # the session's last test URL (shown without credentials)
LISTED = (
    *("id", "at", "event", "event_type", "message_id", "url", "status", "error", "duration_ms", "job_id"),
    *("endpoint_id", "attempts", "next_attempt_at", "request_body", "response_body"),
)


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


def target_of(row: WebhookDelivery, admin: bool) -> str:
    """Where the row went, as this member may see it: an endpoint's URL is the admins'."""
    return "an endpoint" if row.endpoint_id and not admin else row.url


def can_redeliver(row: WebhookDelivery, admin: bool) -> bool:
    """Whether the row offers Redeliver: an endpoint's (to admins) or a job's callback."""
    if row.endpoint_id:
        return admin
    return row.event == WebhookDelivery.Event.JOB and row.job_id is not None


@member_required
def webhooks(request):
    return webhooks_page(request)


def webhooks_page(request, endpoint_form: EndpointForm | None = None, status: int = 200):
    """The Webhooks page; `endpoint_form`: an endpoint form sent back with its errors (and what was typed)."""
    org, admin = request.principal.organization, request.principal.is_admin
    filtered = any(request.GET.get(name) for name in DeliveryFilter.base_fields)
    form = DeliveryFilter(request.GET if filtered else None)
    rows = form.apply(scoped(WebhookDelivery, org).only(*LISTED))
    listed = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    response = page(
        request,
        "webhooks.html",
        "webhooks",
        form=form,
        filtered=filtered,
        deliveries=[(row, result_of(row), target_of(row, admin), can_redeliver(row, admin)) for row in listed],
        listed=listed,
        endpoints=scoped(WebhookEndpoint, org),
        endpoint_form=(endpoint_form or EndpointForm(initial={"enabled": True})) if admin else None,
        adding=endpoint_form is not None,
        can_manage=admin,
        callback_secret=org.webhook_secret if admin else None,
        previous_valid_until=org.previous_webhook_secret_valid_until(),
        test_url=request.session.get(LAST_TEST_URL, ""),
    )
    response.status_code = status
    return response


@require_POST
@member_required
def send_test(request):
    require_active(request)
    if limited(request, "test"):
        return too_many_attempts(request)
    org = request.principal.organization
    url = request.POST.get("url", "").strip()
    request.session[LAST_TEST_URL] = without_credentials(url)[:2000]  # never the credentials, never in the address bar
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
