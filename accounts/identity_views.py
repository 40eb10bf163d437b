"""/v1/organization/sso: the organization's OpenID Connect provider, its domain proof and whether
members must use it; /v1/organization/mfa: whether members must have a second factor. Each needs
the `organization` scope (read or write), checked by the API's policy."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from tts_saas.errors import ApiError, error_responses
from tts_saas.serializers import refuse_any_body

from . import mfa, sso_connections
from .identity_serializers import RequireMfaSerializer, SsoConnectionSerializer
from .models import SsoConnection
from .sso import redirect_uri
from .tenancy import OwnOrganizationViewSet

ADMIN_ONLY = {403: "The key lacks the organization scope, or the organization is suspended."}
NONE = {404: "The organization has no single sign-on connection."}


def _shown(connection: SsoConnection, request) -> dict:
    return {
        **SsoConnectionSerializer(connection).data,
        "provider_id": connection.provider_id,
        "redirect_uri": redirect_uri(connection, request),
        "domain_record_name": connection.txt_name,
        "domain_record_value": connection.domain_token,
        "domain_verified_at": connection.domain_verified_at,
    }


class SsoConnectionViewSet(OwnOrganizationViewSet):
    serializer_class = SsoConnectionSerializer

    def _connection(self, request) -> SsoConnection:
        connection = SsoConnection.objects.filter(organization=request.user.organization).first()
        if connection is None:
            raise ApiError(404, "This organization has no single sign-on connection.", "not_found")
        return connection

    @extend_schema(
        summary="The organization's single sign-on",
        responses={200: SsoConnectionSerializer, **error_responses({**ADMIN_ONLY, **NONE})},
    )
    def retrieve(self, request):
        return Response(_shown(self._connection(request), request))

    @extend_schema(
        summary="Connect or change the organization's identity provider",
        description="OpenID Connect. A new domain must be proven (POST .../verify_domain) before anyone signs in "
        "through the provider; `enforced` needs a proven domain.",
        request=SsoConnectionSerializer,
        responses={200: SsoConnectionSerializer, **error_responses({400: "The settings are refused.", **ADMIN_ONLY})},
    )
    def update(self, request):
        incoming = SsoConnectionSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        try:
            connection = sso_connections.save_connection(
                request.user.organization, incoming.validated_data, request.user
            )
        except sso_connections.SsoProblem as exc:
            raise ApiError(400, str(exc), "invalid_sso_settings") from exc
        return Response(_shown(connection, request))

    @extend_schema(
        summary="Disconnect the identity provider", responses={204: None, **error_responses({**ADMIN_ONLY, **NONE})}
    )
    def destroy(self, request):
        refuse_any_body(request)
        if not sso_connections.delete_connection(request.user.organization, request.user):
            self._connection(request)  # 404
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Prove the domain",
        description="Looks up the DNS TXT record named by domain_record_name for domain_record_value.",
        request=None,
        responses={
            200: SsoConnectionSerializer,
            **error_responses(
                {**ADMIN_ONLY, **NONE, 409: "The record is not there (yet), or another organization proved the domain."}
            ),
        },
    )
    def verify_domain(self, request):
        refuse_any_body(request)
        try:
            connection = sso_connections.verify_domain(self._connection(request))
        except sso_connections.SsoProblem as exc:
            raise ApiError(409, str(exc), "domain_not_verified") from exc
        return Response(_shown(connection, request))


class RequireMfaViewSet(OwnOrganizationViewSet):
    serializer_class = RequireMfaSerializer

    @extend_schema(
        summary="Whether members need a second factor",
        responses={200: RequireMfaSerializer, **error_responses(ADMIN_ONLY)},
    )
    def retrieve(self, request):
        return Response({"require_mfa": request.user.organization.require_mfa})

    @extend_schema(
        summary="Require a second factor of members",
        description="Members without one are asked to add one at their next dashboard page (API keys: unaffected).",
        request=RequireMfaSerializer,
        responses={200: RequireMfaSerializer, **error_responses({400: "Not a boolean.", **ADMIN_ONLY})},
    )
    def update(self, request):
        incoming = RequireMfaSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        mfa.set_require_mfa(request.user.organization, incoming.validated_data["require_mfa"], request.user)
        return Response({"require_mfa": request.user.organization.require_mfa})
