"""Monthly character quota: reserve before work, commit on success, refund on failure.

Each step is one conditional UPDATE on the organization's QuotaPeriod row, so concurrent requests
from any number of web processes can never take the quota past its limit, and a request is
refused only when the quota really has no room left. Calendar months, UTC.

A request made with an API key counts on the key's own row too (`KeyQuotaPeriod`), in the same
transaction and the same way, against the key's `monthly_character_cap` when it has one: a burst
cannot overshoot either, and a key refused by its organization's quota has taken nothing.
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

from .models import KeyQuotaPeriod, QuotaPeriod

UNCAPPED = 2**62  # a key without a cap of its own: counted, never refused

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

    key: str | None = None  # the key whose own cap refused the request

    def error(self, limits: Limits | None = None) -> ApiError:
        """The API's answer: 429, with the time the quota resets (and, for an organization that
        pays for overage, that its own spending limit is what stopped the request)."""
        retry = {"Retry-After": str(max(1, int((self.resets_at - timezone.now()).total_seconds())))}
        if self.key is not None:
            return ApiError(
                429,
                f"This API key's monthly character cap is reached: {self.used} of {self.limit} used, this request "
                f"needs {self.requested}. An owner or admin can raise it on the dashboard (API keys, then the key's "
                f"page: /dashboard/keys/{self.key}) or with PATCH /v1/keys/{self.key}; it resets at "
                f"{self.resets_at:%Y-%m-%dT%H:%M:%SZ}.",
                "insufficient_quota",
                headers=retry,
            )
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


def _ensure_row(model, start: date, **owner) -> None:
    """The month's row of `owner` (an organization's `QuotaPeriod`, a key's `KeyQuotaPeriod`)."""
    if not model.objects.filter(period_start=start, **owner).exists():
        try:
            with transaction.atomic():
                model.objects.create(period_start=start, **owner)
        except IntegrityError:  # another request created it first
            pass


def _take(model, start: date, characters: int, limit: int, column: str, key: str | None = None, **owner) -> None:
    """Add `characters` to `column` ("reserved" or "used") of `owner`'s month row if used +
    reserved stays within `limit`: one conditional UPDATE, so concurrent callers can never
    overshoot. QuotaExceeded names `key` when it is a key's own cap that refused. Nothing to take
    (a voice's preview, billed nothing) is never refused, however used up the month is."""
    if characters <= 0:
        return
    taken = model.objects.filter(period_start=start, used__lte=limit - characters - F("reserved"), **owner).update(
        **{column: F(column) + characters}
    )
    if not taken:
        row = model.objects.get(period_start=start, **owner)
        raise QuotaExceeded(row.used + row.reserved, limit, characters, next_reset(start), key=key)


def _take_both(org: Organization, characters: int, limit: int, now: datetime | None, column: str, key) -> date:
    start = period_start(now)
    _ensure_row(QuotaPeriod, start, organization=org)  # the month's rows exist before (and whatever) the takes
    if key is not None:
        _ensure_row(KeyQuotaPeriod, start, api_key=key)
    # Rows are locked in one order everywhere (the organization's, then the key's: commit and refund
    # too), so that concurrent takes and settlements never wait on each other in a circle.
    with transaction.atomic():  # the organization's share is given back if the key's is refused
        _take(QuotaPeriod, start, characters, limit, column, organization=org)
        if key is not None:
            cap = key.monthly_character_cap if key.monthly_character_cap is not None else UNCAPPED
            _take(KeyQuotaPeriod, start, characters, cap, column, key=key.prefix, api_key=key)
    return start


def reserve(org: Organization, characters: int, limit: int, now: datetime | None = None, key=None) -> date:
    """Hold `characters` of this month's quota (and of `key`'s); raises QuotaExceeded if they do
    not fit."""
    return _take_both(org, characters, limit, now, "reserved", key)


def charge(org: Organization, characters: int, limit: int, now: datetime | None = None, key=None) -> date:
    """Reserve and commit at once, for work already done (a cache hit)."""
    return _take_both(org, characters, limit, now, "used", key)


def commit(org_id: int, start: date, characters: int, key_id: int | None = None) -> None:
    moved = {"reserved": F("reserved") - characters, "used": F("used") + characters}
    QuotaPeriod.objects.filter(organization_id=org_id, period_start=start).update(**moved)
    if key_id is not None:
        KeyQuotaPeriod.objects.filter(api_key_id=key_id, period_start=start).update(**moved)


def refund(org_id: int, start: date, characters: int, key_id: int | None = None) -> None:
    QuotaPeriod.objects.filter(organization_id=org_id, period_start=start).update(reserved=F("reserved") - characters)
    if key_id is not None:
        KeyQuotaPeriod.objects.filter(api_key_id=key_id, period_start=start).update(reserved=F("reserved") - characters)


def usage(org: Organization, now: datetime | None = None) -> tuple[int, int, datetime]:
    """(used, reserved, resets_at) for the current month."""
    start = period_start(now)
    row = QuotaPeriod.objects.filter(organization=org, period_start=start).first()
    return (row.used, row.reserved, next_reset(start)) if row else (0, 0, next_reset(start))
