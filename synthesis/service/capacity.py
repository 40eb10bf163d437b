"""How busy the synthesis workers are, so that admission can tell a busy queue from a dead one.

Per engine (each has its own queue and workers), Redis holds the jobs waiting for a worker
(`WAITING`, by enqueue time), the measured service time of a job (an exponentially weighted mean
over finished jobs), and the last time any of its workers made progress (claimed a job, generated
audio, finished one). A new job's estimated wait is the work
ahead of it divided by the ready workers' capacity (rows per batch): admission refuses at once
when that is beyond `TTS_MAX_QUEUE_WAIT`; a waiting job is given up only when no worker has made
progress for `TTS_QUEUE_TIMEOUT` (dead or stuck workers), or past its deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from inference.spec import CPU_MAX_BATCH
from synthesis.service.workers import WorkerState
from tts_saas.redis import get_async_redis, get_redis

WAITING = "tts:queue:{}:waiting"  # per engine, a sorted set: job id -> enqueued at
SERVICE = "tts:queue:{}:service"  # per engine, a hash: job_seconds (weighted mean), jobs (count)
PROGRESS = "tts:queue:{}:progress"  # per engine: unix time a worker last claimed, generated or finished
SMOOTHING = 0.2  # weight of the newest job in the mean

_RECORD = """
local old = tonumber(redis.call('HGET', KEYS[1], 'job_seconds'))
local new = tonumber(ARGV[1])
if old then new = old + tonumber(ARGV[2]) * (new - old) end
redis.call('HSET', KEYS[1], 'job_seconds', new)
redis.call('HINCRBY', KEYS[1], 'jobs', 1)
return tostring(new)
"""


def note_waiting(engine: str, job_id) -> None:
    get_redis().zadd(WAITING.format(engine), {str(job_id): time.time()})


def note_not_waiting(engine: str, job_id) -> None:
    get_redis().zrem(WAITING.format(engine), str(job_id))


# The batch fair_priority counts in when TTS_MAX_BATCH is 0 (each worker sizes its own batch, which
# the web does not know): a CPU worker's default, the stricter share on a GPU.
FAIR_BATCH = CPU_MAX_BATCH


def fair_priority(plan_priority: int, unfinished_before: int, batch: int) -> int:
    """The queue priority of a tenant's next job (0 is served first): its plan's, lowered by one
    for each batch (`batch` rows; 0: FAIR_BATCH) of that tenant's jobs not finished yet, so that one
    tenant's burst queues behind another tenant's single request instead of in front of it."""
    return min(9, plan_priority + unfinished_before // (batch if batch > 0 else FAIR_BATCH))


def note_progress(engine: str) -> None:
    get_redis().set(PROGRESS.format(engine), time.time())


def record_job_seconds(engine: str, seconds: float) -> None:
    """A job finished after `seconds` on its worker (claim to end)."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.eval(_RECORD, 1, SERVICE.format(engine), seconds, SMOOTHING)
    pipe.set(PROGRESS.format(engine), time.time())
    pipe.execute()


@dataclass(frozen=True)
class QueueState:
    waiting: int  # jobs not started yet
    capacity: int  # jobs the ready workers generate at once
    job_seconds: float | None  # measured time of one job on a worker (None before the first)
    last_progress: float | None  # unix time

    @property
    def service_rate(self) -> float | None:
        """Jobs per second the ready workers finish when busy."""
        if not self.job_seconds or not self.capacity:
            return None
        return self.capacity / self.job_seconds

    def estimated_wait(self, ahead: int | None = None) -> float | None:
        """Seconds until a job with `ahead` jobs before it (default: all that wait) starts."""
        rate = self.service_rate
        if rate is None:
            return None
        return (self.waiting if ahead is None else ahead) / rate


def _state(waiting: int, service: dict, progress, workers: list[WorkerState]) -> QueueState:
    job_seconds = service.get(b"job_seconds")
    return QueueState(
        waiting=waiting,
        capacity=sum(w.capacity for w in workers if w.status == "ready"),
        job_seconds=float(job_seconds) if job_seconds is not None else None,
        last_progress=float(progress) if progress is not None else None,
    )


def queue_state(engine: str, workers: list[WorkerState]) -> QueueState:
    """The engine's queue, served by `workers` (its own)."""
    r = get_redis()
    keys = (WAITING.format(engine), SERVICE.format(engine), PROGRESS.format(engine))
    return _state(r.zcard(keys[0]), r.hgetall(keys[1]), r.get(keys[2]), workers)


async def queue_state_async(engine: str, workers: list[WorkerState]) -> QueueState:
    r = get_async_redis()
    keys = (WAITING.format(engine), SERVICE.format(engine), PROGRESS.format(engine))
    return _state(await r.zcard(keys[0]), await r.hgetall(keys[1]), await r.get(keys[2]), workers)


async def last_progress_async(engine: str) -> float | None:
    value = await get_async_redis().get(PROGRESS.format(engine))
    return float(value) if value is not None else None
