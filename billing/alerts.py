"""Usage alerts: when this month's characters cross 50, 80 and 100 % of the organization's
included quota, or of a key's own cap, that threshold is due once (a `UsageAlert` row, unique per
subject, month and threshold, so no threshold is told twice whoever looks). `due` finds and
records them; telling them (Standard Webhooks event, e-mail) is the synthesis side's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction

from accounts.models import ApiKey, Organization

from .limits import limits_for
from .models import KeyQuotaPeriod, QuotaPeriod, UsageAlert
from .quota import next_reset, period_start
from .terms import UNLIMITED

THRESHOLDS = (50, 80, 100)


@dataclass(frozen=True)
class Crossing:
    organization: Organization
    key: ApiKey | None
    used: int
    limit: int


def _record(crossing: Crossing, start) -> list[UsageAlert]:
    """The thresholds `crossing` reached and nobody recorded yet, recorded now."""
    reached = [t for t in THRESHOLDS if crossing.used * 100 >= t * crossing.limit]
    subject = f"key:{crossing.key.prefix}" if crossing.key is not None else "organization"
    made = []
    for threshold in reached:
        try:
            with transaction.atomic():
                made.append(
                    UsageAlert.objects.create(
                        organization=crossing.organization,
                        api_key=crossing.key,
                        subject=subject,
                        period_start=start,
                        threshold=threshold,
                        used=crossing.used,
                        limit=crossing.limit,
                    )
                )
        except IntegrityError:  # told already (by this process before, or another)
            continue
    return made


def crossings(now: datetime | None = None) -> list[Crossing]:
    """This month's organizations and capped keys with characters used, against their limits."""
    start = period_start(now)
    found = []
    for row in QuotaPeriod.objects.filter(period_start=start, used__gt=0).select_related("organization"):
        limit = limits_for(row.organization).monthly_characters
        if 0 < limit < UNLIMITED:
            found.append(Crossing(row.organization, None, row.used, limit))
    capped = KeyQuotaPeriod.objects.filter(period_start=start, used__gt=0, api_key__monthly_character_cap__isnull=False)
    for key_row in capped.select_related("api_key__organization"):
        key = key_row.api_key
        found.append(Crossing(key.organization, key, key_row.used, key.monthly_character_cap or 0))
    return found


def due(now: datetime | None = None) -> list[UsageAlert]:
    """The alerts that became due since the last look, each recorded once."""
    start = period_start(now)
    return [alert for crossing in crossings(now) for alert in _record(crossing, start)]


def payload(alert: UsageAlert) -> dict:
    """The event as sent (Standard Webhooks' `type`/`timestamp`/`data` shape)."""
    data = {
        "subject": "key" if alert.api_key_id else "organization",
        "key_id": alert.subject.removeprefix("key:") if alert.api_key_id else None,
        "threshold_percent": alert.threshold,
        "characters_used": alert.used,
        "character_limit": alert.limit,
        "period_start": alert.period_start.isoformat(),
        "resets_at": next_reset(alert.period_start).isoformat().replace("+00:00", "Z"),
    }
    return {
        "type": "usage.threshold_reached",
        "timestamp": alert.created_at.isoformat().replace("+00:00", "Z"),
        "data": data,
    }
