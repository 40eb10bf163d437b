"""/v1/webhooks/endpoints: an organization's event endpoints (as Stripe's and OpenAI's dashboards
keep them): several, each with the event types it receives, its own signing secret (rotatable, the
previous one signing a day more) and enabled or not; /v1/webhooks/deliveries: each message to each
receiver with its bodies and attempts, sent again by `redeliver`. Tenant-scoped: another
organization's id is 404. Scopes: webhooks:read to read, webhooks:write to change (accounts.scopes)."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response

from accounts.tenancy import TenantScopedViewSet
from synthesis.models import WebhookDelivery, WebhookEndpoint
from synthesis.service import endpoints, events
from tts_saas.errors import ApiError, error_responses, validation_error
from tts_saas.serializers import refuse_any_body

from .webhook_serializers import (
    WebhookDeliveryListSerializer,
    WebhookDeliverySerializer,
    WebhookEndpointListSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointWithSecretSerializer,
    WebhookEndpointWriteSerializer,
)

NEEDS_SCOPE = {403: "The key lacks the scope (webhooks), or the organization is suspended."}
NOT_FOUND = {404: "No such endpoint in this organization."}
LISTED = 100  # deliveries an endpoint's list returns at most, newest first


def found(queryset, object_id: str, what: str):
    """The row of this organization with that id, or 404 (another tenant's id too)."""
    try:
        key = uuid.UUID(object_id) if what == "webhook endpoint" else int(object_id)
    except ValueError:
        key = None
    in_range = isinstance(key, uuid.UUID) or (isinstance(key, int) and 0 < key < 2**63)  # a bigint column
    row = queryset.filter(pk=key).first() if in_range else None
    if row is None:
        raise ApiError(404, f"No {what} '{object_id[:40]}' in this organization.", "not_found")
    return row


def no_store(response: Response) -> Response:
    response["Cache-Control"] = "no-store"  # a signing secret is in it
    return response


class WebhookEndpointViewSet(TenantScopedViewSet):
    model = WebhookEndpoint
    serializer_class = WebhookEndpointSerializer
    lookup_url_kwarg = "endpoint_id"

    def get_object(self) -> WebhookEndpoint:
        return found(self.get_queryset(), self.kwargs[self.lookup_url_kwarg], "webhook endpoint")

    @extend_schema(summary="List webhook endpoints", responses={200: WebhookEndpointListSerializer})
    def list(self, request):
        rows = WebhookEndpointSerializer(self.get_queryset(), many=True).data
        return Response({"object": "list", "data": rows})

    @extend_schema(
        summary="Add a webhook endpoint",
        description="Events of the types listed are POSTed there as JSON, signed as Standard Webhooks specifies "
        "with the endpoint's own secret (in this response), retried with backoff when not answered 2xx.",
        request=WebhookEndpointWriteSerializer,
        responses={
            201: WebhookEndpointWithSecretSerializer,
            **error_responses({400: "Not a URL this server may send to, or an unknown event type.", **NEEDS_SCOPE}),
        },
    )
    def create(self, request):
        incoming = WebhookEndpointWriteSerializer(data=request.data)
        if not incoming.is_valid():
            raise validation_error(incoming.errors)
        endpoint = endpoints.create(request.user.organization, request.user, **incoming.validated_data)
        return no_store(Response(WebhookEndpointWithSecretSerializer(endpoint).data, status=status.HTTP_201_CREATED))

    @extend_schema(
        summary="A webhook endpoint, with its signing secret",
        responses={200: WebhookEndpointWithSecretSerializer, **error_responses(NOT_FOUND)},
    )
    def retrieve(self, request, endpoint_id: str):
        return no_store(Response(WebhookEndpointWithSecretSerializer(self.get_object()).data))

    @extend_schema(
        summary="Change a webhook endpoint",
        description="Any of url, events, description, enabled. A disabled endpoint gets nothing, retries included.",
        request=WebhookEndpointWriteSerializer,
        responses={200: WebhookEndpointSerializer, **error_responses({400: "Not a valid value.", **NOT_FOUND})},
    )
    def partial_update(self, request, endpoint_id: str):
        endpoint = self.get_object()
        incoming = WebhookEndpointWriteSerializer(data=request.data, partial=True)
        if not incoming.is_valid():
            raise validation_error(incoming.errors)
        endpoints.update(endpoint, request.user, **incoming.validated_data)
        return Response(WebhookEndpointSerializer(endpoint).data)

    @extend_schema(
        summary="Delete a webhook endpoint",
        description="Its deliveries stay in the log.",
        responses={200: WebhookEndpointSerializer, **error_responses(NOT_FOUND)},
    )
    def destroy(self, request, endpoint_id: str):
        refuse_any_body(request)
        endpoint = self.get_object()
        data = WebhookEndpointSerializer(endpoint).data
        endpoints.delete(endpoint, request.user)
        return Response({**data, "deleted": True})

    @extend_schema(
        summary="Rotate a webhook endpoint's signing secret",
        description="A new secret; deliveries carry a signature with the previous one too for 24 hours.",
        request=None,
        responses={200: WebhookEndpointWithSecretSerializer, **error_responses(NOT_FOUND)},
    )
    def rotate(self, request, endpoint_id: str):
        refuse_any_body(request)
        endpoint = endpoints.rotate_secret(self.get_object(), request.user)
        return no_store(Response(WebhookEndpointWithSecretSerializer(endpoint).data))

    @extend_schema(
        summary="Send a test event to a webhook endpoint",
        description="A signed event of type `test`, sent once and at once, whatever the endpoint's event types; "
        "409 endpoint_disabled when the endpoint is disabled (it is sent nothing).",
        request=None,
        responses={
            200: WebhookDeliverySerializer,
            **error_responses({**NOT_FOUND, 409: "The endpoint is disabled."}),
        },
    )
    def test(self, request, endpoint_id: str):
        refuse_any_body(request)
        return Response(WebhookDeliverySerializer(events.send_test(self.get_object())).data)

    @extend_schema(
        summary="A webhook endpoint's deliveries",
        description=f"Newest first, at most {LISTED}: each message with its request and response bodies and attempts.",
        parameters=[OpenApiParameter("failed", bool, description="Only those not delivered (no 2xx yet).")],
        responses={200: WebhookDeliveryListSerializer, **error_responses(NOT_FOUND)},
    )
    def deliveries(self, request, endpoint_id: str):
        rows = self.get_object().deliveries.all()
        if request.query_params.get("failed") in ("true", "1"):
            rows = rows.exclude(status__gte=200, status__lt=300)
        return Response({"object": "list", "data": WebhookDeliverySerializer(rows[:LISTED], many=True).data})


class WebhookDeliveryViewSet(TenantScopedViewSet):
    model = WebhookDelivery
    serializer_class = WebhookDeliverySerializer
    lookup_url_kwarg = "delivery_id"

    def get_object(self) -> WebhookDelivery:
        return found(self.get_queryset(), self.kwargs[self.lookup_url_kwarg], "webhook delivery")

    @extend_schema(
        summary="A webhook delivery",
        responses={200: WebhookDeliverySerializer, **error_responses({404: "No such delivery."})},
    )
    def retrieve(self, request, delivery_id: str):
        return Response(WebhookDeliverySerializer(self.get_object()).data)

    @extend_schema(
        summary="Send a webhook delivery again",
        description="The same body and webhook-id, signed anew, with the usual retries: its attempts are added to it.",
        request=None,
        responses={
            202: WebhookDeliverySerializer,
            **error_responses({404: "No such delivery.", 409: "It cannot be sent again (the message says why)."}),
        },
    )
    def redeliver(self, request, delivery_id: str):
        refuse_any_body(request)
        delivery = self.get_object()
        events.redeliver(delivery, request._request.request_id)
        delivery.refresh_from_db()
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)
