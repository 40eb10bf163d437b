"""Tenant scoping in one place. Every view over tenant-owned rows derives from
`TenantScopedViewSet`, whose queryset is always filtered to the caller's organization; a subclass
that overrides `get_queryset` is refused at import time (PostHog's rule), so a new endpoint
cannot forget the filter. Async views (streams, WebSockets) use `scoped`, the same filter.
Another tenant's id is then simply not found: 404, never 403."""

from __future__ import annotations

from typing import ClassVar, cast

from django.db import models
from rest_framework import viewsets

from .auth import Principal


def scoped(model, organization):
    """The one tenant filter: `model`'s rows that belong to `organization`."""
    return model.objects.filter(organization=organization)


class OwnOrganizationViewSet(viewsets.GenericViewSet):
    """Settings of the caller's own organization (there is no id to ask for another's)."""

    def get_object(self):
        return cast(Principal, self.request.user).organization


class TenantScopedViewSet(viewsets.GenericViewSet):
    model: ClassVar[type[models.Model]]  # the tenant-owned model (with an `organization` foreign key)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "get_queryset" in cls.__dict__ or "queryset" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} must not set queryset or override get_queryset: tenant scoping lives in "
                "TenantScopedViewSet. Narrow results in filter_queryset instead."
            )

    def get_queryset(self):
        return scoped(self.model, cast(Principal, self.request.user).organization)
