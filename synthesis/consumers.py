"""WebSocket streaming, protocol `tts.v1` (docs/websocket.md): one connection, many utterances.

The consumer connects, receives and dispatches; the messages are typed in `protocol`, the bounded
outbox in `outbox`. Utterances run one at a time, in the order sent. Each is a request of its own:
rate limit, quota, concurrency cap and cache apply exactly as on REST (it goes through
`speech.speak`). A client that does not read fast enough is closed with code 4008.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.core.exceptions import ValidationError

from accounts.auth import authenticate_key, authenticate_ticket, refresh
from accounts.tenancy import scoped
from billing.limits import limits_for
from billing.policy import meter
from billing.ratelimit import count_request
from inference.engine import pause, to_pcm16
from tts_saas.errors import ApiError
from tts_saas.redis import get_async_redis
from tts_saas.request_id import new_request_id
from tts_saas.threads import in_thread

from . import audio, connections, protocol, streams
from .feed import JobAudioFeed
from .models import Job
from .operations import WS_CONNECTIONS
from .outbox import Outbox, SlowClient
from .prepared import CachedSpeech, check_format
from .speech import abandon, speak
from .textstream import TextStream, TextStreamError

logger = logging.getLogger(__name__)

MAX_PENDING = 16
SLOT_WAIT_SECONDS = 10  # tts.v2: how long a piece waits for one of the organization's concurrency slots
MAX_UNSPOKEN_PER_CONNECTION = 32_768  # tts.v2: text received and not yet spoken, all utterances together
FRAME_BYTES = 32 * 1024
SLOW_CLIENT = 4008
UNAUTHORIZED = 4401  # at connect; later: the key was revoked or expired, the member removed
FORBIDDEN = 4403  # the organization was suspended while connected
TOO_MANY = 4429  # at connect: the organization's rate limit or its open-connection cap
SERVER_ERROR = 1011
SLOW_CLIENT_SECONDS = 30  # a client reading nothing this long while audio waits for it is closed


class SpeechStreamConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        try:
            self.principal = await self._authenticate()
        except ApiError as exc:
            logger.info("websocket refused: %s", exc.message)
            await self.close(code=UNAUTHORIZED)  # before accept: the handshake is refused (403)
            return
        self.outbox = Outbox(settings.TTS_WS_BUFFER_BYTES)
        self.pending: asyncio.Queue[tuple[str, protocol.Synthesize | protocol.Follow | TextStream]] = asyncio.Queue()
        self.current: dict | None = None
        self.text_streams: dict[str, TextStream] = {}  # tts.v2: utterances whose text is still coming
        # The subprotocol the client asks for (Sec-WebSocket-Protocol); none means tts.v1.
        asked = [p for p in self.scope.get("subprotocols", []) if p in protocol.PROTOCOLS]
        self.version = protocol.TEXT_STREAMING if protocol.TEXT_STREAMING in asked else protocol.PROTOCOL
        # so that a refusal below can say why before its close code
        await self.accept(subprotocol=self.version if asked else None)
        refusal = await self._admit()
        if refusal is not None:
            logger.info("websocket refused: %s", refusal.message)
            await self.send(text_data=json.dumps(protocol.error(refusal.code or "refused", refusal.message)))
            await self.close(code=TOO_MANY)
            return
        await get_async_redis().zadd(WS_CONNECTIONS, {self.connection_id: time.time()})
        self.tasks = [
            asyncio.create_task(self._send_loop()),
            asyncio.create_task(self._utterance_loop()),
            asyncio.create_task(self._keep_slot()),
        ]
        self._emit(protocol.ready(self.version))

    async def _admit(self) -> ApiError | None:
        """A connection is a request (the organization's rate limit counts it) and holds one of the
        organization's TTS_WS_MAX_PER_ORG open connections while it lasts."""
        org = self.principal.organization
        try:
            await in_thread(count_request)(org, (await in_thread(limits_for)(org)).requests_per_minute)
        except ApiError as exc:
            return exc
        connection_id = new_request_id()
        if not await connections.acquire(org.pk, connection_id, settings.TTS_WS_MAX_PER_ORG):
            return ApiError(
                429,
                f"Your organization has {settings.TTS_WS_MAX_PER_ORG} WebSocket connections open, the most "
                "allowed. Close one, or use one connection for many utterances.",
                "too_many_connections",
            )
        self.connection_id = connection_id
        return None

    async def _keep_slot(self) -> None:
        while True:
            await asyncio.sleep(connections.RENEW_SECONDS)
            try:
                await connections.renew(self.principal.organization.pk, self.connection_id)
            except Exception:  # Redis briefly away: the lease (twice the interval) covers one miss
                logger.warning("could not renew a websocket's connection slot")

    async def _authenticate(self):
        headers = {k.decode().lower(): v.decode() for k, v in self.scope.get("headers", [])}
        if "authorization" in headers:
            return await in_thread(authenticate_key)(headers["authorization"])
        query = parse_qs(self.scope.get("query_string", b"").decode())
        return await in_thread(authenticate_ticket)(query.get("ticket", [""])[0])

    async def disconnect(self, code):
        # Read first: cancelling the utterance loop clears `current` while the awaits below run.
        current = getattr(self, "current", None)
        job_id = current.get("job_id") if current else None
        for task in getattr(self, "tasks", []):
            task.cancel()
        if hasattr(self, "connection_id"):
            await get_async_redis().zrem(WS_CONNECTIONS, self.connection_id)
            await connections.release(self.principal.organization.pk, self.connection_id)
        if job_id:
            await abandon(job_id)  # unless others listen to it

    def _emit(self, message: dict | bytes) -> None:
        try:
            self.outbox.put(message if isinstance(message, bytes) else json.dumps(message, ensure_ascii=False))
        except SlowClient:
            job_id = self.current.get("job_id") if self.current else None
            self._closing = asyncio.create_task(self._close_slow(job_id))
            raise

    async def _close_slow(self, job_id: str | None) -> None:
        """Stop the job and close with 4008; the close frame follows what the socket still holds."""
        logger.warning("websocket closed: client too slow", extra={"job_id": job_id})
        for task in self.tasks:
            task.cancel()
        if job_id:
            await abandon(job_id)
        try:
            await self.close(code=SLOW_CLIENT)
        except Exception:  # the client vanished meanwhile: nothing left to tell it
            pass

    async def _send_loop(self) -> None:
        while True:
            frame = await self.outbox.get()
            if isinstance(frame, bytes):
                await self.send(bytes_data=frame)
            else:
                await self.send(text_data=frame)

    async def receive(self, text_data=None, bytes_data=None):
        if bytes_data is not None:
            return self._emit(
                protocol.error("unexpected_binary", "Send JSON text messages; audio flows server to client only.")
            )
        try:
            message = protocol.parse(text_data, default_id=f"u{self.pending.qsize() + 1}", version=self.version)
        except protocol.ProtocolError as exc:
            return self._emit(protocol.error(exc.code, exc.message, exc.utterance))
        match message:
            case protocol.Synthesize() | protocol.Follow() | protocol.Begin():
                if self.pending.qsize() >= MAX_PENDING:
                    return self._emit(
                        protocol.error("too_many_pending", f"At most {MAX_PENDING} utterances may wait.", message.id)
                    )
                if isinstance(message, protocol.Begin):
                    if message.id in self.text_streams:  # open, waiting or being spoken
                        return self._emit(
                            protocol.error("duplicate_id", f"Utterance {message.id!r} is not over yet.", message.id)
                        )
                    self.text_streams[message.id] = TextStream(message.id, message.speech)
                    self.pending.put_nowait((message.id, self.text_streams[message.id]))
                    if not message.text:
                        return
                    message = protocol.TextDelta(message.id, message.text)
                else:
                    self.pending.put_nowait((message.id, message))
                    return
            case protocol.Cancel():
                return await self._cancel(message.id)
            case protocol.Close():
                return await self.close(code=1000)
        self._text(message)

    def _text(self, message) -> None:
        """tts.v2: text, flush and close of an utterance whose text is coming."""
        stream = self.text_streams.get(message.id)
        if stream is None or stream.closed:
            return self._emit(protocol.error("not_found", f"No open utterance {message.id!r}.", message.id))
        try:
            match message:
                case protocol.TextDelta():
                    waiting = sum(s.unspoken for s in self.text_streams.values())
                    if waiting + len(message.delta) > MAX_UNSPOKEN_PER_CONNECTION:
                        raise TextStreamError(
                            "text_buffer_full",
                            f"At most {MAX_UNSPOKEN_PER_CONNECTION} characters may wait to be spoken on a "
                            "connection; send less at a time.",
                        )
                    stream.add(message.delta)
                case protocol.Flush():
                    stream.flush()
                case protocol.CloseText():
                    stream.close()
        except TextStreamError as exc:
            self._emit(protocol.error(exc.code, exc.message, message.id))

    async def _cancel(self, utterance) -> None:
        """Stop an utterance: a text stream's unspoken text is dropped at once, whatever its state;
        the job being generated for the running one is stopped unless others listen to it (an
        identical request), in which case this connection just stops reading it."""
        stream = self.text_streams.get(utterance) if isinstance(utterance, str) else None
        if stream is not None:
            stream.cancel()
        current = self.current
        if current and current["id"] == utterance and (current.get("job_id") or stream is not None):
            current["cancelled"] = True
            if current.get("job_id"):
                await abandon(current["job_id"])
        elif stream is None:
            self._emit(protocol.error("not_found", f"No utterance {utterance!r} is running.", utterance))

    async def _still_allowed(self, utterance: str) -> bool:
        """Credentials are checked again before every utterance: a revoked key, a removed member or
        a suspended organization ends the connection with an error and a close code."""
        try:
            self.principal = await in_thread(refresh)(self.principal)
        except ApiError as exc:
            self._emit(protocol.error(exc.code or "unauthorized", exc.message, utterance))
            await self._close_after_sending(UNAUTHORIZED if exc.status == 401 else FORBIDDEN)
            return False
        return True

    async def _room_for(self, size: int) -> None:
        """Wait while the outbox is more than half full, so that a large cached body goes out as
        fast as the client reads it; a client that reads nothing for SLOW_CLIENT_SECONDS is closed
        with 4008, as when a generation outruns it."""
        deadline = time.monotonic() + SLOW_CLIENT_SECONDS
        while self.outbox.queued + size > self.outbox.limit // 2:
            if time.monotonic() > deadline:
                job_id = self.current.get("job_id") if self.current else None
                self._closing = asyncio.create_task(self._close_slow(job_id))
                raise SlowClient
            await asyncio.sleep(0.01)

    async def _close_after_sending(self, code: int) -> None:
        for _ in range(100):  # let what is queued go out first (at most a second)
            if not self.outbox.queued:
                break
            await asyncio.sleep(0.01)
        await self.close(code=code)

    async def _utterance_loop(self) -> None:
        while True:
            utterance, message = await self.pending.get()
            if not await self._still_allowed(utterance):
                return
            self.current = {"id": utterance}
            try:
                if isinstance(message, protocol.Follow):
                    await self._follow(message)
                elif isinstance(message, TextStream):
                    await self._speak_stream(message)
                else:
                    await self._speak(message)
            except ApiError as exc:
                if self.current.get("cancelled"):
                    self._emit(protocol.end(utterance, cancelled=True))
                else:
                    self._emit(protocol.error(exc.code or "error", exc.message, utterance))
            except SlowClient:
                return
            except Exception:  # a fault of ours: say so and close cleanly, never drop the socket
                logger.exception("websocket utterance failed")
                self._emit(protocol.error("server_error", "The server had an error; try again.", utterance))
                await self._close_after_sending(SERVER_ERROR)
                return
            finally:
                self.current = None

    async def _follow(self, message: protocol.Follow) -> None:
        """Play an existing job of this organization: its audio from the start, live or past."""
        limits, _ = await in_thread(meter)(self.principal)  # a request like any other: rate-limited
        check_format(limits, message.format, "format")
        try:
            job = await scoped(Job, self.principal.organization).filter(pk=message.job_id).afirst()
        except ValidationError:  # not a UUID
            job = None
        if job is None:
            raise ApiError(404, f"No job {message.job_id}.", "not_found")
        feed = JobAudioFeed(job.id, characters=job.characters, queue_timeout=settings.TTS_JOB_QUEUE_TIMEOUT)
        if not await streams.starts_at_beginning(job.id):
            raise feed.truncated()
        self._emit(protocol.start(message.id, message.format, job_id=str(job.id)))
        await self._pipe(feed, message.format)
        self._emit(
            protocol.end(
                message.id,
                characters=job.characters,
                audio_seconds=round(feed.samples / audio.SAMPLE_RATE, 3),
                segments=[c.as_dict() for c in feed.captions],
            )
        )

    async def _pipe(self, feed: JobAudioFeed, fmt: str, encoder: audio.StreamEncoder | None = None) -> None:
        """The feed's audio, encoded, to the client; `encoder` given: it goes on (not finished)."""
        own = encoder is None
        encoder = encoder or audio.StreamEncoder(fmt)
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
        encoder = audio.StreamEncoder(fmt)
        spoken = {"samples": 0, "characters": 0, "segments": []}
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
                audio_seconds=round(spoken["samples"] / audio.SAMPLE_RATE, 3),
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
            await self._send_pcm(to_pcm16(pause()), encoder)
            spoken["samples"] += len(pause())
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
        offset = spoken["samples"] / audio.SAMPLE_RATE
        spoken["segments"] += [
            {"text": c.text, "start": round(c.start + offset, 3), "end": round(c.end + offset, 3)} for c in captions
        ]
        spoken["samples"] += samples
        spoken["characters"] += len(data["input"])

    async def _speak(self, message: protocol.Synthesize) -> None:
        utterance, data = message.id, message.speech
        fmt = data["response_format"]
        request_id = new_request_id()
        limits, _ = await in_thread(meter)(self.principal)
        result = await speak(self.principal, limits, data, request_id)
        if isinstance(result, CachedSpeech):
            self._emit(protocol.start(utterance, fmt, cached=True, request_id=request_id))
            body = await in_thread(audio.encode)(result.pcm16, fmt)
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
                characters=len(data["input"]),
                audio_seconds=round(samples / audio.SAMPLE_RATE, 3),
                seed=result.seed,
                segments=[c.as_dict() for c in segments],
            )
        )
