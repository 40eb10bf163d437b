"""A synthesis worker process's life: which engine it serves (the one whose queue, `tts-<engine>`,
it consumes), the engine loaded once at start with that engine's settings, the batcher around it,
its registration (heartbeat) and its leaving. Tasks find the engine here (`current`)."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from django.conf import settings

from inference import registry
from inference.engine import Engine, EngineOptions, ModelUnavailable
from inference.spec import CPU_MAX_BATCH
from inference.text.preparation import preload as preload_normalizers
from synthesis.service import routing, workers
from synthesis.worker import metrics as worker_metrics
from synthesis.worker.batcher import Batcher

logger = logging.getLogger(__name__)


@dataclass
class Serving:
    engine_name: str = ""  # empty: this process serves no engine (the light worker)
    queue: str = ""  # its own queue, beside the engine's, for the voices it owns (`routing`); "" none
    engine: Engine | None = None
    batcher: Batcher | None = None
    load_error: str | None = None
    max_batch: int = 0  # rows generated together: TTS_MAX_BATCH, or the engine's default (`load`)


current = Serving()


def engine_of_queues(queues) -> str:
    """The engine a worker consuming `queues` serves ("" for none); exits when it names several
    (one model-owning process per engine) or a queue of an engine this code does not know."""
    names = [q for q in queues if q.startswith("tts-")]
    engines = [name.removeprefix("tts-") for name in names]
    problem = ""
    if len(engines) > 1:
        problem = f"a worker serves one engine; it was given the queues {', '.join(names)}"
    elif engines and engines[0] not in registry.SPECS:
        problem = f"no engine '{engines[0]}' (queue {names[0]}); engines: {', '.join(registry.SPECS)}"
    if problem:
        stop(problem)
    return engines[0] if engines else ""


def stop(problem: str) -> None:
    logger.critical("cannot start a synthesis worker: %s", problem)
    print(f"error: cannot start a synthesis worker: {problem}", file=sys.stderr, flush=True)
    sys.exit(2)


def options(engine: str) -> EngineOptions:
    return EngineOptions(
        model_dir=settings.TTS_MODEL_DIRS.get(engine, ""),
        device=settings.TTS_DEVICE,
        hf_cache_dir=settings.TTS_HF_CACHE_DIR,
        fixed_length=settings.TTS_BENCH_FIXED_LENGTH,
        precision=settings.TTS_PRECISION,
        threads=settings.TTS_TORCH_THREADS,
    )


def start(sender) -> None:
    """Celery's worker_init: a worker on an engine's queue checks its model directory (a wrong one
    stops it at once), loads the engine, then runs a task thread per row it generates together
    (TTS_MAX_BATCH, or the engine's default for its device)."""
    queues = sender.app.amqp.queues.consume_from if sender is not None else {}
    name = engine_of_queues(queues or {})
    if not name:
        return
    current.engine_name = name
    model_dir = settings.TTS_MODEL_DIRS.get(name, "")
    if model_dir:
        problem = registry.engine_class(name).check_model_dir(model_dir)
        if problem:
            stop(problem)
    if routing.takes_routed_jobs(name):  # the jobs of the voices it owns come on a queue of its own
        current.queue = routing.own_queue(name)
        sender.app.amqp.queues.select_add(current.queue)
    load()
    # One engine per process, shared by a thread per job of a batch (the pool starts after this).
    sender.pool_cls, sender.concurrency = "threads", current.max_batch or settings.TTS_MAX_BATCH or CPU_MAX_BATCH


def load() -> None:
    name = current.engine_name
    try:
        engine = registry.load(name, options(name))
        engine.keep_voice_prompts(int(settings.TTS_VOICE_PROMPT_MB * 2**20))
        preload_normalizers()  # ~2 s: at start, not on the first job
        if settings.TTS_WARMUP:
            engine.warm_up()
    except ModelUnavailable as exc:
        current.load_error = str(exc)
        logger.critical("speech model unavailable: %s", exc)
        workers.start_heartbeat(name, "unavailable", error=current.load_error)
        return
    chunk_tokens = max(1, round(settings.TTS_STREAM_CHUNK_SECONDS * engine.spec.tokens_per_second))
    current.engine = engine
    current.max_batch = settings.TTS_MAX_BATCH or engine.default_max_batch()
    current.batcher = Batcher(
        engine,
        current.max_batch,
        settings.TTS_BATCH_GATHER_SECONDS,
        chunk_tokens,
        continuous=settings.TTS_CONTINUOUS_BATCHING,
    )
    if engine.random_weights:
        logger.warning("serving a RANDOMLY INITIALISED checkpoint: output is noise, not speech")
    workers.start_heartbeat(
        name, "ready", model_version=engine.model_version, capacity=current.max_batch, queue=current.queue
    )
    worker_metrics.serve(settings.TTS_WORKER_METRICS_PORT)
    logger.info(
        "synthesis worker ready",
        extra={"engine": name, "model_version": engine.model_version, "batch": current.max_batch},
    )


def draining() -> None:
    """A warm shutdown began: no new jobs are routed here while it finishes those it has."""
    if current.engine is not None:
        try:
            workers.draining()
        except Exception:  # Redis away: the registration runs out by itself
            pass


def leave() -> None:
    if current.engine_name:
        try:
            workers.unregister()
        except Exception:  # shutting down; the registration times out by itself
            pass
