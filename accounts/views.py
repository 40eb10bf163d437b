"""/v1/keys: create (the secret is in this response only), list, revoke; /v1/webhooks/secret: the
organization's callback signing secret, read and rotated; /v1/organization/ip_allowlist. Each call
needs its scope (keys, webhooks, organization: see accounts.scopes), checked by the API's policy."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.response import Response

from tts_saas.errors import ApiError, error_responses
from tts_saas.serializers import refuse_any_body

from . import actions, audit, client_tokens, scopes
from .auth import require
from .grants import with_owner_roles
from .models import PREFIX_LENGTH, ApiKey
from .serializers import (
    AUDIT_ID_PREFIX,
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeyListSerializer,
    ApiKeySerializer,
    ApiKeyUpdateSerializer,
    AuditEventListSerializer,
    AuditEventSerializer,
    AuditQuerySerializer,
    ClientTokenCreateSerializer,
    ClientTokenSerializer,
    DataRetentionSerializer,
    IpAllowlistSerializer,
    KeyRotationSerializer,
    WebhookSecretSerializer,
)
from .tenancy import OwnOrganizationViewSet, TenantScopedViewSet

KEY_ID = re.compile(rf"[A-Za-z0-9]{{{PREFIX_LENGTH}}}")  # a key's public id: its prefix


ADMIN_ONLY = {403: "The key lacks the scope (keys, webhooks or organization), or the organization is suspended."}
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
    partial_update=extend_schema(
        summary="Change an API key",
        description="Only the fields sent change; from the key's next request (an open WebSocket: its next utterance).",
        request=ApiKeyUpdateSerializer,
        responses={
            200: ApiKeySerializer,
            **error_responses({400: "A field is not valid.", **ADMIN_ONLY, **NO_KEY}),
        },
    ),
    destroy=extend_schema(
        summary="Revoke an API key",
        description="The key is refused from then on; the response is the key as revoked.",
        responses={200: ApiKeySerializer, **error_responses({**ADMIN_ONLY, **NO_KEY})},
    ),
)
class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = ApiKey
    serializer_class = ApiKeySerializer
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
        listed = with_owner_roles(self.get_queryset())  # each key's effective scopes without a query each
        return Response({"object": "list", "data": self.get_serializer(listed, many=True).data})

    def create(self, request):
        incoming = ApiKeyCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        data = incoming.validated_data
        key, raw = actions.create_key(
            request.user.organization,
            data["name"],
            request.user,
            expires_at=data["expires_at"],
            scopes=data["scopes"],
            allowed_ips=data.get("allowed_ips"),
            monthly_character_cap=data.get("monthly_character_cap"),
            requests_per_minute=data.get("requests_per_minute"),
        )
        response = Response({**ApiKeySerializer(key).data, "key": raw}, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"  # the secret
        return response

    def partial_update(self, request, key_id: str):
        key = self.get_object()
        incoming = ApiKeyUpdateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        actions.update_key(key, request.user, dict(incoming.validated_data))
        return Response(ApiKeySerializer(key).data)

    @extend_schema(
        summary="Rotate an API key's secret",
        description="A new secret (`key`, in this response only) for the same key: its id, scopes, limits and "
        "this month's counters stay; the old secret is refused at once, or after `grace_seconds` "
        "(`previous_valid_until`), so that clients switch over without an outage.",
        request=KeyRotationSerializer,
        responses={
            200: ApiKeyCreatedSerializer,
            **error_responses(
                {400: "Not a grace period.", **ADMIN_ONLY, **NO_KEY, 409: "The key is revoked or expired."}
            ),
        },
    )
    def rotate(self, request, key_id: str):
        incoming = KeyRotationSerializer(data=request.data if request.body.strip() else {})
        incoming.is_valid(raise_exception=True)
        key = self.get_object()
        if not key.is_usable():
            raise ApiError(409, "This key is revoked or expired: make a new one.", "key_not_usable")
        grace = timedelta(seconds=incoming.validated_data["grace_seconds"])
        raw = actions.rotate_key(key, request.user, grace)
        response = Response({**ApiKeySerializer(key).data, "key": raw})
        response["Cache-Control"] = "no-store"
        return response

    def destroy(self, request, key_id: str):
        refuse_any_body(request)
        key = self.get_object()
        actions.revoke_key(key, request.user)
        return Response(ApiKeySerializer(key).data)


class WebhookSecretViewSet(viewsets.GenericViewSet):
    """The caller's own organization's secret (there is no id to ask for another's). Never cached:
    the secret is in every response."""

    serializer_class = WebhookSecretSerializer

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
        refuse_any_body(request)
        org = request.user.organization
        actions.rotate_webhook_secret(org, request.user)
        return Response(WebhookSecretSerializer(org).data)

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response


class IpAllowlistViewSet(OwnOrganizationViewSet):
    """The caller's own organization's IP allowlist."""

    serializer_class = IpAllowlistSerializer

    @extend_schema(
        summary="The organization's IP allowlist",
        responses={200: IpAllowlistSerializer, **error_responses(ADMIN_ONLY)},
    )
    def retrieve(self, request):
        return Response(IpAllowlistSerializer(request.user.organization).data)

    @extend_schema(
        summary="Replace the organization's IP allowlist",
        description="Calls from other addresses are refused from the next request (on an open WebSocket: "
        "at its next utterance). The caller's own address must be in a non-empty list, so that it "
        "cannot lock itself out.",
        request=IpAllowlistSerializer,
        responses={200: IpAllowlistSerializer, **error_responses({400: "Not a list of networks.", **ADMIN_ONLY})},
    )
    def update(self, request):
        incoming = IpAllowlistSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        org = request.user.organization
        actions.set_ip_allowlist(
            org, incoming.validated_data["allowed_ips"], request.META.get("REMOTE_ADDR"), request.user
        )
        return Response(IpAllowlistSerializer(org).data)


class AuditLogViewSet(viewsets.GenericViewSet):
    serializer_class = AuditEventSerializer

    @extend_schema(
        summary="The audit log",
        description="What was done in the organization, newest first: sign-ins, keys, members, allowlists, the webhook "
        "secret, calls refused by an IP allowlist. Page with `after` (the previous page's `last_id`).",
        parameters=[AuditQuerySerializer],
        responses={200: AuditEventListSerializer, **error_responses({400: "A filter is not valid.", **ADMIN_ONLY})},
    )
    def list(self, request):
        query = AuditQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        q = query.validated_data
        after = int(q["after"].removeprefix(AUDIT_ID_PREFIX)) if "after" in q else None
        found = audit.events(
            request.user.organization,
            action=q.get("action"),
            actor_id=q.get("actor_id"),
            since=q.get("since"),
            until=q.get("until"),
            after=after,
        )
        page = list(found[: q["limit"] + 1])
        data = AuditEventSerializer(page[: q["limit"]], many=True).data
        return Response(
            {
                "object": "list",
                "data": data,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
                "has_more": len(page) > q["limit"],
            }
        )


class ClientTokenViewSet(viewsets.GenericViewSet):
    serializer_class = ClientTokenSerializer

    @extend_schema(
        summary="Mint a client token",
        description="A short-lived token for a browser or a phone: it speaks (POST /v1/audio/speech, the WebSocket "
        "with `?token=`) and does nothing else, for `expires_in` seconds or once, optionally in one voice and within "
        "a character budget. It acts as the key that minted it (billed to it, refused once it is revoked). Needs "
        "`tokens:write` and `speech:write`.",
        request=ClientTokenCreateSerializer,
        responses={201: ClientTokenSerializer, **error_responses({400: "A field is not valid.", **ADMIN_ONLY})},
    )
    def create(self, request):
        require(request.user, scopes.WEBSOCKET, "minting a client token (a token speaks for its key)")
        incoming = ClientTokenCreateSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        terms = incoming.validated_data
        raw, token = client_tokens.mint(
            request.user.api_key.pk,
            seconds=terms["expires_in"],
            single_use=terms["single_use"],
            voice=terms.get("voice"),
            max_characters=terms.get("max_characters"),
            secret=request.user.secret,
        )
        body = {
            "object": "client_token",
            "token": raw,
            "expires_at": datetime.fromtimestamp(token.expires_at, UTC),
            "single_use": token.single_use,
            "voice": token.voice,
            "max_characters": token.max_characters,
        }
        response = Response(ClientTokenSerializer(body).data, status=status.HTTP_201_CREATED)
        response["Cache-Control"] = "no-store"
        return response


class DataRetentionViewSet(OwnOrganizationViewSet):
    """The caller's own organization's data retention."""

    serializer_class = DataRetentionSerializer

    @extend_schema(summary="The organization's data retention", responses={200: DataRetentionSerializer})
    def retrieve(self, request):
        return Response({"data_retention": request.user.organization.data_retention})

    @extend_schema(
        summary="Set the organization's data retention",
        description="Applies to requests made from now on; what was kept before stays until its own retention ends.",
        request=DataRetentionSerializer,
        responses={200: DataRetentionSerializer, **error_responses({400: "Not a retention.", **ADMIN_ONLY})},
    )
    def update(self, request):
        incoming = DataRetentionSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        actions.set_data_retention(request.user.organization, incoming.validated_data["data_retention"], request.user)
        return Response({"data_retention": request.user.organization.data_retention})
