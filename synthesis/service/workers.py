"""Which synthesis workers are alive, which engine and model version they serve, and whether it
loaded.

Each worker process registers itself in a sorted set scored by the time its registration runs out
and renews it from a heartbeat thread. The web refuses at once with 503 when no worker is ready,
rather than queueing a job nobody will run.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass

from django.conf import settings

from inference.spec import RANDOM_WEIGHTS
from tts_saas.redis import get_async_redis, get_redis

REGISTRY = "tts:workers"
INFO = "tts:workers:info"
VERSIONS = "tts:model_versions:{}"  # per engine, a sorted set: model version -> last time a worker served it


@dataclass(frozen=True)
class WorkerState:
    name: str
    status: str  # "ready", "unavailable" (its model did not load) or "draining" (leaving)
    model_version: str
    error: str
    capacity: int = 1  # jobs it generates at once (its batch size)
    engine: str = ""  # the engine (model id) it serves
    queue: str = ""  # its own queue, where it takes the jobs of the voices it owns (`routing`); "" none


_NONCE = uuid.uuid4().hex[:8]  # a restarted container keeps its hostname and often its pid


def worker_name() -> str:
    """host:pid:nonce — unique per process, even across restarts of the same container."""
    return f"{socket.gethostname()}:{os.getpid()}:{_NONCE}"


def register(
    engine: str, status: str, model_version: str = "", error: str = "", capacity: int = 1, queue: str = ""
) -> None:
    name = worker_name()
    info = json.dumps(
        {
            "engine": engine,
            "status": status,
            "model_version": model_version,
            "error": error,
            "capacity": capacity,
            "queue": queue,
        }
    )
    pipe = get_redis().pipeline()
    pipe.zadd(REGISTRY, {name: time.time() + settings.TTS_WORKER_HEARTBEAT_TTL})
    pipe.hset(INFO, name, info)
    if status == "ready":
        pipe.zadd(VERSIONS.format(engine), {model_version: time.time()})
    pipe.execute()


def draining() -> None:
    """This worker is leaving (a warm shutdown): it finishes its jobs and takes no new ones, so the
    web routes no job to it (`routing`) and counts it out of the engine's capacity."""
    if _registration:
        _registration["status"] = "draining"
        register(**_registration)


def unregister() -> None:
    name = worker_name()
    pipe = get_redis().pipeline()
    pipe.zrem(REGISTRY, name)
    pipe.hdel(INFO, name)
    pipe.execute()


_registration: dict = {}  # what this process's heartbeat registers


def start_heartbeat(
    engine: str, status: str, model_version: str = "", error: str = "", capacity: int = 1, queue: str = ""
) -> threading.Thread:
    _registration.update(
        engine=engine, status=status, model_version=model_version, error=error, capacity=capacity, queue=queue
    )
    register(**_registration)

    def beat() -> None:
        while True:
            time.sleep(settings.TTS_WORKER_HEARTBEAT_TTL / 4)
            try:
                register(**_registration)
            except Exception:  # Redis briefly away: the next beat retries
                pass

    thread = threading.Thread(target=beat, name="tts-heartbeat", daemon=True)
    thread.start()
    return thread


def _parse(names: list[bytes], infos: list[bytes | None]) -> list[WorkerState]:
    states = []
    for name, raw in zip(names, infos, strict=True):
        if raw is None:
            continue
        info = json.loads(raw)
        states.append(
            WorkerState(
                name.decode(),
                info["status"],
                info["model_version"],
                info["error"],
                info.get("capacity", 1),
                info.get("engine", ""),
                info.get("queue", ""),
            )
        )
    return states


def live_workers(engine: str = "") -> list[WorkerState]:
    """The live workers (of one engine, when named)."""
    r = get_redis()
    names = r.zrangebyscore(REGISTRY, time.time(), "+inf")
    states = _parse(names, r.hmget(INFO, names) if names else [])
    return [w for w in states if w.engine == engine] if engine else states


def serves_random_weights(engine: str) -> bool | None:
    """Whether `engine`'s ready workers load randomly initialised weights (noise, not speech: their
    model version says so): True when any does, False when none does, None when none is ready."""
    versions = [w.model_version for w in live_workers(engine) if w.status == "ready"]
    return any(v.endswith(RANDOM_WEIGHTS) for v in versions) if versions else None


def lapsed_workers() -> set[str]:
    """Workers whose registration ran out (killed, crashed, stalled): still listed, not renewed.
    A worker with no registration at all is not among them: after a Redis restart the registry
    is empty until the next heartbeats, and those workers are alive."""
    return {name.decode() for name in get_redis().zrangebyscore(REGISTRY, "-inf", time.time())}


def forget_dead_workers() -> int:
    """Drop the registrations of processes that stopped beating (crashed, killed): their entries
    would otherwise stay in Redis for ever. Run by beat."""
    r = get_redis()
    dead = r.zrangebyscore(REGISTRY, "-inf", time.time() - settings.TTS_WORKER_HEARTBEAT_TTL)
    if dead:
        pipe = r.pipeline()
        pipe.zrem(REGISTRY, *dead)
        pipe.hdel(INFO, *dead)
        pipe.execute()
    return len(dead)


async def live_workers_async(engine: str = "") -> list[WorkerState]:
    r = get_async_redis()
    names = await r.zrangebyscore(REGISTRY, time.time(), "+inf")
    states = _parse(names, await r.hmget(INFO, names) if names else [])
    return [w for w in states if w.engine == engine] if engine else states


_versions: dict[str, tuple[float, list[str]]] = {}
VERSIONS_MEMO_SECONDS = 2.0


async def recent_model_versions(engine: str, limit: int = 3) -> list[str]:
    """The engine's versions served lately, newest first: cached audio stays reachable while workers
    restart. Memoised for a moment per process: read on every speech request, it changes rarely."""
    read_at, names = _versions.get(engine, (0.0, []))
    if time.monotonic() - read_at > VERSIONS_MEMO_SECONDS or not names:
        names = [n.decode() for n in await get_async_redis().zrevrange(VERSIONS.format(engine), 0, limit - 1)]
        _versions[engine] = (time.monotonic(), names)
    return names
