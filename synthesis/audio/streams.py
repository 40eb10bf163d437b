"""Per-job chunk streams: the worker appends events to a Redis Stream, readers replay it.

A stream (not channels' group_send, which drops messages to a full channel silently) is ordered,
replayable and kept for TTS_STREAM_TTL, so a reader that attaches late or reconnects reads from
any offset and loses nothing. Events: `start`, `audio` (16-bit PCM), `end`, `error`, and
`restart` (the stream begins again: its worker was lost and the job was queued anew).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from django.conf import settings

from tts_saas.redis import get_async_redis, get_redis


def stream_key(job_id) -> str:
    return f"tts:job:{job_id}:events"


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    fields: dict[str, bytes]

    def text(self, name: str, default: str = "") -> str:
        value = self.fields.get(name)
        return value.decode() if value is not None else default


def publish(job_id, event_type: str, keep: int | None = None, **fields) -> None:
    """Append an event to the job's stream; with `keep`, the stream keeps about its last `keep`
    events (Redis trims the oldest: an asynchronous job's beginning is in its stored file)."""
    key = stream_key(job_id)
    data = {"type": event_type, **{k: v if isinstance(v, bytes) else str(v) for k, v in fields.items()}}
    pipe = get_redis().pipeline(transaction=False)
    pipe.xadd(key, data, maxlen=keep, approximate=True)
    pipe.expire(key, settings.TTS_STREAM_TTL)
    pipe.execute()


ZERO_RETENTION_GRACE = 60  # seconds a zero-retention stream outlives its end for a slow live reader


def forget(job_id, within: int = 0) -> None:
    """A zero-retention job's stream (its captions hold its text, its events its audio): deleted
    now, or within `within` seconds (a reader may still be reading it)."""
    if within:
        get_redis().expire(stream_key(job_id), within)
    else:
        get_redis().delete(stream_key(job_id))


async def aforget(job_id) -> None:
    await get_async_redis().delete(stream_key(job_id))


def restart(job_id, lost_attempt: int) -> None:
    """Begin the job's stream again after run `lost_attempt` was lost: a later reader sees only the
    new run (readers already reading see `restart`: new entry ids are greater than the old ones),
    and the lost run, should it still be alive, stops (`cancel_requested`)."""
    key = stream_key(job_id)
    pipe = get_redis().pipeline(transaction=True)
    pipe.set(superseded_key(job_id), lost_attempt, ex=settings.TTS_STREAM_TTL)
    pipe.delete(key)
    pipe.xadd(key, {"type": "restart"})
    pipe.expire(key, settings.TTS_STREAM_TTL)
    pipe.execute()


def has_audio(job_id) -> bool:
    """Whether the job's stream holds audio (readers may have passed some on)."""
    return any(fields.get(b"type") == b"audio" for _, fields in get_redis().xrange(stream_key(job_id), count=16))


async def starts_at_beginning(job_id) -> bool:
    """Whether the job's stream still holds its first audio (or none yet): an asynchronous job's
    stream keeps its last events only."""
    entries = await get_async_redis().xrange(stream_key(job_id), count=64)
    seqs = [fields.get(b"seq") for _, fields in entries if fields.get(b"type") == b"audio"]
    return not seqs or seqs[0] == b"0"


async def exists(job_id) -> bool:
    return bool(await get_async_redis().exists(stream_key(job_id)))


def publish_error(job_id, status: int, code: str, message: str) -> None:
    """The job ended without (all of) its audio: readers raise this as an API error."""
    publish(job_id, "error", status=status, code=code, message=message)


async def read(job_id, after: str = "0-0", block_ms: int = 1000) -> AsyncIterator[Event | None]:
    """Yield events after `after` in order; yields None whenever `block_ms` pass with nothing new,
    so the caller can enforce its own deadlines."""
    r = get_async_redis()
    key = stream_key(job_id)
    last = after
    while True:
        reply = await r.xread({key: last}, block=block_ms, count=64)
        if not reply:
            yield None
            continue
        for entry_id, raw in reply[0][1]:
            last = entry_id.decode()
            fields = {k.decode(): v for k, v in raw.items()}
            yield Event(id=last, type=fields.pop("type").decode(), fields=fields)


def cancel_key(job_id) -> str:
    return f"tts:job:{job_id}:cancel"


def request_cancel(job_id) -> None:
    """Ask the worker running the job to stop; it checks between chunks."""
    get_redis().set(cancel_key(job_id), "1", ex=settings.TTS_STREAM_TTL)


async def arequest_cancel(job_id) -> None:
    await get_async_redis().set(cancel_key(job_id), "1", ex=settings.TTS_STREAM_TTL)


def cancel_requested(job_id, attempt: int = 0) -> bool:
    """Whether the run `attempt` of the job should stop: a cancel request, or the job was taken
    from it (queued again as lost: a run stalled past its heartbeat, not dead after all)."""
    cancelled, superseded = (
        get_redis().pipeline(transaction=False).exists(cancel_key(job_id)).get(superseded_key(job_id)).execute()
    )
    return bool(cancelled) or (superseded is not None and int(superseded) >= attempt > 0)


def supersede(job_id, attempt: int) -> None:
    """Run `attempt` of the job must stop (it no longer holds the job)."""
    get_redis().set(superseded_key(job_id), attempt, ex=settings.TTS_STREAM_TTL)


def superseded_key(job_id) -> str:
    return f"tts:job:{job_id}:superseded"
