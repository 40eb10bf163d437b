"""/v1/keys: create (the secret is in this response only), list, revoke. Admin keys only."""

from __future__ import annotations

from rest_framework import mixins, status
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from tts_saas.errors import ApiError

from .models import ApiKey
from .serializers import ApiKeyCreateSerializer, ApiKeySerializer
from .tenancy import TenantScopedViewSet


class IsOrganizationAdmin(BasePermission):
    def has_permission(self, request, view) -> bool:
        if not getattr(request.user, "is_admin", False):
            raise ApiError(
                403,
                "Managing API keys needs an admin key (or an owner/admin in the dashboard).",
                "insufficient_permissions",
            )
        return True


class ApiKeyViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, TenantScopedViewSet):
    model = ApiKey
    serializer_class = ApiKeySerializer
    permission_classes = [IsOrganizationAdmin]
    lookup_field = "prefix"
    lookup_url_kwarg = "key_id"

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
