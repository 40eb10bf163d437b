"""/v1/webhooks/endpoint: where the organization's events (usage alerts) are sent, signed with its
webhook secret as job callbacks are. The URL is checked as a callback URL is (public addresses
only, by tts_saas.outbound, again at each delivery): a tenant's endpoint must not reach into the
operator's network. Refusals name the field as the caller sent it: `url`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts import actions
from accounts.tenancy import OwnOrganizationViewSet
from synthesis.service.callbacks import url_problem
from tts_saas.errors import error_responses
from tts_saas.serializers import StrictSerializer

NEEDS_SCOPE = {403: "The key lacks the scope (webhooks), or the organization is suspended."}


class WebhookEndpointSerializer(StrictSerializer):
    url = serializers.CharField(
        max_length=2000,
        allow_blank=True,
        trim_whitespace=True,
        help_text="An https or http URL that receives the organization's events (usage.threshold_reached); "
        "empty: none.",
    )

    def validate_url(self, value: str) -> str:
        if value and (problem := url_problem(value, field="url")):  # the field as the caller sent it
            raise serializers.ValidationError(problem)
        return value


class WebhookEndpointViewSet(OwnOrganizationViewSet):
    serializer_class = WebhookEndpointSerializer

    @extend_schema(summary="The organization's event endpoint", responses={200: WebhookEndpointSerializer})
    def retrieve(self, request):
        return Response({"url": request.user.organization.webhook_url})

    @extend_schema(
        summary="Set the organization's event endpoint",
        description="Events (usage.threshold_reached at 50, 80 and 100 % of the monthly quota or a key's cap) are "
        "POSTed there as JSON, signed as Standard Webhooks specifies with the webhook secret, retried on failure.",
        request=WebhookEndpointSerializer,
        responses={
            200: WebhookEndpointSerializer,
            **error_responses({400: "Not a URL this server may send to.", **NEEDS_SCOPE}),
        },
    )
    def update(self, request):
        incoming = WebhookEndpointSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        org = request.user.organization
        actions.set_webhook_endpoint(org, incoming.validated_data["url"], request.user)
        return Response({"url": org.webhook_url})
