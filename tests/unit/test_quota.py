"""Quota arithmetic (billing.quota) against the database: reserve, charge, commit and refund on the
month's QuotaPeriod row; nothing past the limit; calendar months in UTC."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from accounts.models import Organization
from billing import quota
from billing.models import QuotaPeriod

LIMIT = 100
NOW = datetime(2026, 5, 14, 12, 0, tzinfo=UTC)
MAY = date(2026, 5, 1)
JUNE_1 = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def org(db) -> Organization:
    return Organization.objects.create(name="Quota Unit", slug="quota-unit")


def row(org, start: date = MAY) -> tuple[int, int]:
    period = QuotaPeriod.objects.get(organization=org, period_start=start)
    return period.used, period.reserved


def test_a_reservation_holds_characters_without_using_them(org):
    assert quota.reserve(org, 30, LIMIT, NOW) == MAY
    assert row(org) == (0, 30)
    assert quota.usage(org, NOW) == (0, 30, JUNE_1)


def test_commit_turns_the_reservation_into_use(org):
    start = quota.reserve(org, 30, LIMIT, NOW)
    quota.commit(org.pk, start, 30)
    assert row(org) == (30, 0)


def test_charge_uses_characters_at_once(org):
    assert quota.charge(org, 25, LIMIT, NOW) == MAY
    assert row(org) == (25, 0)


def test_refund_gives_the_reservation_back(org):
    start = quota.reserve(org, 70, LIMIT, NOW)
    with pytest.raises(quota.QuotaExceeded):
        quota.reserve(org, 40, LIMIT, NOW)
    quota.refund(org.pk, start, 70)
    assert row(org) == (0, 0)
    quota.reserve(org, 40, LIMIT, NOW)  # the room is back
    assert row(org) == (0, 40)


def test_a_partial_commit_and_refund_settle_a_cancelled_job(org):
    start = quota.reserve(org, 80, LIMIT, NOW)
    quota.commit(org.pk, start, 30)  # the part done before the cancel is billed
    quota.refund(org.pk, start, 50)  # the rest is given back
    assert row(org) == (30, 0)


def test_the_limit_can_be_reached_exactly_but_not_passed(org):
    quota.charge(org, 60, LIMIT, NOW)
    quota.reserve(org, 40, LIMIT, NOW)
    assert row(org) == (60, 40)
    with pytest.raises(quota.QuotaExceeded):
        quota.reserve(org, 1, LIMIT, NOW)
    with pytest.raises(quota.QuotaExceeded):
        quota.charge(org, 1, LIMIT, NOW)


def test_a_refusal_says_what_was_used_asked_and_when_it_resets_and_changes_nothing(org):
    quota.charge(org, 50, LIMIT, NOW)
    quota.reserve(org, 20, LIMIT, NOW)
    with pytest.raises(quota.QuotaExceeded) as info:
        quota.reserve(org, 31, LIMIT, NOW)
    refusal = info.value
    assert (refusal.used, refusal.limit, refusal.requested, refusal.resets_at) == (70, LIMIT, 31, JUNE_1)
    assert row(org) == (50, 20)


def test_a_request_larger_than_the_whole_limit_is_refused_on_an_empty_month(org):
    with pytest.raises(quota.QuotaExceeded) as info:
        quota.reserve(org, LIMIT + 1, LIMIT, NOW)
    assert (info.value.used, info.value.requested) == (0, LIMIT + 1)
    assert row(org) == (0, 0)


def test_organizations_have_their_own_quotas(org):
    other = Organization.objects.create(name="Other Unit", slug="other-unit")
    quota.charge(org, LIMIT, LIMIT, NOW)
    quota.charge(other, LIMIT, LIMIT, NOW)
    assert row(org) == row(other) == (LIMIT, 0)


def test_each_month_has_its_own_row_and_its_own_room(org):
    december = datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC)
    january = december + timedelta(seconds=1)
    assert quota.charge(org, LIMIT, LIMIT, december) == date(2025, 12, 1)
    with pytest.raises(quota.QuotaExceeded) as info:
        quota.charge(org, 1, LIMIT, december)
    assert info.value.resets_at == datetime(2026, 1, 1, tzinfo=UTC)  # across the year end
    assert quota.charge(org, LIMIT, LIMIT, january) == date(2026, 1, 1)
    assert row(org, date(2025, 12, 1)) == row(org, date(2026, 1, 1)) == (LIMIT, 0)


def test_usage_of_a_month_without_a_row_is_zero(org):
    assert quota.usage(org, NOW) == (0, 0, JUNE_1)
    assert not QuotaPeriod.objects.filter(organization=org).exists()


@pytest.mark.parametrize(
    ("now", "start"),
    [
        (datetime(2026, 5, 1, 0, 0, tzinfo=UTC), date(2026, 5, 1)),
        (datetime(2026, 5, 31, 23, 59, 59, 999999, tzinfo=UTC), date(2026, 5, 1)),
        (datetime(2024, 2, 29, 12, 0, tzinfo=UTC), date(2024, 2, 1)),
        (datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC), date(2025, 12, 1)),
        (datetime(2026, 1, 1, 0, 0, tzinfo=UTC), date(2026, 1, 1)),
        # Months are UTC: 20:00 on 31 December in New York is already January in UTC ...
        (datetime(2025, 12, 31, 20, 0, tzinfo=ZoneInfo("America/New_York")), date(2026, 1, 1)),
        # ... and 08:00 on 1 June in Tokyo is still May.
        (datetime(2026, 6, 1, 8, 0, tzinfo=ZoneInfo("Asia/Tokyo")), date(2026, 5, 1)),
    ],
)
def test_the_period_is_the_utc_calendar_month(now, start):
    assert quota.period_start(now) == start


@pytest.mark.parametrize(
    ("start", "reset"),
    [
        (date(2026, 5, 1), datetime(2026, 6, 1, tzinfo=UTC)),
        (date(2026, 1, 1), datetime(2026, 2, 1, tzinfo=UTC)),
        (date(2024, 2, 1), datetime(2024, 3, 1, tzinfo=UTC)),
        (date(2025, 11, 1), datetime(2025, 12, 1, tzinfo=UTC)),
        (date(2025, 12, 1), datetime(2026, 1, 1, tzinfo=UTC)),
    ],
)
def test_the_quota_resets_at_the_start_of_the_next_month_utc(start, reset):
    assert quota.next_reset(start) == reset
    assert quota.next_reset(start).tzinfo is not None


def test_a_request_billed_nothing_is_never_refused_however_used_up_the_month(org):
    """Before: a voice preview (0 characters) with the quota used up was refused: "...this request needs 0"."""
    quota.charge(org, LIMIT, LIMIT, NOW)  # the month used up
    with pytest.raises(quota.QuotaExceeded):
        quota.reserve(org, 1, LIMIT, NOW)
    QuotaPeriod.objects.filter(organization=org).update(used=LIMIT + 20)  # e.g. the plan's limit was lowered
    assert quota.reserve(org, 0, LIMIT, NOW) == MAY
    assert quota.charge(org, 0, LIMIT, NOW) == MAY
    assert row(org) == (LIMIT + 20, 0)
