"""Identical live requests share one generation: while a cacheable request is being generated, an
identical one (same organization, model, text, voice, seed and options) follows the running job
instead of starting another. Redis maps the request's identity to the leading job while it runs;
the followers of a job are counted, so that the leader's client going away does not stop audio
that others are listening to."""

from __future__ import annotations

import asyncio
import hashlib
import json

from synthesis.audio.cache import segments_text
from tts_saas.redis import get_async_redis, get_redis

PENDING = "pending"  # the leader is submitting its job
PENDING_SECONDS = 30  # a leader that has not submitted by then (crashed) is replaced


def identity(org_id: int, model: str, segments, params: dict, styles=()) -> str:
    text = segments_text(segments, styles)
    blob = json.dumps({"model": model, "text": text, "params": params}, sort_keys=True)
    return f"tts:inflight:{org_id}:{hashlib.sha256(blob.encode()).hexdigest()}"


def followers_key(job_id) -> str:
    return f"tts:inflight:followers:{job_id}"


async def lead_or_follow(key: str) -> str | None:
    """None: this request leads (it must `start` its job or `give_up`); else the id of the job
    an identical request is generating."""
    r = get_async_redis()
    pause = 0.02
    while True:
        if await r.set(key, PENDING, nx=True, ex=PENDING_SECONDS):
            return None
        value = await r.get(key)
        if value is not None and value != PENDING.encode():
            return value.decode()
        # The leader is submitting its job (under load this can take seconds); if it crashed, its
        # placeholder expires and the next loop leads.
        await asyncio.sleep(pause)
        pause = min(0.2, pause * 2)


async def started(key: str, job_id, ttl: float) -> None:
    await get_async_redis().set(key, str(job_id), ex=int(ttl))


async def give_up(key: str) -> None:
    await get_async_redis().delete(key)


async def follow(job_id) -> None:
    await get_async_redis().incr(followers_key(job_id))


async def unfollow(job_id) -> None:
    await get_async_redis().decr(followers_key(job_id))


def finished(key: str, job_id) -> None:
    """The job settled: later identical requests start anew (or hit the cache)."""
    r = get_redis()
    if r.get(key) == str(job_id).encode():
        r.delete(key)


async def has_followers(job_id) -> bool:
    followers = await get_async_redis().get(followers_key(job_id))
    return bool(followers) and int(followers) > 0
