"""Concurrency caps: at most N synthesis jobs in flight per organization.

A slot is a lease in a Redis sorted set scored by its expiry; taking one is one Lua script (drop
expired leases, count, add), so concurrent web processes cannot overshoot. A job that crashes
without releasing its slot loses it when the lease expires.
"""

from __future__ import annotations

import time

from tts_saas.redis import get_async_redis, get_redis

_ACQUIRE = """
local now, ttl, limit, member = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], member) == false and redis.call('ZCARD', KEYS[1]) >= limit then
  return 0
end
redis.call('ZADD', KEYS[1], now + ttl, member)
local keep = math.ceil(ttl) + 1  -- the key outlives its longest lease, not its latest one
if redis.call('TTL', KEYS[1]) < keep then redis.call('EXPIRE', KEYS[1], keep) end
return 1
"""


def slots_key(org_id: int) -> str:
    return f"tts:slots:{org_id}"


async def acquire(org_id: int, member: str, limit: int, ttl: float) -> bool:
    """Take a slot for `member` for `ttl` seconds, if fewer than `limit` are taken."""
    r = get_async_redis()
    taken = await r.eval(_ACQUIRE, 1, slots_key(org_id), time.time(), ttl, limit, member)
    return bool(taken)


def take(org_id: int, member: str, limit: int, ttl: float) -> bool:
    """`acquire` from synchronous code (a job that waited for a slot, started by a worker or beat)."""
    return bool(get_redis().eval(_ACQUIRE, 1, slots_key(org_id), time.time(), ttl, limit, member))


_EXTEND = """
local now, ttl, member = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local expiry = redis.call('ZSCORE', KEYS[1], member)
if expiry == false or tonumber(expiry) <= now then return 0 end  -- released or lapsed: not revived
redis.call('ZADD', KEYS[1], now + ttl, member)
local keep = math.ceil(ttl) + 1
if redis.call('TTL', KEYS[1]) < keep then redis.call('EXPIRE', KEYS[1], keep) end
return 1
"""


def extend(org_id: int, member: str, ttl: float) -> bool:
    """Hold `member`'s slot for `ttl` seconds from now (a job run again from the start); False if
    it holds none (released, or expired)."""
    return bool(get_redis().eval(_EXTEND, 1, slots_key(org_id), time.time(), ttl, member))


def release(org_id: int, member: str) -> None:
    get_redis().zrem(slots_key(org_id), member)


async def arelease(org_id: int, member: str) -> None:
    await get_async_redis().zrem(slots_key(org_id), member)


def in_flight(org_id: int) -> int:
    r = get_redis()
    r.zremrangebyscore(slots_key(org_id), "-inf", time.time())
    return r.zcard(slots_key(org_id))
