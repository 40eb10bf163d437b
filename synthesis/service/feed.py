"""Reading a job's audio as the worker publishes it, from any offset of its event stream."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator

from django.conf import settings

from inference import registry
from inference.text.preparation import joiner
from synthesis.audio import streams
from synthesis.audio.captions import Caption
from synthesis.models import Job
from synthesis.service import capacity
from synthesis.service.jobs import expire_if_queued
from tts_saas.errors import ApiError
from tts_saas.threads import in_thread


def joined(texts) -> str:
    """Pieces of one sentence put back together (what its caption shows)."""
    out = ""
    for text in texts:
        out = f"{out}{joiner(out, text)}{text}" if out else text
    return out


class JobAudioFeed:
    """A job's audio as it arrives: `events()` yields PCM16 chunks, and each segment's `Caption`
    once its audio is all out, from the job's event stream (from the start, so a late reader misses
    nothing), enforcing the queue and run deadlines, and raises ApiError if the job fails; `chunks()`
    is the audio alone. `end` holds the final event's fields afterwards, `captions` the segments'."""

    def __init__(
        self,
        job_id,
        *,
        seed: int | None = None,
        characters: int = 0,
        queue_timeout: float | None = None,
        deadline: float | None = None,
        after: str = "0-0",
        caption_texts: tuple[str, ...] = (),
        engine: str = "",
        forget: bool = False,
        rate: int | None = None,
    ):
        self.job_id = str(job_id)
        self.engine = engine  # whose workers' progress tells a busy queue from a dead one
        self.rate = rate or registry.sample_rate(engine)  # of the PCM it yields (the model's)
        self.seed = seed
        self.characters = characters
        # Give up on a job that has not started when no worker made progress for `queue_timeout`
        # (dead or stuck workers), or after `deadline` in any case (busy for too long).
        self.queue_timeout = settings.TTS_QUEUE_TIMEOUT if queue_timeout is None else queue_timeout
        self.deadline = self.queue_timeout + settings.TTS_MAX_QUEUE_WAIT if deadline is None else deadline
        self.after = after
        self.end: dict[str, str] = {}
        self.samples = 0
        self.chunks_read = 0  # audio events passed on: the next one's `seq`
        self.captions: list[Caption] = []
        self.caption_texts = caption_texts  # the texts this reader's captions show, by segment (else the job's)
        self.forget = forget  # zero retention: the stream is deleted once this reader has read its end

    async def _waited_too_long(self, began: float, began_at: float) -> ApiError | None:
        """Why a job that has not started is given up now, or None to go on waiting."""
        if time.monotonic() - began > self.deadline:
            return ApiError(
                503,
                f"The request did not start within {self.deadline:g} s: the service is busy. Try again shortly.",
                "server_overloaded",
                headers={"Retry-After": "10"},
            )
        progress = await capacity.last_progress_async(self.engine) if self.engine else None
        if time.time() - max(began_at, progress or 0.0) <= self.queue_timeout:
            return None  # the workers are working through the queue
        return ApiError(
            503,
            f"No synthesis worker took the request within {self.queue_timeout:g} s. Try again shortly.",
            "worker_unavailable",
            headers={"Retry-After": "10"},
        )

    async def chunks(self) -> AsyncIterator[bytes]:
        async for item in self.events():
            if isinstance(item, bytes):
                yield item

    async def events(self) -> AsyncIterator[bytes | Caption]:
        began, began_at = time.monotonic(), time.time()
        run_deadline = None
        starting = False  # the job was seen leaving the queue: its start event is on its way
        checked_expiry = False
        async for event in streams.read(self.job_id, after=self.after):
            now = time.monotonic()
            if event is None and not checked_expiry:
                checked_expiry = True
                await self.check_not_expired()
            if event is None:
                if run_deadline is None and not starting:
                    error = await self._waited_too_long(began, began_at)
                    if error is not None:
                        if await in_thread(expire_if_queued)(self.job_id):
                            raise error
                        starting = True
                if run_deadline is not None and now > run_deadline:
                    raise ApiError(503, "Synthesis did not finish in time.", "synthesis_timeout")
                continue
            self.after = event.id
            if event.type in ("start", "audio", "segment"):  # the run goes on: the deadline moves
                run_deadline = now + settings.CELERY_TASK_TIME_LIMIT + 5
            if event.type == "audio":
                if int(event.text("seq", "0")) != self.chunks_read:
                    raise self.truncated()
                self.chunks_read += 1
                self.samples += len(event.fields["pcm"]) // 2
                yield event.fields["pcm"]
            elif event.type == "segment":
                index = int(event.text("index", "0"))  # its first segment (a sentence may be several)
                last = int(event.text("last", str(index)))
                caption = Caption.from_dict(json.loads(event.text("caption")))
                if last < len(self.caption_texts):
                    caption = caption.shown_as(joined(self.caption_texts[index : last + 1]))
                self.captions.append(caption)
                yield caption
            elif event.type == "end":
                self.end = {k: v.decode() for k, v in event.fields.items()}
                if self.forget:
                    await streams.aforget(self.job_id)
                return
            elif event.type == "restart":
                # The worker was lost and the job queued again. Audio already passed on cannot be
                # taken back: that reader stops here (a retry with the request's Idempotency-Key
                # reads the new run from its start). One that had none waits for the new run.
                if self.samples:
                    raise ApiError(
                        503,
                        "The synthesis worker stopped mid-stream; the audio cannot continue on this "
                        "connection. Retry (with the same Idempotency-Key to get this job's audio).",
                        "worker_lost",
                        headers={"Retry-After": "1"},
                    )
                began, began_at, run_deadline, starting, checked_expiry = now, time.time(), None, False, False
                self.captions = []  # the new run's segments come again
                self.chunks_read = 0
            elif event.type == "error":
                if self.forget:
                    await streams.aforget(self.job_id)
                raise ApiError(int(event.text("status", "500")), event.text("message"), event.text("code"))

    def truncated(self) -> ApiError:
        """The events before the ones read were trimmed (a long job's stream keeps its last
        TTS_STREAM_MAX_EVENTS): this reader cannot have the audio from its start."""
        return ApiError(
            410,
            "The beginning of this job's audio is no longer in its stream (a long job's stream keeps its last "
            f"~{settings.TTS_STREAM_MAX_EVENTS // 2 // 60} minutes). The whole file is at "
            f"/v1/jobs/{self.job_id}/audio once the job has succeeded.",
            "stream_truncated",
        )

    async def check_not_expired(self) -> None:
        """A finished job whose event stream is gone (kept TTS_STREAM_TTL) has nothing to replay:
        say so rather than wait for events that will never come."""
        if await streams.exists(self.job_id):
            return
        job = await Job.objects.filter(pk=self.job_id).only("status", "result").afirst()
        if job is not None and job.status in Job.FINAL:
            where = f" Its stored audio is at /v1/jobs/{self.job_id}/audio." if job.result else ""
            raise ApiError(410, f"This job's audio stream has expired.{where}", "stream_expired")

    async def first_audio(self) -> None:
        """Wait for the job's first audio (or its end), so that errors before it still get their own
        status code; this feed's own reading still starts from where it was."""
        chunks = JobAudioFeed(
            self.job_id, queue_timeout=self.queue_timeout, deadline=self.deadline, after=self.after, engine=self.engine
        ).chunks()
        try:
            await anext(chunks)
        except StopAsyncIteration:
            pass
        finally:
            await chunks.aclose()  # type: ignore[attr-defined]

    async def read_all(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])
