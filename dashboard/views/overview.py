"""The overview: this month's usage against the quota, and characters per day."""

from __future__ import annotations

from billing.usage import daily_characters, month_summary

from ..access import member_required, page
from ..charts import daily_bars


@member_required
def overview(request):
    org = request.principal.organization
    month = month_summary(org)
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
        hit_rate=month.cache_hit_rate,
        chart=daily_bars(daily_characters(org)),
    )
