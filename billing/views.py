"""/v1/usage (totals from the ledger) and /v1/subscription (plan, quota, limits)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

from accounts.tenancy import TenantScopedViewSet

from . import concurrency, quota
from .limits import limits_for, subscription_for
from .models import UsageEvent


class UsageQuerySerializer(serializers.Serializer):
    start = serializers.DateField(required=False)
    end = serializers.DateField(required=False)
    group_by = serializers.ChoiceField(choices=["day", "key"], default="day")

    def validate(self, attrs):
        today = timezone.now().astimezone(UTC).date()
        attrs.setdefault("start", today.replace(day=1))
        attrs.setdefault("end", today)
        if attrs["end"] < attrs["start"]:
            raise serializers.ValidationError({"end": "end must not be before start."})
        if (attrs["end"] - attrs["start"]).days > 366:
            raise serializers.ValidationError({"end": "At most 366 days per query."})
        return attrs


TOTALS = {
    "requests": Count("id", filter=Q(status=UsageEvent.Status.SUCCEEDED)),
    "failed_requests": Count("id", filter=Q(status=UsageEvent.Status.FAILED)),
    "cached_requests": Count("id", filter=Q(cached=True)),
    "characters": Sum("characters"),
    "audio_seconds": Sum("audio_seconds"),
}


def _clean(row: dict) -> dict:
    row["characters"] = row["characters"] or 0
    row["audio_seconds"] = round(row["audio_seconds"] or 0.0, 3)
    return row


class UsageViewSet(TenantScopedViewSet):
    """GET /v1/usage?start=YYYY-MM-DD&end=YYYY-MM-DD&group_by=day|key (dates in UTC, inclusive)."""

    model = UsageEvent
    serializer_class = UsageQuerySerializer

    @extend_schema(parameters=[UsageQuerySerializer], responses=OpenApiTypes.OBJECT)
    def list(self, request):
        query = UsageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end, group_by = (query.validated_data[k] for k in ("start", "end", "group_by"))
        since = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
        until = datetime.combine(end + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
        events = self.get_queryset().filter(created_at__gte=since, created_at__lt=until)
        if group_by == "day":
            rows = events.annotate(date=TruncDate("created_at", tzinfo=UTC)).values("date").annotate(**TOTALS)
            data = [_clean({**r, "date": r["date"].isoformat()}) for r in rows.order_by("date")]
        else:
            rows = events.values("api_key__prefix", "api_key__name").annotate(**TOTALS).order_by("api_key__prefix")
            data = [_clean({"key_id": r.pop("api_key__prefix"), "key_name": r.pop("api_key__name"), **r}) for r in rows]
        total = _clean(events.aggregate(**TOTALS))
        return Response(
            {"start": start.isoformat(), "end": end.isoformat(), "group_by": group_by, "data": data, "total": total}
        )


@extend_schema(responses=OpenApiTypes.OBJECT)
@api_view(["GET"])
def subscription(request):
    """GET /v1/subscription — plan, this month's characters against the quota, reset time, limits."""
    org = request.user.organization
    limits = limits_for(org)
    used, reserved, resets_at = quota.usage(org)
    return Response(
        {
            "plan": {"id": limits.plan, "name": subscription_for(org).plan.name},
            "character_count": used,
            "character_reserved": reserved,
            "character_limit": limits.monthly_characters,
            "next_character_count_reset_unix": int(resets_at.timestamp()),
            "next_character_count_reset": resets_at.isoformat().replace("+00:00", "Z"),
            "requests_per_minute": limits.requests_per_minute,
            "concurrent_jobs": limits.concurrent_jobs,
            "jobs_in_flight": concurrency.in_flight(org.pk),
            "max_input_characters": limits.max_input_chars,
        }
    )
