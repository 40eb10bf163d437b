"""Staff's corrections of a month's characters used (given back after an outage, a miscount): the
one writer of `QuotaPeriod.used` besides billing.quota's requests. Explicit and audited: a new
value or an adjustment, a reason, and the tenant's audit log says who, before and after."""

from __future__ import annotations

from django.db import transaction

from accounts import audit

from .models import QuotaPeriod

REASON_LENGTH = 500


class Refused(ValueError):
    """The correction is not made: why, in words for the staff member."""


def correct_used(
    period: QuotaPeriod, *, by, reason: str, used: int | None = None, adjustment: int | None = None
) -> tuple[int, int]:
    """Set `period`'s characters used to `used`, or change them by `adjustment`; the values before
    and after. The row is locked, so requests settling meanwhile count on the corrected value."""
    reason = reason.strip()[:REASON_LENGTH]
    if not reason:
        raise Refused("Give a reason: it goes into the organization's audit log.")
    if (used is None) == (adjustment is None):
        raise Refused("Give either the new value or an adjustment.")
    with transaction.atomic():
        locked = QuotaPeriod.objects.select_for_update().select_related("organization").get(pk=period.pk)
        before = locked.used
        after = used if used is not None else before + (adjustment or 0)
        if after < 0:
            raise Refused(f"The characters used cannot go below 0 (they are {before:,}).")
        QuotaPeriod.objects.filter(pk=locked.pk).update(used=after)
        audit.record(
            locked.organization,
            "staff.changed",
            by,
            staff=True,
            target=f"quota:{locked.period_start:%Y-%m}",
            before={"used": before},
            after={"used": after, "reason": reason},
        )
    period.used = after
    return before, after
