"""Concurrency leases in Redis (billing.concurrency): at most `limit` slots per organization, one
per member however often it asks, given back on release, and dropped once expired so that a
crashed job cannot hold its slot for ever."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from asgiref.sync import async_to_sync

from billing import concurrency
from tests.waiting import wait_until


@pytest.fixture
def org_id(redis_client) -> int:
    """An organization id no other test uses, its slots removed afterwards."""
    org_id = uuid.uuid4().int % 10**15
    yield org_id
    redis_client.delete(concurrency.slots_key(org_id))


LEASE = 600.0  # seconds: a lease that does not expire during a test


def acquire(org_id: int, member: str, limit: int, ttl: float = LEASE) -> bool:
    return async_to_sync(concurrency.acquire)(org_id, member, limit, ttl)


def test_no_more_than_limit_leases_are_granted(org_id):
    assert [acquire(org_id, f"job-{i}", 3) for i in range(5)] == [True, True, True, False, False]
    assert concurrency.in_flight(org_id) == 3


def test_concurrent_acquires_never_overshoot_the_limit(org_id):
    async def race() -> list[bool]:
        return await asyncio.gather(*(concurrency.acquire(org_id, f"job-{i}", 4, LEASE) for i in range(30)))

    assert sum(async_to_sync(race)()) == 4
    assert concurrency.in_flight(org_id) == 4


def test_the_same_member_acquiring_again_holds_one_slot(org_id):
    assert acquire(org_id, "job-a", 2)
    assert acquire(org_id, "job-a", 2)
    assert concurrency.in_flight(org_id) == 1
    assert acquire(org_id, "job-b", 2)
    assert acquire(org_id, "job-a", 2)  # already holds a slot: granted even when all are taken
    assert not acquire(org_id, "job-c", 2)
    assert concurrency.in_flight(org_id) == 2


def test_release_frees_a_slot(org_id):
    assert acquire(org_id, "job-a", 1)
    assert not acquire(org_id, "job-b", 1)
    concurrency.release(org_id, "job-a")
    assert concurrency.in_flight(org_id) == 0
    assert acquire(org_id, "job-b", 1)


def test_async_release_frees_a_slot(org_id):
    assert acquire(org_id, "job-a", 1)
    async_to_sync(concurrency.arelease)(org_id, "job-a")
    assert concurrency.in_flight(org_id) == 0
    assert acquire(org_id, "job-b", 1)


def test_releasing_a_member_that_holds_no_slot_changes_nothing(org_id):
    assert acquire(org_id, "job-a", 2)
    concurrency.release(org_id, "job-never")
    assert concurrency.in_flight(org_id) == 1


def test_organizations_do_not_share_slots(org_id, redis_client):
    other = org_id + 1
    try:
        assert acquire(org_id, "job-a", 1)
        assert acquire(other, "job-a", 1)
        assert concurrency.in_flight(org_id) == concurrency.in_flight(other) == 1
    finally:
        redis_client.delete(concurrency.slots_key(other))


def test_a_lease_left_by_a_crashed_job_expires(org_id):
    assert acquire(org_id, "crashed-job", 1, ttl=0.3)  # never released
    wait_until(lambda: concurrency.in_flight(org_id) == 0, 10, "the expired lease still holds its slot")
    assert acquire(org_id, "next-job", 1)


def plant_expired_lease(redis_client, org_id: int, member: str) -> None:
    """A lease whose expiry has passed, as a crashed job leaves it (the key itself still lives)."""
    key = concurrency.slots_key(org_id)
    redis_client.zadd(key, {member: time.time() - 5})
    redis_client.expire(key, 60)


def test_an_expired_lease_no_longer_counts_as_in_flight(org_id, redis_client):
    assert acquire(org_id, "live-job", 5)
    plant_expired_lease(redis_client, org_id, "crashed-job")
    assert concurrency.in_flight(org_id) == 1
    assert redis_client.zscore(concurrency.slots_key(org_id), "crashed-job") is None


def test_acquire_drops_expired_leases_before_counting(org_id, redis_client):
    plant_expired_lease(redis_client, org_id, "crashed-job")
    assert acquire(org_id, "next-job", 1)  # the only slot was held by the expired lease
    assert redis_client.zrange(concurrency.slots_key(org_id), 0, -1) == [b"next-job"]


def test_a_lease_expires_ttl_seconds_after_it_is_taken(org_id, redis_client):
    before = time.time()
    assert acquire(org_id, "job-a", 1, ttl=42.5)
    after = time.time()
    assert before + 42.5 <= redis_client.zscore(concurrency.slots_key(org_id), "job-a") <= after + 42.5


def test_a_shorter_lease_taken_later_does_not_cut_a_longer_one_short(org_id, redis_client):
    assert acquire(org_id, "async-job", 2, ttl=LEASE)
    assert acquire(org_id, "interactive", 2, ttl=1)
    assert redis_client.ttl(concurrency.slots_key(org_id)) >= LEASE - 5


def test_extending_a_lease_holds_its_slot_for_a_whole_new_run(org_id, redis_client):
    """A job a dead worker lost runs again from the start: its slot must last that run too."""
    assert acquire(org_id, "job-a", 1, ttl=30)
    before = time.time()
    assert concurrency.extend(org_id, "job-a", LEASE)
    assert redis_client.zscore(concurrency.slots_key(org_id), "job-a") >= before + LEASE
    assert redis_client.ttl(concurrency.slots_key(org_id)) >= LEASE - 5
    assert concurrency.in_flight(org_id) == 1


def test_a_released_or_lapsed_lease_is_not_revived(org_id, redis_client):
    assert acquire(org_id, "job-a", 2)
    concurrency.release(org_id, "job-a")
    assert not concurrency.extend(org_id, "job-a", LEASE)
    plant_expired_lease(redis_client, org_id, "crashed-job")
    assert not concurrency.extend(org_id, "crashed-job", LEASE)
    assert concurrency.in_flight(org_id) == 0
