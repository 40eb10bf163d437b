"""The audio cache in Redis, bounded in entry size and in total bytes.

Key: `tts:audio:<organization>:<model version>:<sha256 of the normalised text>:<hash of every
generation parameter>`. Only deterministic requests (a seed given) are cached. Entries are per
organization: a shared entry would tell one tenant (by `x-cache: hit` and timing) what another
tenant has synthesised. The value is the 16-bit PCM,
so one entry serves every `response_format`. Entries expire after TTS_CACHE_TTL; when the total
passes TTS_CACHE_MAX_BYTES the oldest entries are evicted, atomically, in one Lua script.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict

from django.conf import settings

from inference.engine import SynthesisParams
from tts_saas.redis import get_async_redis, get_redis

INDEX = "tts:audio:index"  # sorted set: entry key -> time stored
SIZES = "tts:audio:sizes"  # hash: entry key -> bytes
TOTAL = "tts:audio:total"  # bytes held
STATS = "tts:audio:stats"  # hash: hits, misses, stores, evictions

_PUT = """
local key, index, sizes, total = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local value, ttl, now, max_total = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local function drop(k)
  local s = tonumber(redis.call('HGET', sizes, k) or '0')
  redis.call('DEL', k); redis.call('ZREM', index, k); redis.call('HDEL', sizes, k)
  redis.call('DECRBY', total, s)
  return s
end
for _, k in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now - ttl)) do drop(k) end
if redis.call('HEXISTS', sizes, key) == 1 then drop(key) end
redis.call('SET', key, value, 'EX', ttl)
redis.call('ZADD', index, now, key)
redis.call('HSET', sizes, key, string.len(value))
local held = redis.call('INCRBY', total, string.len(value))
local evicted = 0
while held > max_total do
  local oldest = redis.call('ZRANGE', index, 0, 0)[1]
  if (not oldest) or oldest == key then break end
  drop(oldest)
  evicted = evicted + 1
  held = tonumber(redis.call('GET', total))
end
redis.call('HINCRBY', KEYS[5], 'stores', 1)
if evicted > 0 then redis.call('HINCRBY', KEYS[5], 'evictions', evicted) end
return evicted
"""


def segments_text(segments) -> str:
    """The text a cache key hashes: the job's segments as given (split, spaces tidied), one per line.
    The worker's spelling-out of them is part of the model version, which the key also holds."""
    return "\n".join(segments)


def cache_key(org_id: int, model_version: str, normalized_text: str, params: SynthesisParams) -> str:
    text_hash = hashlib.sha256(normalized_text.encode("utf-8")).hexdigest()
    params_hash = hashlib.sha256(json.dumps(asdict(params), sort_keys=True).encode()).hexdigest()[:16]
    return f"tts:audio:{org_id}:{model_version}:{text_hash}:{params_hash}"


def put(key: str, pcm16: bytes) -> bool:
    if not key or len(pcm16) > settings.TTS_CACHE_MAX_ENTRY_BYTES:
        return False
    get_redis().eval(
        _PUT,
        5,
        key,
        INDEX,
        SIZES,
        TOTAL,
        STATS,
        pcm16,
        settings.TTS_CACHE_TTL,
        time.time(),
        settings.TTS_CACHE_MAX_BYTES,
    )
    return True


async def aget_first(keys: list[str], count: bool = True) -> bytes | None:
    """The first of `keys` that is cached (one round trip), counting one hit or one miss unless
    `count` is off (a second look for the same request)."""
    r = get_async_redis()
    values = await r.mget(keys) if keys else []
    value = next((v for v in values if v is not None), None)
    if count:
        await r.hincrby(STATS, "hits" if value is not None else "misses", 1)
    return value


async def aget(key: str) -> bytes | None:
    return await aget_first([key])


def stats() -> dict[str, int]:
    raw = get_redis().hgetall(STATS)
    values = {k.decode(): int(v) for k, v in raw.items()}
    values["bytes"] = int(get_redis().get(TOTAL) or 0)
    return values
