"""/v1/organization/browser_origins: the sites whose pages may call the speech API with the
organization's client tokens (accounts.origins). Needs the `organization` scope, read or write."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from tts_saas.errors import error_responses
from tts_saas.serializers import StrictSerializer

from .origin_names import MAX_ORIGINS, parse_origins
from .origins import set_browser_origins
from .tenancy import OwnOrganizationViewSet

ADMIN_ONLY = {403: "The key lacks the organization scope, or the organization is suspended."}


class BrowserOriginsSerializer(StrictSerializer):
    browser_origins = serializers.ListField(
        child=serializers.CharField(max_length=300),
        max_length=MAX_ORIGINS,
        help_text="Origins (https://host or https://host:port) whose pages may call POST /v1/audio/speech with "
        "a client token: the response carries Access-Control-Allow-Origin for them. Empty: no browser calls.",
    )

    def validate_browser_origins(self, value: list[str]) -> list[str]:
        try:
            return parse_origins(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class BrowserOriginsViewSet(OwnOrganizationViewSet):
    """The caller's own organization's browser origins."""

    serializer_class = BrowserOriginsSerializer

    @extend_schema(
        summary="The organization's browser origins",
        responses={200: BrowserOriginsSerializer, **error_responses(ADMIN_ONLY)},
    )
    def retrieve(self, request):
        return Response({"browser_origins": request.user.organization.browser_origins})

    @extend_schema(
        summary="Replace the organization's browser origins",
        description="Pages served from these origins may call POST /v1/audio/speech with the organization's client "
        "tokens (CORS); API keys are never answered to a browser.",
        request=BrowserOriginsSerializer,
        responses={200: BrowserOriginsSerializer, **error_responses({400: "Not a list of origins.", **ADMIN_ONLY})},
    )
    def update(self, request):
        incoming = BrowserOriginsSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        org = request.user.organization
        set_browser_origins(org, incoming.validated_data["browser_origins"], request.user)
        return Response({"browser_origins": org.browser_origins})
