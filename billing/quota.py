"""Monthly character quota: reserve before work, commit on success, refund on failure.

Each step is one conditional UPDATE on the organization's QuotaPeriod row, so concurrent requests
from any number of web processes can never take the quota past its limit, and a request is
refused only when the quota really has no room left. Calendar months, UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Organization
from tts_saas.errors import ApiError

from .models import QuotaPeriod

if TYPE_CHECKING:
    from .limits import Limits


def period_start(now: datetime | None = None) -> date:
    now = now or timezone.now()
    return now.astimezone(UTC).date().replace(day=1)


def next_reset(start: date) -> datetime:
    year, month = (start.year + 1, 1) if start.month == 12 else (start.year, start.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


@dataclass(frozen=True)
class QuotaExceeded(Exception):
    used: int
    limit: int
    requested: int
    resets_at: datetime

    def error(self, limits: Limits | None = None) -> ApiError:
        """The API's answer: 429, with the time the quota resets (and, for an organization that
        pays for overage, that its own spending limit is what stopped the request)."""
        retry = {"Retry-After": str(max(1, int((self.resets_at - timezone.now()).total_seconds())))}
        if limits is not None and limits.has_overage and limits.spending_limit_cents is not None:
            return ApiError(
                429,
                f"Monthly spending limit reached: {self.used:,} characters used ({limits.monthly_characters:,} "
                f"included, then overage up to your limit of ${limits.spending_limit_cents / 100:,.2f}); this "
                f"request needs {self.requested:,}. An owner or admin can raise the limit on the dashboard's "
                f"billing page; otherwise usage resumes at {self.resets_at:%Y-%m-%dT%H:%M:%SZ}.",
                "insufficient_quota",  # OpenAI's code, which clients already branch on
                headers=retry,
            )
        return ApiError(
            429,
            f"Monthly character quota exceeded: {self.used} of {self.limit} used, this request needs "
            f"{self.requested}. The quota resets at {self.resets_at:%Y-%m-%dT%H:%M:%SZ}.",
            "insufficient_quota",
            headers=retry,
        )


def _row(org: Organization, start: date) -> None:
    if not QuotaPeriod.objects.filter(organization=org, period_start=start).exists():
        try:
            with transaction.atomic():
                QuotaPeriod.objects.create(organization=org, period_start=start)
        except IntegrityError:  # another request created it first
            pass


def _take(org: Organization, characters: int, limit: int, now: datetime | None, column: str) -> date:
    """Add `characters` to `column` ("reserved" or "used") if used + reserved stays within
    `limit`: one conditional UPDATE, so concurrent callers can never overshoot."""
    start = period_start(now)
    _row(org, start)
    taken = QuotaPeriod.objects.filter(
        organization=org, period_start=start, used__lte=limit - characters - F("reserved")
    ).update(**{column: F(column) + characters})
    if not taken:
        row = QuotaPeriod.objects.get(organization=org, period_start=start)
        raise QuotaExceeded(row.used + row.reserved, limit, characters, next_reset(start))
    return start


def reserve(org: Organization, characters: int, limit: int, now: datetime | None = None) -> date:
    """Hold `characters` of this month's quota; raises QuotaExceeded if they do not fit."""
    return _take(org, characters, limit, now, "reserved")


def charge(org: Organization, characters: int, limit: int, now: datetime | None = None) -> date:
    """Reserve and commit at once, for work already done (a cache hit)."""
    return _take(org, characters, limit, now, "used")


def commit(org_id: int, start: date, characters: int) -> None:
    QuotaPeriod.objects.filter(organization_id=org_id, period_start=start).update(
        reserved=F("reserved") - characters, used=F("used") + characters
    )


def refund(org_id: int, start: date, characters: int) -> None:
    QuotaPeriod.objects.filter(organization_id=org_id, period_start=start).update(reserved=F("reserved") - characters)


def usage(org: Organization, now: datetime | None = None) -> tuple[int, int, datetime]:
    """(used, reserved, resets_at) for the current month."""
    start = period_start(now)
    row = QuotaPeriod.objects.filter(organization=org, period_start=start).first()
    return (row.used, row.reserved, next_reset(start)) if row else (0, 0, next_reset(start))
