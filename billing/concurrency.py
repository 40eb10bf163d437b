"""Concurrency caps: at most N synthesis jobs in flight per organization.

A slot is a lease in a Redis sorted set scored by its expiry; taking one is one Lua script (drop
expired leases, count, add), so concurrent web processes cannot overshoot. A job that crashes
without releasing its slot loses it when the lease expires.
"""

from __future__ import annotations

import time

from django.conf import settings

from tts_saas.redis import get_async_redis, get_redis

_ACQUIRE = """
local now, ttl, limit, member = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], member) == false and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, member)
redis.call('EXPIRE', KEYS[1], math.ceil(ttl) + 1)
return 1
"""


def slots_key(org_id: int) -> str:
    return f"tts:slots:{org_id}"


def lease_seconds() -> float:
    return settings.TTS_QUEUE_TIMEOUT + settings.CELERY_TASK_TIME_LIMIT + 30


async def acquire(org_id: int, member: str, limit: int, ttl: float | None = None) -> bool:
    r = get_async_redis()
    taken = await r.eval(_ACQUIRE, 1, slots_key(org_id), time.time(), ttl or lease_seconds(), limit, member)
    return bool(taken)


def release(org_id: int, member: str) -> None:
    get_redis().zrem(slots_key(org_id), member)


async def arelease(org_id: int, member: str) -> None:
    await get_async_redis().zrem(slots_key(org_id), member)


def in_flight(org_id: int) -> int:
    r = get_redis()
    r.zremrangebyscore(slots_key(org_id), "-inf", time.time())
    return r.zcard(slots_key(org_id))
