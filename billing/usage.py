"""Usage read back from the ledger: the month summary (the dashboard's overview and
/v1/subscription show the same one), and the per-day and per-key reports of /v1/usage and the
dashboard's usage page and overview chart."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate

from accounts.models import Organization
from accounts.tenancy import scoped

from . import concurrency, quota
from .limits import Limits, limits_for, subscription_for
from .models import UsageEvent

TOTALS = {
    "requests": Count("id", filter=Q(status=UsageEvent.Status.SUCCEEDED)),
    "failed_requests": Count("id", filter=Q(status=UsageEvent.Status.FAILED)),
    "cached_requests": Count("id", filter=Q(cached=True)),
    "characters": Sum("characters"),
    "audio_seconds": Sum("audio_seconds"),
}

# The dashboard's usage page also counts every request whatever its outcome (as its history lists
# them) and the cancelled ones; /v1/usage keeps TOTALS, which its schema documents.
REPORT_TOTALS = {
    **TOTALS,
    "all_requests": Count("id"),
    "cancelled_requests": Count("id", filter=Q(status=UsageEvent.Status.CANCELLED)),
}


@dataclass(frozen=True)
class MonthSummary:
    """This calendar month (UTC) of one organization: quota, limits and what the ledger holds."""

    plan_name: str
    limits: Limits
    used: int
    reserved: int
    resets_at: datetime
    requests: int
    cached_requests: int
    audio_seconds: float
    jobs_in_flight: int
    all_requests: int = 0  # whatever their outcome, as the dashboard's Usage and History count them
    failed_requests: int = 0
    billing_status: str = "none"
    overage_cents_per_1k: int | None = None

    @property
    def percent_used(self) -> float:
        return round(100 * self.used / self.limits.monthly_characters, 1) if self.limits.monthly_characters else 0

    @property
    def cache_hit_rate(self) -> float | None:
        """Of every request (the Usage page's rate, over the same requests)."""
        return round(100 * self.cached_requests / self.all_requests, 1) if self.all_requests else None


def month_summary(org: Organization) -> MonthSummary:
    used, reserved, resets_at = quota.usage(org)
    month = (
        scoped(UsageEvent, org)
        .filter(created_at__gte=datetime.combine(quota.period_start(), datetime.min.time(), tzinfo=UTC))
        .aggregate(**REPORT_TOTALS)
    )
    sub = subscription_for(org)
    return MonthSummary(
        plan_name=sub.plan.name,
        billing_status=sub.billing_status,
        overage_cents_per_1k=sub.plan.overage_cents_per_1k,
        limits=limits_for(org),
        used=used,
        reserved=reserved,
        resets_at=resets_at,
        requests=month["requests"] or 0,
        cached_requests=month["cached_requests"] or 0,
        all_requests=month["all_requests"] or 0,
        failed_requests=month["failed_requests"] or 0,
        audio_seconds=month["audio_seconds"] or 0.0,
        jobs_in_flight=concurrency.in_flight(org.pk),
    )


def _clean(row: dict) -> dict:
    row["characters"] = row["characters"] or 0
    row["audio_seconds"] = round(row["audio_seconds"] or 0.0, 3)
    return row


def usage_report(events, start: date, end: date, group_by: str, totals: dict = TOTALS) -> dict:
    """Totals of `events` (an organization's ledger rows) per day, per key or per model, dates
    inclusive (UTC); `totals` names the aggregates (TOTALS, or REPORT_TOTALS for the dashboard)."""
    since = datetime.combine(start, datetime.min.time(), tzinfo=UTC)
    until = datetime.combine(end + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    events = events.filter(created_at__gte=since, created_at__lt=until)
    if group_by == "day":
        rows = events.annotate(date=TruncDate("created_at", tzinfo=UTC)).values("date").annotate(**totals)
        data = [_clean({**r, "date": r["date"].isoformat()}) for r in rows.order_by("date")]
    elif group_by == "model":
        data = [_clean(r) for r in events.values("model").annotate(**totals).order_by("model")]
    elif group_by == "member":  # requests made without a key: the dashboard member behind each
        rows = events.filter(api_key__isnull=True).values("member__email").annotate(**totals).order_by("member__email")
        data = [_clean({"member": r.pop("member__email"), **r}) for r in rows]
    else:
        rows = events.values("api_key__prefix", "api_key__name").annotate(**totals).order_by("api_key__prefix")
        data = [_clean({"key_id": r.pop("api_key__prefix"), "key_name": r.pop("api_key__name"), **r}) for r in rows]
    total = _clean(events.aggregate(**totals))
    return {"start": start.isoformat(), "end": end.isoformat(), "group_by": group_by, "data": data, "total": total}
