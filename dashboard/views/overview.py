"""The overview: this month's usage against the quota, and characters per day over the last 30
days (the usage page has any period, other metrics and the split by key)."""

from __future__ import annotations

from datetime import UTC, timedelta

from django.utils import timezone

from billing import stripe_client
from billing.usage import daily_characters, month_summary

from ..access import member_required, page
from ..charts import Metric, bar_chart, days_between, minutes

CHART_DAYS = 30


@member_required
def overview(request):
    org = request.principal.organization
    month = month_summary(org)
    included = month.limits.monthly_characters
    return page(
        request,
        "overview.html",
        "overview",
        limits=month.limits,
        used=month.used,
        reserved=month.reserved,
        resets_at=month.resets_at,
        percent=month.percent_used,
        requests=month.requests,
        audio_minutes=round(month.audio_seconds / 60, 1),
        audio_minutes_shown=minutes(month.audio_seconds),
        hit_rate=month.cache_hit_rate,
        chart=characters_chart(org),
        # The meter is amber from WARN_AT and red when the month's characters are used up.
        warn_at=round(included * WARN_AT),
        full_at=max(included - 1, 0),
        level="full" if month.used >= included > 0 else ("warn" if month.used >= included * WARN_AT else ""),
        can_upgrade=stripe_client.configured(),
    )


WARN_AT = 0.8  # of the month's included characters


def characters_chart(org) -> dict:
    today = timezone.now().astimezone(UTC).date()
    by_day = daily_characters(org, CHART_DAYS)
    days = days_between(today - timedelta(days=CHART_DAYS - 1), today)
    return bar_chart(
        [(day, by_day.get(day, 0)) for day in days], Metric("characters", "character"), chart_id="overview-chart"
    )
