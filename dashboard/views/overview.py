"""The overview: this month's usage against the quota, and characters per day over the last 30
days (the usage page has any period, other metrics and the split by key; the chart is drawn from
the same per-day report), and a new organization's first steps, checked off as they happen."""

from __future__ import annotations

from accounts.models import ApiKey
from accounts.tenancy import scoped
from billing import stripe_client
from billing.models import UsageEvent
from billing.usage import month_summary

from ..access import member_required, page
from ..charts import bar_chart, minutes
from .usage import METRICS, last_days, per_day

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
        requests=month.all_requests,  # as Usage counts them: every request, failed ones too
        failed=month.failed_requests,
        audio_minutes=minutes(month.audio_seconds),
        hit_rate=month.cache_hit_rate,
        chart=characters_chart(org),
        # The meter is amber from WARN_AT and red when the month's characters are used up.
        warn_at=round(included * WARN_AT),
        full_at=max(included - 1, 0),
        level="full" if month.used >= included > 0 else ("warn" if month.used >= included * WARN_AT else ""),
        can_upgrade=stripe_client.configured(),
        steps=getting_started(org, request.session),
    )


def getting_started(org, session) -> list[dict] | None:
    """A new organization's first steps, each checked off once it happened (from its keys and its
    usage ledger); None once all are done, which the session remembers (no queries after that)."""
    finished = f"getting_started_done:{org.pk}"
    if session.get(finished):
        return None
    steps = [
        {"done": scoped(ApiKey, org).exists(), "text": "Create an API key", "url": "dashboard:keys"},
        {
            "done": scoped(UsageEvent, org).filter(api_key__isnull=False).exists(),
            "text": "Call the API with it (Docs, Quick start: a curl and Python that run as pasted)",
            "url": "dashboard:docs",
            "anchor": "#quick-start",
        },
        {
            "done": scoped(UsageEvent, org).filter(api_key__isnull=True).exists(),
            "text": "Hear the voices in the playground",
            "url": "dashboard:playground",
        },
    ]
    if all(step["done"] for step in steps):
        session[finished] = True
        return None
    return steps


WARN_AT = 0.8  # of the month's included characters


def characters_chart(org) -> dict:
    """Characters per UTC day over the last CHART_DAYS days, today included, as the usage page reports them."""
    days, _ = per_day(org, last_days(CHART_DAYS))
    characters = METRICS["characters"]
    return bar_chart([(day, characters.value(row)) for day, row in days], characters.metric, chart_id="overview-chart")
