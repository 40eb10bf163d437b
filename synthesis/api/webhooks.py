"""/v1/webhooks/endpoint (deprecated: /v1/webhooks/endpoints keeps several): the organization's
first endpoint's URL, as when an organization had one event endpoint. Setting it changes that
endpoint's URL, or adds one receiving usage alerts and signed with the organization's webhook
secret (as the single endpoint was); an empty URL deletes it. The URL is checked as a callback URL
is; refusals name the field as the caller sent it: `url`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.tenancy import OwnOrganizationViewSet, scoped
from synthesis.models import WebhookEndpoint
from synthesis.service import endpoints
from synthesis.service.callbacks import url_problem
from tts_saas.errors import error_responses
from tts_saas.serializers import StrictSerializer

NEEDS_SCOPE = {403: "The key lacks the scope (webhooks), or the organization is suspended."}


class FirstEndpointUrlSerializer(StrictSerializer):
    url = serializers.CharField(
        max_length=2000,
        allow_blank=True,
        trim_whitespace=True,
        help_text="The organization's first endpoint's URL (usage.threshold_reached); empty: none.",
    )

    def validate_url(self, value: str) -> str:
        if value and (problem := url_problem(value, field="url")):  # the field as the caller sent it
            raise serializers.ValidationError(problem)
        return value


def first_endpoint(org) -> WebhookEndpoint | None:
    return scoped(WebhookEndpoint, org).order_by("created_at", "id").first()


class WebhookEndpointViewSet(OwnOrganizationViewSet):
    serializer_class = FirstEndpointUrlSerializer

    @extend_schema(
        summary="The organization's first webhook endpoint (deprecated)",
        description="Use GET /v1/webhooks/endpoints.",
        responses={200: FirstEndpointUrlSerializer},
        deprecated=True,
    )
    def retrieve(self, request):
        endpoint = first_endpoint(request.user.organization)
        return Response({"url": endpoint.url if endpoint else ""})

    @extend_schema(
        summary="Set the organization's first webhook endpoint (deprecated)",
        description="Use /v1/webhooks/endpoints. Changes the first endpoint's URL; without one, adds an endpoint "
        "receiving usage.threshold_reached, signed with the organization's webhook secret; empty deletes it.",
        request=FirstEndpointUrlSerializer,
        responses={
            200: FirstEndpointUrlSerializer,
            **error_responses({400: "Not a URL this server may send to.", **NEEDS_SCOPE}),
        },
        deprecated=True,
    )
    def update(self, request):
        incoming = FirstEndpointUrlSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        org, url = request.user.organization, incoming.validated_data["url"]
        endpoint = first_endpoint(org)
        if endpoint is not None and url:
            endpoints.update(endpoint, request.user, url=url)
        elif endpoint is not None:
            endpoints.delete(endpoint, request.user)
        elif url:
            signed = {"secret": org.webhook_secret}  # receivers of the one endpoint verify as before
            endpoints.create(org, request.user, url=url, events=["usage.threshold_reached"], **signed)
        return Response({"url": url})
