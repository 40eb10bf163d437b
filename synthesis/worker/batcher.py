"""The model-owning loop of a synthesis worker process: one thread drives the engine; Celery's
task threads hand it claimed jobs and wait. It gathers what waits (for at most
TTS_BATCH_GATHER_SECONDS once something does), fills a batch of up to TTS_MAX_BATCH rows —
round-robin over organizations, paid plans first in each round, one segment per job per round,
the earliest listener deadline first where the room runs out —
and runs it on the worker's engine. Jobs arriving meanwhile join the running batch at its next step
while it has room (continuous batching), filled the same way. Each row streams to its own job, and a job settles
— and its task thread is free for the next job — the moment its last row ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from django.conf import settings
from django.db import close_old_connections

from inference.batch import BatchRow, Word
from inference.device import device_stats
from synthesis.service.jobs import fail_job
from synthesis.worker import memory
from synthesis.worker import metrics as worker_metrics
from synthesis.worker.run import JobRun

logger = logging.getLogger(__name__)

CONNECTION_CHECK_SECONDS = 5.0


class _Sink:
    """Routes the engine's per-row callbacks to the rows' jobs (`runs` grows as jobs join)."""

    def __init__(self, runs: dict[str, JobRun], settled):
        self.runs = runs
        self.settled = settled  # called with a run once it has settled

    def _route(self, key: str) -> tuple[JobRun, int]:
        run_id, _, segment = key.rpartition(":")
        return self.runs[run_id], int(segment)

    def audio(self, key: str, samples: np.ndarray) -> None:
        run, segment = self._route(key)
        try:
            run.audio(segment, samples)
        except Exception:  # one job's failure (Redis away, say) must not end its companions' rows
            logger.exception("could not publish a job's audio", extra={"job_id": str(run.job.id)})
            close_old_connections()
            try:
                run.fail(503, "synthesis_failed", "Synthesis failed on the worker.")
            except Exception:
                logger.exception("could not fail a job", extra={"job_id": str(run.job.id)})

    def done(self, key: str, tokens: int, words: Sequence[Word] = ()) -> None:
        run, segment = self._route(key)
        try:
            run.done(segment, tokens, words)  # the last segment settles the job (cache, storage, ledger)
        except Exception:  # one job's failure must not end its batch companions' rows
            logger.exception("could not settle a job", extra={"job_id": str(run.job.id)})
            run.finished = True
            run.pcm.close()
            close_old_connections()  # the database may have restarted under the batch
            try:  # settles only a job still running (refunded); the reaper does it if this fails too
                fail_job(run.job, 500, "synthesis_failed", "Synthesis failed on the worker.")
            except Exception:
                logger.exception("could not fail a job", extra={"job_id": str(run.job.id)})
        if run.finished and run.in_flight == 0:
            self.settled(run)
            self.runs.pop(run.run_id, None)  # its audio goes with it (a continuous batch may never end)

    def stop_requested(self, key: str) -> bool:
        run, _ = self._route(key)
        return run.stop_requested()


class Batcher:
    def __init__(self, engine, max_batch: int, gather_seconds: float, chunk_tokens: int, continuous: bool = True):
        self.engine = engine
        self.continuous = continuous  # jobs join a running batch (else they wait for the next one)
        self.max_batch = max_batch
        self.gather_seconds = gather_seconds
        self.chunk_tokens = chunk_tokens
        # An engine that makes each sentence whole: a live job's first sentence runs without its
        # next ones in the same batch (its first audio is one sentence away), and its later
        # sentences follow one a forward (`JobRun.ahead`; an asynchronous job's in growing groups,
        # 1, 1, 2, 4, …), each made while the audio before it plays; rows of other jobs fill the
        # rest of each forward.
        self.first_alone = engine.spec.features.streaming == "sentences"
        self._waiting: list[JobRun] = []  # claimed jobs with segments not yet in a batch
        self._done: dict[str, threading.Event] = {}
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="tts-batcher", daemon=True)
        self._thread.start()

    def run(self, run: JobRun) -> None:
        """Generate a claimed job; returns when it has settled (the Celery task then acks)."""
        finished = threading.Event()
        with self._cond:
            self._done[run.run_id] = finished
            self._waiting.append(run)
            self._cond.notify()
        finished.wait()

    def _loop(self) -> None:
        while True:
            try:
                self._run_next()
            except Exception:  # never let the model's thread die: every waiting task would hang
                logger.exception("batcher error")
                time.sleep(1)

    def _run_next(self) -> None:
        rows, runs = self._next_batch()
        if not rows:
            return
        close_old_connections()  # a long-lived thread: drop connections the database closed
        logger.info("batch", extra={"rows": len(rows), "jobs": sorted(runs)})
        worker_metrics.BATCH_ROWS.observe(len(rows))

        checked = [time.monotonic()]

        def more(live: int, urgent: bool = False) -> list[BatchRow]:
            """Jobs that arrived while the batch runs join it, as far as it has room (`urgent`: only
            live requests' first segments, which the engine may start between two windows)."""
            if time.monotonic() - checked[0] > CONNECTION_CHECK_SECONDS:  # a batch may outlive a database restart
                close_old_connections()
                checked[0] = time.monotonic()
            if live >= self.max_batch or not self._waiting:  # read without the lock: a hint
                return []
            if urgent and not self._live_first_sentence():  # read without the lock: a hint
                return []
            with self._cond:
                self._settle_stopped()
                joining, joined = self._fill(self.max_batch - live, first_only=urgent)
            if joining:
                runs.update(joined)
                logger.info("rows join the batch", extra={"rows": len(joining), "jobs": sorted(joined)})
                worker_metrics.BATCH_ROWS.observe(live + len(joining))
            return joining

        try:
            joins = more if self.continuous else None
            self.engine.generate_batch(rows, _Sink(runs, self._settled), chunk_tokens=self.chunk_tokens, more=joins)
        except Exception:
            logger.exception("batch failed", extra={"rows": len(rows)})
            for run in runs.values():
                try:
                    run.fail(500, "synthesis_failed", "Synthesis failed on the worker.")
                except Exception:  # the database is away: the reaper settles the job later
                    logger.exception("could not settle a failed job", extra={"job_id": str(run.job.id)})
        self._release(runs)
        worker_metrics.observe_device(device_stats(self.engine.device))
        worker_metrics.observe_prompts(self.engine.voice_prompt_counts())
        memory.check(settings.TTS_WORKER_MAX_MEMORY_MB)

    def _next_batch(self) -> tuple[list[BatchRow], dict[str, JobRun]]:
        with self._cond:
            while True:
                self._settle_stopped()
                if self._waiting:
                    break
                self._cond.wait()
            deadline = time.monotonic() + self.gather_seconds
            while sum(r.total - r.scheduled for r in self._waiting) < self.max_batch:
                if self._live_first_sentence():
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            rows, runs = self._fill()
        return rows, runs

    def _live_first_sentence(self) -> bool:
        """Whether a live job's first sentence is waiting, on an engine that makes sentences whole:
        it waits for no companion (its first audio is that sentence); later ones join at the next
        step (continuous batching)."""
        return self.first_alone and any(r.awaits_first_audio for r in self._waiting)

    def _fill(self, room: int | None = None, first_only: bool = False) -> tuple[list[BatchRow], dict[str, JobRun]]:
        """Up to `room` rows (TTS_MAX_BATCH): round-robin over organizations (paid plans first, then
        the earliest listener deadline), one segment per job per round, each organization's jobs
        earliest deadline first (`JobRun.next_deadline`: a stream about to run dry before one with
        audio in hand, either before an asynchronous job; `first_only`: only live jobs' first
        segments)."""
        room = self.max_batch if room is None else room
        by_org: dict[int, list[JobRun]] = defaultdict(list)
        for run in self._waiting:
            if run.has_rows and self._may_add(run) and (not first_only or run.awaits_first_audio):
                by_org[run.org_id].append(run)
        for queue in by_org.values():  # each organization's streams earliest listener deadline first
            queue.sort(key=lambda r: r.next_deadline)
        order = sorted(by_org, key=lambda org: (min(r.priority for r in by_org[org]), by_org[org][0].next_deadline))
        rows: list[BatchRow] = []
        runs: dict[str, JobRun] = {}
        while len(rows) < room and any(by_org.values()):
            for org in order:
                queue = by_org[org]
                while queue and not (queue[0].has_rows and self._may_add(queue[0])):
                    queue.pop(0)
                if not queue or len(rows) >= room:
                    continue
                run = queue.pop(0)
                rows.append(run.next_row())
                runs[run.run_id] = run
                if run.has_rows and self._may_add(run) and not first_only:
                    queue.append(run)  # its next segment waits for the next round
        self._waiting = [r for r in self._waiting if r.has_rows]
        return rows, runs

    def _may_add(self, run: JobRun) -> bool:
        """Whether another row of `run` may join now: always on an engine that streams within a row
        (its later rows' audio is held, made ahead, while the first plays); on one that makes each
        sentence whole, while fewer than `run.ahead` of its rows are in flight."""
        return not self.first_alone or run.in_flight < run.ahead

    def _settle_stopped(self) -> None:
        """A job cancelled while it waited (nothing of it in a batch) settles now."""
        for run in list(self._waiting):
            if run.in_flight == 0 and run.stop_requested():
                run.finish()
                self._waiting.remove(run)
                done = self._done.pop(run.run_id, None)  # None: settled already, as its last row ended
                if done is not None:
                    done.set()

    def _settled(self, run: JobRun) -> None:
        """A job of the running batch has settled: its task returns (and Celery may hand the
        thread the next job) now, not when the batch ends."""
        with self._cond:
            done = self._done.pop(run.run_id, None)
        if done is not None:
            done.set()

    def _release(self, runs: dict[str, JobRun]) -> None:
        """After a batch: wake the tasks of the jobs that settled; a job the engine left
        unfinished (a row never ended) fails rather than hangs."""
        with self._cond:
            for job_id, run in runs.items():
                if not run.finished and run.in_flight:
                    logger.error("a row never ended", extra={"job_id": job_id})
                    run.fail(500, "synthesis_failed", "Synthesis failed on the worker.")
                if run.finished and job_id in self._done:
                    self._done.pop(job_id).set()
