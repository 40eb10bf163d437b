"""Speaker-sharded routing: a job whose voice (its own, else an SSML `<voice>` span's) has a prompt
worth keeping (a VoxCPM2 clone: its reference's key/value prefix, `EngineSpec.voice_affinity`) goes
to the worker that owns that voice, so that the prompt is built on one worker and kept there, not
on every worker in turn.

A voice is given an owner the first time it is routed, and keeps it while that worker is ready (a
table in Redis, shared by every web process; a voice unused for an hour is nobody's again): the
first worker in the voice's rendezvous order (hashing over the engine's ready workers that take
routed jobs, each consuming its own queue, `<engine queue>.<worker id>`, beside the engine's shared
one) that owns fewer than its share of the voices in use, by capacity — consistent hashing with
bounded loads, so that six voices do not land five on one worker. A worker that goes moves only its
own voices (each to the next in its order with room); one that comes takes new voices, and moves
none. A job goes to the shared queue instead when routing is off (TTS_VOICE_ROUTING), its voice
has nothing to keep, no live worker takes routed jobs, or its owner has a batch's worth of routed
jobs waiting and more than the engine's average ahead (it would wait longer than any other
worker's job).

Routed jobs waiting are counted per worker queue in Redis (noted when sent, dropped when claimed).
A worker queue whose worker is gone (stopped, crashed, or leaving) is emptied by beat
(`rescue_routed`): its jobs still queued are sent to the shared queue (a message that outlives this
is harmless: a job is claimed once), and the queue itself deleted.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections import Counter
from collections.abc import Mapping, Sequence

from django.conf import settings

from inference.registry import SPECS
from synthesis.service import capacity
from synthesis.service.workers import WorkerState, live_workers, worker_name
from tts_saas.queueing import delete_queue
from tts_saas.redis import get_redis

logger = logging.getLogger(__name__)

ROUTED = "tts:routed:{}"  # per worker queue, a sorted set: job id -> sent at
ROUTED_JOBS = "tts:routed"  # a hash: job id -> the worker queue it was sent to
QUEUES = "tts:routed:queues"  # a hash: worker queue -> its engine
OWNERS = "tts:owners:{}"  # per engine, a hash: voice key -> its owner's name (and `:used`: last routed at)
OWNER_IDLE_SECONDS = 3600  # a voice unused this long is nobody's any more (a returning one is given anew)


def own_queue(engine: str, name: str = "") -> str:
    """The queue of this worker process (or the worker `name`): the engine's queue and an id."""
    worker = name or worker_name()
    return f"{SPECS[engine].queue_name}.{hashlib.sha256(worker.encode()).hexdigest()[:12]}"


def takes_routed_jobs(engine: str) -> bool:
    """Whether a worker of `engine` consumes a queue of its own (its voices have prompts to keep)."""
    return settings.TTS_VOICE_ROUTING and SPECS[engine].voice_affinity is not None


def _score(key: str, worker: WorkerState) -> int:
    return int.from_bytes(hashlib.sha256(f"{key}|{worker.name}".encode()).digest()[:8], "big")


def owner(key: str, states: list[WorkerState], owners: dict[str, str] | None = None) -> WorkerState | None:
    """The ready worker that owns the voice `key`: the one `owners` (voice key -> worker name) gives
    it to while that one lives, else the first in the voice's rendezvous order (highest score first)
    that owns fewer than its share of the voices in use, by capacity (bounded loads: a few voices do
    not all land on one worker); None when no ready worker takes routed jobs."""
    ready = [w for w in states if w.status == "ready" and w.queue]
    if not ready:
        return None
    live = {w.name: w for w in ready}
    owners = owners or {}
    if owners.get(key) in live:
        return live[owners[key]]
    owned = Counter(name for voice, name in owners.items() if name in live and voice != key)
    voices, capacity_total = sum(owned.values()) + 1, sum(w.capacity for w in ready)
    ordered = sorted(ready, key=lambda w: _score(key, w), reverse=True)
    return next(w for w in ordered if owned[w.name] < math.ceil(voices * w.capacity / capacity_total))


def affinity_key(engine: str, params: dict, styles: Sequence[Mapping] = ()) -> str:
    """The voice a job is routed by: its own, else the first SSML `<voice>` span's (a segment's
    `params` in the job's `styles`) that has a prompt to keep; "" when none has."""
    spec = SPECS[engine]
    if not (settings.TTS_VOICE_ROUTING and spec.voice_affinity):
        return ""
    candidates = [params, *(style["params"] for style in styles if style.get("params"))]
    return next((key for key in map(spec.voice_affinity, candidates) if key), "")


def queue_for(engine: str, params: dict, styles: Sequence[Mapping] = ()) -> str:
    """The queue a job of `engine` with these parameters (the job's `params`, and its segments'
    `styles`) is sent to."""
    shared = SPECS[engine].queue_name
    key = affinity_key(engine, params, styles)
    if not key:
        return shared
    states = live_workers(engine)
    r = get_redis()
    table = OWNERS.format(engine)
    owners = {voice.decode(): name.decode() for voice, name in r.hgetall(table).items()}
    chosen = owner(key, states, owners)
    if chosen is None:
        return shared
    now = time.time()
    if owners.get(key) != chosen.name:  # a new voice, or its owner gone: given to `chosen`
        r.hset(table, key, chosen.name)
        idle = [v.decode() for v in r.zrangebyscore(f"{table}:used", 0, now - OWNER_IDLE_SECONDS)]
        if idle:  # voices unused for long lose their owner (they count for nobody's share)
            r.hdel(table, *idle)
            r.zrem(f"{table}:used", *idle)
    r.zadd(f"{table}:used", {key: now})
    routed = r.zcard(ROUTED.format(chosen.queue))
    if routed >= chosen.capacity:  # a batch's worth waits for it already: is the engine less busy?
        ready = [w for w in states if w.status == "ready"]
        total = sum(w.capacity for w in ready)
        waiting = r.zcard(capacity.WAITING.format(engine))
        if routed / max(1, chosen.capacity) > waiting / max(1, total):
            return shared
    return chosen.queue


def note_routed(job_id, queue: str, engine: str, sent_at: float) -> None:
    pipe = get_redis().pipeline(transaction=False)
    pipe.zadd(ROUTED.format(queue), {str(job_id): sent_at})
    pipe.hset(ROUTED_JOBS, str(job_id), queue)
    pipe.hset(QUEUES, queue, engine)
    pipe.execute()


def note_claimed(job_id) -> None:
    r = get_redis()
    queue = r.hget(ROUTED_JOBS, str(job_id))
    if queue is None:
        return
    pipe = r.pipeline(transaction=False)
    pipe.zrem(ROUTED.format(queue.decode()), str(job_id))
    pipe.hdel(ROUTED_JOBS, str(job_id))
    pipe.execute()


def rescue_routed(resend) -> int:
    """Worker queues whose worker is not ready any more: their queued jobs `resend(job_id, engine)`
    to the shared queue, the queue deleted. Returns how many jobs were sent again. Run by beat."""
    r = get_redis()
    queues = {q.decode(): e.decode() for q, e in r.hgetall(QUEUES).items()}
    if not queues:
        return 0
    serving = {w.queue for w in live_workers() if w.status == "ready" and w.queue}
    moved = 0
    for queue, engine in queues.items():
        if queue in serving:
            continue
        jobs = [j.decode() for j in r.zrange(ROUTED.format(queue), 0, -1)]
        for job_id in jobs:
            moved += bool(resend(job_id, engine))
        if jobs:
            r.hdel(ROUTED_JOBS, *jobs)
        r.delete(ROUTED.format(queue))
        r.hdel(QUEUES, queue)
        try:
            delete_queue(queue)
        except Exception:  # the broker away: its messages are harmless once the jobs are sent again
            logger.warning("could not delete a gone worker's queue", extra={"queue": queue}, exc_info=True)
        logger.info("a gone worker's routed jobs sent to the shared queue", extra={"queue": queue, "jobs": len(jobs)})
    return moved
