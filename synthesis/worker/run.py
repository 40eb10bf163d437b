"""The worker side of one job while it is generated: its segments become rows of the model's
batches; its audio is published in order (a later segment generated alongside an earlier one waits
its turn), with a pause between segments; when its last row ends it is cached or stored and settled
at once, whatever its batch companions are still doing. Cancelled, failed and timed-out jobs settle
here too."""

from __future__ import annotations

import json
import logging
import math
import tempfile
import time
from collections.abc import Sequence

import numpy as np
from django.conf import settings
from django.utils import timezone

from billing import concurrency
from inference.batch import BatchRow
from inference.batch import Word as RowWord
from inference.engine import Engine, to_pcm16
from synthesis.audio import cache, streams
from synthesis.audio.captions import Caption, Word
from synthesis.models import Job
from synthesis.service import capacity
from synthesis.service.jobs import fail_job, run_limit, settle_job
from synthesis.worker import metrics as worker_metrics
from synthesis.worker.store import store
from synthesis.worker.styling import Styling

logger = logging.getLogger(__name__)

STOP_CHECK_SECONDS = 0.05  # how often a running job looks for a cancel request (one Redis round trip)
PROGRESS_SECONDS = 0.5  # how often a busy worker says so (waiting requests then keep waiting)
LEASE_RENEW_SECONDS = 60  # how often a running job holds its concurrency slot for another run limit
SPOOL_BYTES = 16 * 1024 * 1024  # a job's audio beyond this waits in a temporary file, not in memory


class JobRun:
    """One claimed job on its way through the batches."""

    def __init__(self, job: Job, engine: Engine, priority: int = 0):
        self.job = job
        self.engine = engine
        self.rate = engine.spec.sample_rate  # of every sample this job publishes and stores
        self.model_version = engine.model_version
        self.priority = priority
        self.params = engine.spec.params(**job.params)
        self.styling = Styling(job, engine, self.params)  # SSML: each segment's parameters, pauses, marks
        # What the model reads: each segment spelled out (raises TextError before anything is sent).
        self.texts = [engine.read(s, p) for s, p in zip(job.segments, self.styling.params, strict=True)]
        self.words: dict[int, tuple[RowWord, ...]] = {}  # segment -> its words, where the engine times them
        self.total = len(job.segments)
        self.scheduled = 0  # segments handed to a batch
        self.completed: set[int] = set()  # segments generated to their end
        self.ended: set[int] = set()  # segments whose row is over (completed or stopped)
        self.playing = 0  # the segment whose audio is published now
        self.held: dict[int, list[np.ndarray]] = {}  # audio of later segments, waiting their turn
        self.pcm = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # the audio published, in order
        self.chunks = 0  # audio events published (each one's `seq`)
        # A live request's stream is kept whole (its reader may lag); an asynchronous job's keeps its
        # last events (its stored file has it all).
        self.keep = None if job.interactive else settings.TTS_STREAM_MAX_EVENTS
        self.position = 0  # samples published
        self.starts: dict[int, int] = {}  # segment -> its first sample
        self.last_word_end: float | None = None  # the closed segment's last word's end (s), where known
        self.captions: list[Caption] = []  # the sentences closed so far, in order
        self.continued = set(job.continued)  # segments that continue the sentence before
        self.closed = -1  # the last segment whose caption is made
        self.caption_from = 0  # the first segment of the caption being made
        self.open_caption: Caption | None = None  # a sentence's caption while its rest is generated
        self.started = time.monotonic()
        self.first_audio_at: float | None = None  # a live job's first audio published (monotonic)
        self.cancelled = False
        self.finished = False
        self._stop_checked = 0.0
        self._progress_at = 0.0
        self._lease_at = time.monotonic()
        self._opened: set[int] = set()  # segments whose audio has begun
        streams.publish(job.id, "start", model_version=self.model_version)
        if job.started_at is not None:
            worker_metrics.QUEUE_WAIT.observe((job.started_at - job.created_at).total_seconds())

    @property
    def org_id(self) -> int:
        return self.job.organization_id

    @property
    def run_id(self) -> str:
        """This run of the job: a job queued again after a lost worker may come back to the same
        worker while its stale run is still there."""
        return f"{self.job.id}.{self.job.attempts}"

    def key(self, segment: int) -> str:
        return f"{self.run_id}:{segment}"

    @property
    def awaits_first_audio(self) -> bool:
        """A live job none of whose rows has run yet: someone waits for its first audio."""
        return self.job.interactive and not self.scheduled

    @property
    def next_deadline(self) -> float:
        """When this job's listener runs out of audio (monotonic) unless its next row is made: a
        live job before its first audio, its arrival (its listener waits already); after it, its
        first audio plus the audio published since; an asynchronous job, never (nobody listens as
        it is made). The batcher takes each organization's rows earliest deadline first."""
        if not self.job.interactive:
            return math.inf
        if self.first_audio_at is None:
            return self.started
        return self.first_audio_at + self.position / self.rate

    @property
    def has_rows(self) -> bool:
        return not self.finished and not self.cancelled and self.scheduled < self.total

    def next_row(self) -> BatchRow:
        index = self.scheduled
        self.scheduled += 1
        text, params = self.texts[index], self.styling.params[index]
        budget = self.engine.row_budget(text, params)
        early = self.job.interactive and index == 0  # someone waits for its first audio
        # When the listener runs out of what is published: the engine makes the earliest first.
        deadline = None if self.first_audio_at is None else self.next_deadline
        return BatchRow(
            key=self.key(index), text=text, params=params, max_tokens=budget, early=early, deadline=deadline
        )

    # The engine's callbacks, routed here by segment.

    def audio(self, segment: int, samples: np.ndarray) -> None:
        self._route(segment, self.styling.shape(segment, samples))  # SSML: its pitch and volume

    def _route(self, segment: int, samples: np.ndarray) -> None:
        if segment == self.playing:
            self._publish(segment, samples)
        else:
            self.held.setdefault(segment, []).append(samples)

    def done(self, segment: int, tokens: int, words: Sequence[RowWord] = ()) -> None:
        worker_metrics.AUDIO_TOKENS.labels(self.job.model).inc(tokens)
        rest = self.styling.shape(segment, np.zeros(0, dtype=np.float32), last=True)  # a pitch filter's tail
        if len(rest):
            self._route(segment, rest)
        self.ended.add(segment)
        if self.engine.spec.features.word_timings:
            self.words[segment] = tuple(words)
        if not self.stop_requested():
            self.completed.add(segment)
            Job.objects.filter(pk=self.job.pk).update(progress=len(self.completed) / self.total)
        while self.playing in self.ended and self.playing + 1 < self.total:
            self._close(self.playing)
            self.playing += 1
            for samples in self.held.pop(self.playing, []):
                self._publish(self.playing, samples)
        if self.in_flight == 0 and (self.cancelled or self.scheduled == self.total):
            self.finish()

    @property
    def in_flight(self) -> int:
        """Rows of this job in the running batch."""
        return self.scheduled - len(self.ended)

    @property
    def ahead(self) -> int:
        """Rows of this job that may be in flight at once on an engine that makes each sentence
        whole. A live job's: one, in order: each sentence is made while the one before it plays
        (Kokoro makes a sentence in about half its length on two CPU cores, far less on a GPU) and
        reaches the listener before the next one is made, never together with it; other jobs' rows
        fill the rest of each forward. An asynchronous job's: as many as have ended, at least one
        (1, 1, 2, 4, … a forward: nobody listens as it is made, fewer forwards)."""
        return 1 if self.job.interactive else max(1, len(self.ended))

    def stop_requested(self) -> bool:
        """A cancel request (checked at most every STOP_CHECK_SECONDS) or the time limit."""
        if self.cancelled or self.finished:
            return True
        now = time.monotonic()
        if now - self._stop_checked >= STOP_CHECK_SECONDS:
            self._stop_checked = now
            if streams.cancel_requested(self.job.id, self.job.attempts):
                self.cancelled = True
            elif now - self.started > run_limit(self.job):
                self.fail(503, "synthesis_timeout", "Synthesis ran past its time limit.")
        return self.cancelled or self.finished

    def _publish(self, segment: int, samples: np.ndarray) -> None:
        if not len(samples):
            return
        if segment not in self._opened:
            self._opened.add(segment)
            before = self.position / self.rate - self.last_word_end if self.last_word_end is not None else 0.0
            gap = self.styling.gap(segment, segment in self.continued, before)  # between sentences; SSML's breaks
            if len(gap):
                self._publish_pcm(to_pcm16(gap))
            self.starts[segment] = self.position
        self._publish_pcm(to_pcm16(samples))

    def _close(self, segment: int) -> None:
        """The segment's audio is all out: its caption is known (a segment with no audio has an
        empty one, at the point it would have been)."""
        start = self.starts.get(segment, self.position)
        shown = self.job.caption_texts or self.job.segments  # as sent, where lexicons changed the spoken text
        text, end = shown[segment], self.position
        words = None
        if self.engine.spec.features.word_timings:  # on the audio as sent: from the segment's first sample
            offset = start / self.rate
            words = tuple(
                Word(w.text, round(offset + w.start, 3), round(offset + w.end, 3)) for w in self.words.pop(segment, ())
            )
        begin, finish = round(start / self.rate, 3), round(end / self.rate, 3)
        self.last_word_end = words[-1].end if words else None  # where the silence after the segment starts
        marks = self.styling.marks(segment, self.job.segments[segment], self.texts[segment], begin, finish, words)
        caption = Caption(text, begin, finish, words, marks)
        if segment in self.continued and self.open_caption is not None:  # the rest of a sentence
            caption = self.open_caption.joined(caption)
        else:
            self.caption_from = segment
        self.closed = segment
        if segment + 1 in self.continued and segment + 1 < self.total:
            self.open_caption = caption  # one caption a sentence: it waits for the sentence's end
            return
        self.open_caption = None
        self.captions.append(caption)
        body = json.dumps(caption.as_dict(), ensure_ascii=False)
        streams.publish(self.job.id, "segment", index=self.caption_from, last=segment, caption=body)

    def _publish_pcm(self, pcm: bytes, settling: bool = False) -> None:
        if self.finished and not settling:  # settled (failed, timed out): a stopped row's last fade has nowhere to go
            return
        if not self.chunks:
            worker_metrics.FIRST_AUDIO.observe((timezone.now() - self.job.created_at).total_seconds())
            self.first_audio_at = time.monotonic() if self.job.interactive else None
        streams.publish(self.job.id, "audio", seq=self.chunks, pcm=pcm, keep=self.keep)
        worker_metrics.AUDIO_SECONDS.labels(self.job.model).inc(len(pcm) / 2 / self.rate)
        self.pcm.write(pcm)
        self.chunks += 1
        self.position += len(pcm) // 2
        now = time.monotonic()
        if now - self._progress_at > PROGRESS_SECONDS:
            capacity.note_progress(self.job.model)
            self._progress_at = now
        if self.job.lease and now - self._lease_at > LEASE_RENEW_SECONDS:
            # A long job outlives the slot's first lease (its wait and one task limit): hold it on.
            concurrency.extend(self.org_id, self.job.lease, settings.CELERY_TASK_TIME_LIMIT + 30)
            self._lease_at = now

    def _audio(self) -> bytes:
        self.pcm.seek(0)
        return self.pcm.read()

    def _store(self) -> None:
        store(self.job, self.pcm, self.rate)

    def fail(self, status: int, code: str, message: str) -> None:
        if not self.finished:
            self.finished = True
            self.pcm.close()
            fail_job(self.job, status, code, message)

    def finish(self) -> None:
        """Settle the job: succeeded, or cancelled (billing the segments done)."""
        if self.finished:
            return
        self.finished = True
        try:
            self._settle()
        finally:
            self.pcm.close()

    def _settle(self) -> None:
        job = self.job
        audio_seconds = self.position / self.rate
        if self.cancelled:
            fail_job(
                job,
                409,
                "cancelled",
                "Cancelled by the client.",
                final=Job.Status.CANCELLED,
                audio_seconds=audio_seconds,
                billed=job.characters * len(self.completed) // self.total,  # the segments done
                model_version=self.model_version,
            )
            return
        if self.closed < self.total - 1:
            self._close(self.total - 1)  # the last segment (the others closed as the next began)
        before = self.position / self.rate - self.last_word_end if self.last_word_end is not None else 0.0
        tail = self.styling.tail(before)  # SSML: a break at the end, counted from the last word's end
        if len(tail):
            self._publish_pcm(to_pcm16(tail), settling=True)
            audio_seconds = self.position / self.rate
        key = ""
        if job.cacheable and self.position * 2 <= settings.TTS_CACHE_MAX_ENTRY_BYTES:
            key = cache.cache_key(
                job.organization_id, self.model_version, cache.segments_text(job.segments, job.styles), self.params
            )
            try:
                if not cache.put(key, self._audio(), self.captions):
                    key = ""
            except Exception:  # the cache is an optimisation: the job succeeds without it
                logger.exception("could not cache a job's audio", extra={"job_id": str(job.id)})
                key = ""
        if not job.interactive:  # the stored file is what the client comes back for
            try:
                self._store()
                if not job.zero_retention:
                    Job.objects.filter(pk=job.pk).update(result=job.result.name)
            except Exception:
                logger.exception("could not store a job's audio", extra={"job_id": str(job.id)})
                fail_job(
                    job,
                    503,
                    "storage_unavailable",
                    "The audio was generated but could not be stored. It was not billed; try again.",
                    audio_seconds=audio_seconds,
                    model_version=self.model_version,
                )
                return
        if not settle_job(
            job,
            Job.Status.SUCCEEDED,
            audio_seconds=audio_seconds,
            model_version=self.model_version,
            cache_key=key,
            captions=[c.as_dict() for c in self.captions],
        ):
            return  # the job was taken from this run (queued again as lost): its stream is another run's
        streams.publish(
            job.id, "end", samples=self.position, audio_seconds=f"{audio_seconds:.3f}", characters=job.characters
        )
        if job.zero_retention:  # a live reader deletes it once it has read the end; nobody waits on a job's
            streams.forget(job.id, within=streams.ZERO_RETENTION_GRACE if job.interactive else 0)
        capacity.record_job_seconds(self.job.model, time.monotonic() - self.started)
        logger.info(
            "job succeeded",
            extra={
                "request_id": job.request_id,  # this runs on the batcher's thread, not the task's
                "job_id": str(job.id),
                "org_id": job.organization_id,
                "audio_seconds": round(audio_seconds, 3),
            },
        )
