"""/v1/keys: create (the secret is in this response only), list, revoke; /v1/webhooks/secret: the
organization's callback signing secret, read and rotated. Admin keys only."""

from __future__ import annotations

import re

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from tts_saas.errors import ApiError, error_responses

from . import actions
from .models import PREFIX_LENGTH, ApiKey
from .serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeyListSerializer,
    ApiKeySerializer,
    WebhookSecretSerializer,
)
from .tenancy import TenantScopedViewSet

KEY_ID = re.compile(rf"[A-Za-z0-9]{{{PREFIX_LENGTH}}}")  # a key's public id: its prefix


class IsOrganizationAdmin(BasePermission):
    what = "Managing API keys"

    def has_permission(self, request, view) -> bool:
        if not getattr(request.user, "is_admin", False):
            raise ApiError(
                403, f"{self.what} needs an admin key (or an owner/admin in the dashboard).", "insufficient_permissions"
            )
        return True


class ManagesWebhookSecret(IsOrganizationAdmin):
    what = "The webhook signing secret"


ADMIN_ONLY = {403: "Needs an admin key (or the organization is suspended)."}
NO_KEY = {404: "No API key with that id in this organization."}


@extend_schema_view(
    list=extend_schema(responses={200: ApiKeyListSerializer, **error_responses(ADMIN_ONLY)}),
    create=extend_schema(
        request=ApiKeyCreateSerializer,
        responses={
            201: ApiKeyCreatedSerializer,
            **error_responses({400: "The request body is not valid.", **ADMIN_ONLY}),
        },
    ),
    retrieve=extend_schema(responses={200: ApiKeySerializer, **error_responses({**ADMIN_ONLY, **NO_KEY})}),
    destroy=extend_schema(
        summary="Revoke an API key",
        description="The key is refused from then on; the response is the key as revoked.",
        responses={200: ApiKeySerializer, **error_responses({**ADMIN_ONLY, **NO_KEY})},
    ),
)
class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = ApiKey
    serializer_class = ApiKeySerializer
    permission_classes = [IsOrganizationAdmin]
    lookup_field = "prefix"
    lookup_url_kwarg = "key_id"

    def get_object(self) -> ApiKey:
        # An id that cannot be a key's is one that exists nowhere: the same 404 as an unknown id
        # or another tenant's, without a query (a NUL byte in it made PostgreSQL fail: 500).
        no_key = ApiError(404, "No API key with that id in this organization.", "not_found")
        if not KEY_ID.fullmatch(self.kwargs.get(self.lookup_url_kwarg, "")):
            raise no_key
        try:
            return super().get_object()
        except Http404:
            raise no_key from None

    def list(self, request, *args, **kwargs):
        return Response({"object": "list", "data": self.get_serializer(self.get_queryset(), many=True).data})

    def create(self, request):
        incoming = ApiKeyCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        key, raw = request.user.organization.create_api_key(
            incoming.validated_data["name"],
            expires_at=incoming.validated_data["expires_at"],
            kind=incoming.validated_data["kind"],
        )
        body = {**ApiKeySerializer(key).data, "key": raw}
        return Response(body, status=status.HTTP_201_CREATED)

    def destroy(self, request, key_id: str):
        key = self.get_object()
        key.revoke()
        return Response(ApiKeySerializer(key).data)


class WebhookSecretViewSet(viewsets.GenericViewSet):
    """The caller's own organization's secret (there is no id to ask for another's). Never cached:
    the secret is in every response."""

    serializer_class = WebhookSecretSerializer
    permission_classes = [ManagesWebhookSecret]

    @extend_schema(
        summary="The webhook signing secret", responses={200: WebhookSecretSerializer, **error_responses(ADMIN_ONLY)}
    )
    def retrieve(self, request):
        return Response(WebhookSecretSerializer(request.user.organization).data)

    @extend_schema(
        summary="Rotate the webhook signing secret",
        description="A new secret; callbacks carry a signature with the previous one too for 24 hours.",
        request=None,
        responses={200: WebhookSecretSerializer, **error_responses(ADMIN_ONLY)},
    )
    def rotate(self, request):
        org = request.user.organization
        actions.rotate_webhook_secret(org)
        return Response(WebhookSecretSerializer(org).data)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response
