"""Speaking a WebSocket connection's utterances (docs/websocket.md): `tts.v1`'s `synthesize` (one
request, cached or live), `follow` (an existing job's audio), and `tts.v2`'s text streamed in, spoken
piece by piece as one continuous audio stream. Each utterance or piece is a request of its own
through `speech.speak`; audio goes to the client through the connection's bounded outbox."""

from __future__ import annotations

import asyncio
import secrets
import time

from django.conf import settings
from django.core.exceptions import ValidationError

from accounts import scopes
from accounts.auth import require
from accounts.tenancy import scoped
from billing.limits import limits_for
from billing.policy import meter
from inference import registry
from inference.engine import pause, to_pcm16
from synthesis.api import protocol
from synthesis.api.textstream import TextStream
from synthesis.audio import formats as audio
from synthesis.audio import streams
from synthesis.models import Job
from synthesis.service.feed import JobAudioFeed
from synthesis.service.prepared import CachedSpeech, check_format
from synthesis.service.speech import abandon, speak
from tts_saas.errors import ApiError
from tts_saas.request_id import new_request_id
from tts_saas.threads import in_thread

SLOT_WAIT_SECONDS = 10  # tts.v2: how long a piece waits for one of the organization's concurrency slots
FRAME_BYTES = 32 * 1024


class Utterances:
    """The consumer's utterances (`consumers.SpeechStreamConsumer` mixes this in: it provides the
    principal, the outbox (`_emit`, `_room_for`), the current utterance and the open text streams)."""

    principal: object
    current: dict | None
    text_streams: dict

    def _piece_spoken(self, utterance: str, captions: list) -> None:
        """A piece of a text stream is all out: its captions, where it falls in the utterance (the
        ElevenLabs socket sends their alignment; tts.v2 sends them with the utterance's end)."""

    async def _follow(self, message: protocol.Follow) -> None:
        """Play an existing job of this organization: its audio from the start, live or past. Needs
        `jobs:read`, as the job's REST stream does (a client token has none: it only speaks)."""
        require(self.principal, scopes.needed("job-stream", "GET"), "following a job's audio")
        limits, _ = await in_thread(meter)(self.principal)  # a request like any other: rate-limited
        check_format(limits, message.format, "format")
        try:
            job = await scoped(Job, self.principal.organization).filter(pk=message.job_id).afirst()
        except ValidationError:  # not a UUID
            job = None
        if job is None:
            raise ApiError(404, f"No job {message.job_id}.", "not_found")
        feed = JobAudioFeed(
            job.id, characters=job.characters, queue_timeout=settings.TTS_JOB_QUEUE_TIMEOUT, engine=job.model
        )
        if not await streams.starts_at_beginning(job.id):
            raise feed.truncated()
        self._emit(protocol.start(message.id, message.format, job_id=str(job.id)))
        await self._pipe(feed, message.format)
        self._emit(
            protocol.end(
                message.id,
                characters=job.characters,
                audio_seconds=round(feed.samples / feed.rate, 3),
                segments=[c.as_dict() for c in feed.captions],
            )
        )

    async def _pipe(self, feed: JobAudioFeed, fmt: str, encoder: audio.StreamEncoder | None = None) -> None:
        """The feed's audio, encoded, to the client; `encoder` given: it goes on (not finished)."""
        own = encoder is None
        encoder = encoder or audio.StreamEncoder(fmt, feed.rate)
        async for pcm in feed.chunks():
            if self.current and self.current.get("cancelled"):  # a follower stops reading; the job goes on
                break
            frame = encoder.feed(pcm)
            if frame:
                self._emit(frame)
        tail = encoder.finish() if own else b""
        if tail:
            self._emit(tail)

    async def _send_pcm(self, pcm16: bytes, encoder: audio.StreamEncoder) -> None:
        for start in range(0, len(pcm16), FRAME_BYTES):
            if self.current and self.current.get("cancelled"):
                return
            await self._room_for(FRAME_BYTES)  # a large hit goes out as fast as the client reads
            frame = encoder.feed(pcm16[start : start + FRAME_BYTES])
            if frame:
                self._emit(frame)

    async def _speak_stream(self, stream: TextStream) -> None:
        """tts.v2: speak an utterance's text as it comes, piece by piece (each complete sentence or
        flush, or the backlog of them), in order, with one voice and seed, as one continuous audio
        stream. Each piece is a request of its own (quota, plan limits, billing); the utterance
        counts once against the rate limit."""
        current = self.current
        assert current is not None
        try:
            if stream.cancelled:  # cancelled while it waited: nothing was said
                self._emit(protocol.end(stream.id, cancelled=True, characters=0))
                return
            await self._speak_pieces(stream, current)
        finally:
            if self.text_streams.get(stream.id) is stream:
                del self.text_streams[stream.id]

    async def _speak_pieces(self, stream: TextStream, current: dict) -> None:
        utterance, fmt = stream.id, stream.speech["response_format"]
        speech = dict(stream.speech)
        drawn = speech.get("seed") is None
        if drawn:  # one seed for every piece: the same voice throughout
            speech["seed"] = secrets.randbelow(2**31)
        request_id = new_request_id()
        limits, _ = await in_thread(meter)(self.principal)
        self._emit(protocol.start(utterance, fmt, cached=False, request_id=request_id))
        rate = registry.sample_rate(speech["model"])  # every piece is of the stream's one model
        encoder = audio.StreamEncoder(fmt, rate)
        spoken = {"samples": 0, "characters": 0, "segments": [], "rate": rate}
        error: ApiError | None = None
        try:
            while not current.get("cancelled"):
                piece = await stream.take(limits.max_input_chars)
                if piece is None or current.get("cancelled"):
                    break
                if not await self._still_allowed(utterance):  # the key revoked mid-utterance: closed
                    return
                limits = await in_thread(limits_for)(self.principal.organization)
                data = {**speech, "input": piece}
                await self._speak_piece(data, limits, drawn, request_id, encoder, current, spoken)
        except ApiError as exc:  # a piece was refused or failed: end here, saying what was spoken
            if not current.get("cancelled"):  # (a cancel stops the job, whose feed then says so)
                error = exc
        tail = encoder.finish()
        if tail:
            self._emit(tail)
        if error is not None:
            self._emit(protocol.error(error.code or "error", error.message, utterance))
        if stream.cancelled or current.get("cancelled"):
            self._emit(protocol.end(utterance, cancelled=True, characters=spoken["characters"]))
            return
        fields = {"incomplete": True} if error is not None else {}
        self._emit(
            protocol.end(
                utterance,
                characters=spoken["characters"],
                audio_seconds=round(spoken["samples"] / rate, 3),
                seed=speech["seed"],
                segments=spoken["segments"],
                **fields,
            )
        )

    async def _speak_piece(self, data, limits, drawn, request_id, encoder, current, spoken) -> None:
        """One piece of a text stream: generated (or cached), its audio after the pause between two
        sentences, its captions moved to where it falls in the utterance."""
        # A drawn seed is this utterance's, not the client's: its pieces are not cached.
        deadline = time.monotonic() + SLOT_WAIT_SECONDS
        while True:
            try:
                result = await speak(self.principal, limits, data, request_id, cacheable=not drawn)
                break
            except ApiError as exc:
                # The organization's concurrency cap is full (an earlier piece's job settling, the
                # organization's other requests): a sentence mid-reply waits a little for a slot.
                if exc.code != "too_many_concurrent_requests" or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.25)
                if current.get("cancelled"):
                    return
        if current.get("cancelled"):  # cancelled while the piece was admitted
            if not isinstance(result, CachedSpeech) and not getattr(result, "shared", False):
                await abandon(result.job_id)
            return
        if spoken["samples"]:
            gap = pause(spoken["rate"])
            await self._send_pcm(to_pcm16(gap), encoder)
            spoken["samples"] += len(gap)
        if isinstance(result, CachedSpeech):
            await self._send_pcm(result.pcm16, encoder)
            samples, captions = len(result.pcm16) // 2, result.captions
        else:
            if not getattr(result, "shared", False):  # a shared job is not this utterance's to stop
                current["job_id"] = result.job_id
            try:
                await self._pipe(result, data["response_format"], encoder)
            finally:
                current.pop("job_id", None)
            if current.get("cancelled"):  # cut short: its job bills the segments it finished
                return
            samples, captions = result.samples, result.captions
        offset = spoken["samples"] / spoken["rate"]
        shifted = [c.shifted(offset) for c in captions]
        self._piece_spoken(current["id"], shifted)
        spoken["segments"] += [c.as_dict() for c in shifted]
        spoken["samples"] += samples
        spoken["characters"] += result.characters

    async def _speak(self, message: protocol.Synthesize) -> None:
        utterance, data = message.id, message.speech
        fmt = data["response_format"]
        request_id = new_request_id()
        limits, _ = await in_thread(meter)(self.principal)
        result = await speak(self.principal, limits, data, request_id)
        if isinstance(result, CachedSpeech):
            self._emit(protocol.start(utterance, fmt, cached=True, request_id=request_id))
            body = await in_thread(audio.encode)(result.pcm16, fmt, result.rate)
            for start in range(0, len(body), FRAME_BYTES):
                await self._room_for(FRAME_BYTES)  # a large hit goes out as fast as the client reads
                self._emit(body[start : start + FRAME_BYTES])
            samples, segments = len(result.pcm16) // 2, result.captions
        else:
            if not getattr(result, "shared", False):  # a shared job is not this utterance's to stop
                self.current["job_id"] = result.job_id  # type: ignore[index]
            self._emit(protocol.start(utterance, fmt, cached=False, job_id=result.job_id, request_id=request_id))
            await self._pipe(result, fmt)
            if self.current and self.current.get("cancelled"):  # stopped reading (others listen on)
                self._emit(protocol.end(utterance, cancelled=True))
                return
            samples, segments = result.samples, result.captions
        self._emit(
            protocol.end(
                utterance,
                characters=result.characters,
                audio_seconds=round(samples / result.rate, 3),
                seed=result.seed,
                segments=[c.as_dict() for c in segments],
            )
        )
