"""/v1/usage (totals from the ledger) and /v1/subscription (plan, quota, limits)."""

from __future__ import annotations

import json
from datetime import UTC, date

import stripe
from django.conf import settings
from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

from accounts.tenancy import TenantScopedViewSet
from tts_saas.errors import error_response, error_responses
from tts_saas.request_id import actor_var

from . import stripe_events
from .models import BillingStatus, UsageEvent
from .usage import month_summary, usage_report


class UsageQuerySerializer(serializers.Serializer):
    start = serializers.DateField(required=False)
    end = serializers.DateField(required=False)
    group_by = serializers.ChoiceField(choices=["day", "key", "model"], default="day")

    def validate_end(self, value: date) -> date:
        # The report reads up to the day after `end`, which must exist in the calendar.
        if value >= date.max:
            raise serializers.ValidationError(f"end must be before {date.max.isoformat()}.")
        return value

    def validate(self, attrs):
        today = timezone.now().astimezone(UTC).date()
        attrs.setdefault("start", today.replace(day=1))
        attrs.setdefault("end", today)
        if attrs["end"] < attrs["start"]:
            raise serializers.ValidationError({"end": "end must not be before start."})
        if (attrs["end"] - attrs["start"]).days > 366:
            raise serializers.ValidationError({"end": "At most 366 days per query."})
        return attrs


# The serializers below document responses built in billing.usage; the schema fuzzing tests hold
# the responses to them.


class UsageTotalsSerializer(serializers.Serializer):
    requests = serializers.IntegerField()
    failed_requests = serializers.IntegerField()
    cached_requests = serializers.IntegerField()
    characters = serializers.IntegerField()
    audio_seconds = serializers.FloatField()


class UsageRowSerializer(UsageTotalsSerializer):
    date = serializers.DateField(required=False, help_text="group_by=day")
    key_id = serializers.CharField(required=False, allow_null=True, help_text="group_by=key; null: no key (deleted)")
    key_name = serializers.CharField(required=False, allow_null=True, help_text="group_by=key")
    model = serializers.CharField(required=False, help_text="group_by=model: the model that spoke (kokoro, chattts)")


@extend_schema_serializer(many=False)  # the whole body, though the action is a list
class UsageReportSerializer(serializers.Serializer):
    start = serializers.DateField()
    end = serializers.DateField()
    group_by = serializers.ChoiceField(choices=["day", "key", "model"])
    # DRF takes declared fields off the class, so `data` the property stays; the stubs don't know.
    data = UsageRowSerializer(many=True)  # type: ignore[assignment]
    total = UsageTotalsSerializer()


class PlanSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()


class SubscriptionSerializer(serializers.Serializer):
    plan = PlanSerializer()
    character_count = serializers.IntegerField()
    character_reserved = serializers.IntegerField()
    character_limit = serializers.IntegerField()
    next_character_count_reset_unix = serializers.IntegerField()
    next_character_count_reset = serializers.DateTimeField()
    requests_per_minute = serializers.IntegerField()
    concurrent_jobs = serializers.IntegerField()
    jobs_in_flight = serializers.IntegerField()
    max_input_characters = serializers.IntegerField()
    billing_status = serializers.ChoiceField(choices=[c for c, _ in BillingStatus.choices])
    overage_cents_per_1k = serializers.IntegerField(
        allow_null=True, help_text="the price of characters beyond character_limit; null: a hard cap"
    )
    spending_limit_cents = serializers.IntegerField(allow_null=True, help_text="the most overage a month; null: none")
    character_ceiling = serializers.IntegerField(
        help_text="what this month's requests may reach: character_limit, or more where overage is sold"
    )


class UsageViewSet(TenantScopedViewSet):
    """GET /v1/usage?start=YYYY-MM-DD&end=YYYY-MM-DD&group_by=day|key|model (dates in UTC, inclusive)."""

    model = UsageEvent
    serializer_class = UsageQuerySerializer

    @extend_schema(
        parameters=[UsageQuerySerializer],
        responses={200: UsageReportSerializer, **error_responses({400: "Invalid query."})},
    )
    def list(self, request):
        query = UsageQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        start, end, group_by = (query.validated_data[k] for k in ("start", "end", "group_by"))
        return Response(usage_report(self.get_queryset(), start, end, group_by))


@extend_schema(responses=SubscriptionSerializer)
@api_view(["GET"])
def subscription(request):
    """GET /v1/subscription — plan, this month's characters against the quota, reset time, limits."""
    month = month_summary(request.user.organization)
    limits = month.limits
    return Response(
        {
            "plan": {"id": limits.plan, "name": month.plan_name},
            "character_count": month.used,
            "character_reserved": month.reserved,
            "character_limit": limits.monthly_characters,
            "next_character_count_reset_unix": int(month.resets_at.timestamp()),
            "next_character_count_reset": month.resets_at.isoformat().replace("+00:00", "Z"),
            "requests_per_minute": limits.requests_per_minute,
            "concurrent_jobs": limits.concurrent_jobs,
            "jobs_in_flight": month.jobs_in_flight,
            "max_input_characters": limits.max_input_chars,
            "billing_status": month.billing_status,
            "overage_cents_per_1k": month.overage_cents_per_1k if limits.has_overage else None,
            "spending_limit_cents": limits.spending_limit_cents,
            "character_ceiling": limits.quota_characters,
        }
    )


@csrf_exempt
@require_POST
def stripe_webhook(request):
    """Stripe's webhook endpoint (register https://YOUR-HOST/billing/stripe/webhook in Stripe):
    the signature is checked on the raw body with Stripe's library, then the event is stored and
    handled once (billing.stripe_events). 400 for a bad signature; 500 when handling failed, so
    that Stripe delivers the event again."""
    if not settings.STRIPE_WEBHOOK_SECRET:
        return error_response(404, "Billing is not configured on this installation.", "not_found")
    actor_var.set("stripe")  # what its events change is Stripe's doing, in the audit log
    try:
        stripe.Webhook.construct_event(
            request.body,
            request.headers.get("Stripe-Signature", ""),
            settings.STRIPE_WEBHOOK_SECRET,
            tolerance=settings.STRIPE_WEBHOOK_TOLERANCE,
        )
        event = json.loads(request.body)
    except (ValueError, stripe.SignatureVerificationError):
        return error_response(
            400,
            "The Stripe-Signature header does not verify for this body: wrong endpoint secret, an altered body, or "
            "a signature older than the tolerance.",
            "invalid_signature",
        )
    try:
        row = stripe_events.receive(event)
    except Exception:
        return error_response(500, "The event could not be handled now; Stripe delivers it again.", "event_failed")
    return JsonResponse({"received": True, "status": row.status})
