"""Open WebSocket connections per organization: at most TTS_WS_MAX_PER_ORG at once, counted in
Redis across every web process. A connection holds an entry that it renews every RENEW_SECONDS;
the entry of a connection whose web process died lapses after LEASE_SECONDS."""

from __future__ import annotations

import time

from tts_saas.redis import get_async_redis

LEASE_SECONDS = 120
RENEW_SECONDS = 60

# KEYS[1]: the organization's set (member: connection id, score: when its lease ends).
# ARGV: now, lease end, cap, connection id. Returns 1 if the connection may open.
_ACQUIRE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[2] - ARGV[1]))
return 1
"""


def _key(org_id: int) -> str:
    return f"tts:ws:org:{org_id}"


async def acquire(org_id: int, connection_id: str, cap: int) -> bool:
    now = time.time()
    return bool(await get_async_redis().eval(_ACQUIRE, 1, _key(org_id), now, now + LEASE_SECONDS, cap, connection_id))


async def renew(org_id: int, connection_id: str) -> None:
    r = get_async_redis()
    await r.zadd(_key(org_id), {connection_id: time.time() + LEASE_SECONDS})
    await r.expire(_key(org_id), LEASE_SECONDS)


async def release(org_id: int, connection_id: str) -> None:
    await get_async_redis().zrem(_key(org_id), connection_id)


async def open_count(org_id: int) -> int:
    return await get_async_redis().zcount(_key(org_id), time.time(), "+inf")
