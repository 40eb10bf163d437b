"""Webhook endpoints on the dashboard: added from the Webhooks page, each with a page of its own
(its URL, the events it receives, enabled or not, its signing secret shown, copied and rotated, a
test event, deletion, and its deliveries with their bodies and attempts, each sent again by one
Redeliver). Owners and admins manage them; members read the list and the log (never a secret).
The organization's signing secret for job callbacks is rotated here too. Same checks as the API
(synthesis.api.webhook_serializers): nothing is implemented twice."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import actions
from accounts.tenancy import scoped
from synthesis.models import WebhookDelivery, WebhookEndpoint
from synthesis.service import endpoints, events
from tts_saas.errors import ApiError

from ..access import member_required, page, require_active, require_admin
from ..throttles import too_many_attempts
from ..webhook_form import EndpointForm
from .webhooks import PAGE_SIZE, limited, result_of, webhooks_page


def endpoint_of(request, endpoint_id: uuid.UUID) -> WebhookEndpoint:
    endpoint = scoped(WebhookEndpoint, request.principal.organization).filter(pk=endpoint_id).first()
    if endpoint is None:
        raise Http404("No such endpoint.")
    return endpoint


@require_POST
@member_required
def add(request):
    require_admin(request, "add webhook endpoints")
    form = EndpointForm(request.POST)
    if (fields := form.checked()) is None:  # the form again, with what was typed and each error at its field
        return webhooks_page(request, form, status=400)
    try:
        endpoint = endpoints.create(request.principal.organization, request.user, **fields)
    except ApiError as exc:  # the plan's number of endpoints
        form.add_error(None, exc.message)
        return webhooks_page(request, form, status=400)
    messages.info(request, "Endpoint added: copy its signing secret below to verify what it receives.")
    return redirect("dashboard:webhook-endpoint", endpoint.pk)


@member_required
def endpoint(request, endpoint_id: uuid.UUID):
    found = endpoint_of(request, endpoint_id)
    admin = request.principal.is_admin
    initial = {"url": found.url, "description": found.description, "events": found.events, "enabled": found.enabled}
    form = EndpointForm(request.POST if request.method == "POST" else None, initial=initial)
    if request.method == "POST":
        require_admin(request, "change webhook endpoints")
        if (fields := form.checked()) is not None:
            endpoints.update(found, request.user, **fields)
            messages.info(request, "Endpoint saved.")
            return redirect("dashboard:webhook-endpoint", found.pk)
    rows = found.deliveries.all()
    listed = Paginator(rows, PAGE_SIZE).get_page(request.GET.get("page"))
    return page(
        request,
        "webhook_endpoint.html",
        "webhooks",
        endpoint=found,
        form=form,
        can_manage=admin,
        secret=found.secret if admin else None,
        previous_valid_until=found.previous_secret_valid_until(),
        deliveries=[(row, result_of(row), row.url if admin else "an endpoint", admin) for row in listed],
        listed=listed,
    )


@require_POST
@member_required
def rotate(request, endpoint_id: uuid.UUID):
    require_admin(request, "rotate signing secrets")
    endpoints.rotate_secret(endpoint_of(request, endpoint_id), request.user)
    messages.info(request, "Secret rotated: the previous one signs too for 24 hours.")
    return redirect("dashboard:webhook-endpoint", endpoint_id)


@require_POST
@member_required
def delete(request, endpoint_id: uuid.UUID):
    require_admin(request, "delete webhook endpoints")
    found = endpoint_of(request, endpoint_id)
    endpoints.delete(found, request.user)
    messages.info(request, f"Endpoint {found.url} deleted; its deliveries stay in the log.")
    return redirect("dashboard:webhooks")


@require_POST
@member_required
def send_test(request, endpoint_id: uuid.UUID):
    require_admin(request, "send test events to endpoints")
    if limited(request, "test"):
        return too_many_attempts(request)
    try:
        sent = events.send_test(endpoint_of(request, endpoint_id))
    except ApiError as exc:  # a disabled endpoint is sent nothing
        messages.error(request, exc.message)
        return redirect("dashboard:webhook-endpoint", endpoint_id)
    said = f"Test event: {result_of(sent)} in {sent.duration_ms} ms"
    if sent.delivered:
        messages.info(request, f"{said}. Delivered.")
    else:
        messages.error(request, f"{said}. Not delivered: the receiver must answer 2xx.")
    return redirect("dashboard:webhook-endpoint", endpoint_id)


@require_POST
@member_required
def redeliver(request, delivery_id: int):
    """One delivery sent again (the same body and webhook-id); back to the page it was listed on."""
    require_active(request)
    if limited(request, "redeliver"):
        return too_many_attempts(request)
    delivery = scoped(WebhookDelivery, request.principal.organization).filter(pk=delivery_id).first()
    if delivery is None:
        raise Http404("No such delivery.")
    if delivery.endpoint_id is not None:
        require_admin(request, "send an endpoint's deliveries again")
    try:
        events.redeliver(delivery, request.request_id)
    except ApiError as exc:
        messages.error(request, exc.message)
    else:
        messages.info(request, "Being sent again: its attempts appear with it.")
    if delivery.endpoint_id is not None:
        return redirect("dashboard:webhook-endpoint", delivery.endpoint_id)
    where = reverse("dashboard:webhooks")
    return redirect(f"{where}?job={delivery.job_id}" if delivery.job_id else where)


@require_POST
@member_required
def rotate_callback_secret(request):
    require_admin(request, "rotate the callback signing secret")
    actions.rotate_webhook_secret(request.principal.organization, request.user)
    messages.info(request, "Callback signing secret rotated: the previous one signs too for 24 hours.")
    return redirect("dashboard:webhooks")
