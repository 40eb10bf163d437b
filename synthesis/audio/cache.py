"""The audio cache in Redis, bounded in entry size and in total bytes.

Key: `tts:audio:<organization>:<model version>:<sha256 of the normalised text>:<hash of every
generation parameter>`. Only deterministic requests (a seed given) are cached. Entries are per
organization: a shared entry would tell one tenant (by `x-cache: hit` and timing) what another
tenant has synthesised. The value is the 16-bit PCM, so one entry serves every output format,
preceded by the segments' captions (`pack`), so a hit has its captions as a miss does. Entries
expire after TTS_CACHE_TTL; when the total passes TTS_CACHE_MAX_BYTES the oldest entries are
evicted, atomically, in one Lua script.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from django.conf import settings

from synthesis.audio.captions import Caption
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


def segments_text(segments, styles=()) -> str:
    """The text a cache key hashes: the job's segments as given (split, spaces tidied), one per line,
    and (SSML) how each is said: its pauses, marks, voice, rate... Two SSML spellings of the same
    speech share audio. The worker's spelling-out is part of the model version, which the key holds."""
    text = "\n".join(segments)
    if any(styles):
        text += "\n\x1e" + json.dumps(list(styles), sort_keys=True, ensure_ascii=False)
    return text


def cache_key(org_id: int, model_version: str, normalized_text: str, params: Any) -> str:
    """`params`: the engine's row parameters (a dataclass); the model version names the engine."""
    text_hash = hashlib.sha256(normalized_text.encode("utf-8")).hexdigest()
    params_hash = hashlib.sha256(json.dumps(asdict(params), sort_keys=True).encode()).hexdigest()[:16]
    return f"tts:audio:{org_id}:{model_version}:{text_hash}:{params_hash}"


# A stored value: MAGIC, the captions' JSON length (4 bytes, big-endian), the JSON, the PCM.
MAGIC = b"TTSC1\n"


@dataclass(frozen=True)
class Entry:
    pcm16: bytes
    captions: list[Caption]
    # Where it was found: a cache hit's ledger row keeps it (History plays it from there).
    key: str = field(default="", compare=False)


def pack(pcm16: bytes, captions: list[Caption]) -> bytes:
    head = json.dumps([c.as_dict() for c in captions], separators=(",", ":")).encode()
    return MAGIC + len(head).to_bytes(4, "big") + head + pcm16


def unpack(value: bytes) -> Entry:
    """A stored value; one written before captions were kept is PCM alone (no captions)."""
    if not value.startswith(MAGIC):
        return Entry(value, [])
    size = int.from_bytes(value[len(MAGIC) : len(MAGIC) + 4], "big")
    start = len(MAGIC) + 4
    captions = [Caption.from_dict(c) for c in json.loads(value[start : start + size])]
    return Entry(value[start + size :], captions)


def put(key: str, pcm16: bytes, captions: list[Caption] | None = None) -> bool:
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
        pack(pcm16, captions or []),
        settings.TTS_CACHE_TTL,
        time.time(),
        settings.TTS_CACHE_MAX_BYTES,
    )
    return True


async def aget_first(keys: list[str], count: bool = True) -> Entry | None:
    """The first of `keys` that is cached (one round trip), counting one hit or one miss unless
    `count` is off (a second look for the same request)."""
    r = get_async_redis()
    values = await r.mget(keys) if keys else []
    key, value = next(((k, v) for k, v in zip(keys, values, strict=True) if v is not None), ("", None))
    if count:
        await r.hincrby(STATS, "hits" if value is not None else "misses", 1)
    return None if value is None else replace(unpack(value), key=key)


async def aget(key: str) -> Entry | None:
    return await aget_first([key])


def peek(key: str) -> Entry | None:
    """The entry at `key`, if cached, read without counting a hit or a miss (for pages that show
    what is cached, not for serving a request)."""
    value = get_redis().get(key)
    return None if value is None else replace(unpack(value), key=key)


def present(keys: list[str]) -> set[str]:
    """Which of `keys` are cached (one round trip), without reading or counting them."""
    if not keys:
        return set()
    pipe = get_redis().pipeline(transaction=False)
    for key in keys:
        pipe.exists(key)
    return {key for key, found in zip(keys, pipe.execute(), strict=True) if found}


def stats() -> dict[str, int]:
    raw = get_redis().hgetall(STATS)
    values = {k.decode(): int(v) for k, v in raw.items()}
    values["bytes"] = int(get_redis().get(TOTAL) or 0)
    return values
