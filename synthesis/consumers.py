"""WebSocket streaming, protocol `tts.v1` (docs/websocket.md): one connection, many utterances.

Text frames carry JSON messages; binary frames carry audio of the utterance in progress.
Utterances run one at a time, in the order sent. Each is a request of its own: rate limit,
quota, concurrency cap and cache apply exactly as on REST (it goes through `actions.speak`).
Audio goes through a bounded per-connection outbox: a client that does not read fast enough is
closed with code 4008 rather than allowed to grow memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from types import SimpleNamespace

from asgiref.sync import sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.core.exceptions import ValidationError

from accounts.auth import authenticate_key, principal_for
from accounts.models import ApiKey
from billing.policy import admit_request
from tts_saas.errors import ApiError, validation_error
from tts_saas.redis import get_async_redis
from tts_saas.request_id import new_request_id

from . import actions, audio, streams, tickets
from .operations import WS_CONNECTIONS
from .serializers import SpeechRequestSerializer

logger = logging.getLogger(__name__)

PROTOCOL = "tts.v1"
MAX_MESSAGE_BYTES = 64 * 1024
MAX_PENDING = 16
FRAME_BYTES = 32 * 1024
SLOW_CLIENT = 4008
UNAUTHORIZED = 4401


class SlowClient(Exception):
    pass


class Outbox:
    """Frames waiting for the socket, bounded in bytes."""

    def __init__(self, limit: int):
        self.limit = limit
        self.queued = 0
        self.queue: asyncio.Queue = asyncio.Queue()

    def put(self, frame: str | bytes) -> None:
        size = len(frame)
        if self.queued + size > self.limit:
            raise SlowClient
        self.queued += size
        self.queue.put_nowait(frame)

    async def get(self) -> str | bytes:
        frame = await self.queue.get()
        self.queued -= len(frame)
        return frame


def _principal_for_ticket(holder: dict):
    from accounts.auth import Principal
    from accounts.models import Membership

    if holder.get("api_key"):
        key = ApiKey.objects.select_related("organization").filter(pk=holder["api_key"]).first()
        if key is None:
            raise ApiError(401, "Unknown ticket.", "invalid_ticket")
        return principal_for(key)
    membership = (
        Membership.objects.select_related("organization")
        .filter(organization_id=holder.get("organization"), user_id=holder.get("user"), user__is_active=True)
        .first()
    )
    if membership is None:
        raise ApiError(401, "This ticket's member has left the organization.", "invalid_ticket")
    if membership.organization.is_suspended:
        raise ApiError(403, "Your organization has been suspended.", "organization_suspended")
    return Principal(organization=membership.organization, api_key=None, can_manage_keys=membership.can_manage_keys)


class SpeechStreamConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        try:
            self.principal = await self._authenticate()
        except ApiError as exc:
            logger.info("websocket refused: %s", exc.message)
            await self.close(code=UNAUTHORIZED)  # before accept: the handshake is refused (403)
            return
        self.outbox = Outbox(settings.TTS_WS_BUFFER_BYTES)
        self.pending: asyncio.Queue = asyncio.Queue()
        self.current: dict | None = None
        await self.accept()
        self.connection_id = new_request_id()
        await get_async_redis().zadd(WS_CONNECTIONS, {self.connection_id: time.time()})
        self.tasks = [asyncio.create_task(self._send_loop()), asyncio.create_task(self._utterance_loop())]
        self._emit({"type": "ready", "protocol": PROTOCOL, "sample_rate": audio.SAMPLE_RATE})

    async def _authenticate(self):
        headers = {k.decode().lower(): v.decode() for k, v in self.scope.get("headers", [])}
        if "authorization" in headers:
            return await sync_to_async(authenticate_key, thread_sensitive=False)(headers["authorization"])
        query = dict(
            part.split("=", 1) for part in self.scope.get("query_string", b"").decode().split("&") if "=" in part
        )
        holder = await tickets.redeem(query.get("ticket", ""))
        if holder is None:
            raise ApiError(401, "Authenticate with an Authorization header or a fresh ticket.", "invalid_ticket")
        return await sync_to_async(_principal_for_ticket, thread_sensitive=False)(holder)

    async def disconnect(self, code):
        for task in getattr(self, "tasks", []):
            task.cancel()
        if hasattr(self, "connection_id"):
            await get_async_redis().zrem(WS_CONNECTIONS, self.connection_id)
        if getattr(self, "current", None) and self.current.get("job_id"):
            await streams.arequest_cancel(self.current["job_id"])

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
            await streams.arequest_cancel(job_id)
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

    def _error(self, code: str, message: str, utterance: str | None = None) -> None:
        self._emit({"type": "error", "id": utterance, "code": code, "message": message})

    async def receive(self, text_data=None, bytes_data=None):
        if bytes_data is not None:
            return self._error("unexpected_binary", "Send JSON text messages; audio flows server to client only.")
        if len(text_data.encode()) > MAX_MESSAGE_BYTES:
            return self._error("message_too_large", f"Messages are limited to {MAX_MESSAGE_BYTES} bytes.")
        try:
            message = json.loads(text_data)
        except ValueError:
            return self._error("invalid_json", "Messages must be JSON objects.")
        if not isinstance(message, dict):
            return self._error("invalid_json", "Messages must be JSON objects.")
        kind, utterance = message.get("type"), message.get("id")
        if kind == "synthesize":
            return self._enqueue(message)
        if kind == "follow":
            return self._follow(message)
        if kind == "cancel":
            return await self._cancel(utterance)
        if kind == "close":
            return await self.close(code=1000)
        self._error(
            "unknown_type", f"Unknown message type {kind!r}; use synthesize, follow, cancel or close.", utterance
        )

    def _enqueue(self, message: dict) -> None:
        utterance = str(message.get("id") or f"u{self.pending.qsize() + 1}")
        body = {k: v for k, v in message.items() if k not in ("type", "id", "text", "format")}
        if "text" in message:
            body["input"] = message["text"]
        body["response_format"] = message.get("format", "pcm")
        serializer = SpeechRequestSerializer(data=body)
        if not serializer.is_valid():
            error = validation_error(serializer.errors)
            param = {"input": "text", "response_format": "format"}.get(error.param, error.param)
            return self._error(
                error.code or "invalid_value", error.message.replace(f"{error.param}:", f"{param}:"), utterance
            )
        if self.pending.qsize() >= MAX_PENDING:
            return self._error("too_many_pending", f"At most {MAX_PENDING} utterances may wait.", utterance)
        self.pending.put_nowait((utterance, dict(serializer.validated_data)))

    def _follow(self, message: dict) -> None:
        utterance, fmt = str(message.get("id") or "follow"), message.get("format", "pcm")
        if fmt not in audio.FORMATS:
            return self._error("invalid_value", f"format: use one of {', '.join(audio.FORMATS)}.", utterance)
        self.pending.put_nowait((utterance, {"follow": str(message.get("job_id", "")), "response_format": fmt}))

    async def _cancel(self, utterance) -> None:
        if self.current and self.current["id"] == utterance and self.current.get("job_id"):
            self.current["cancelled"] = True
            await streams.arequest_cancel(self.current["job_id"])
        else:
            self._error("not_found", f"No utterance {utterance!r} is running.", utterance)

    async def _utterance_loop(self) -> None:
        while True:
            utterance, data = await self.pending.get()
            self.current = {"id": utterance}
            try:
                await self._speak(utterance, data)
            except ApiError as exc:
                if self.current.get("cancelled"):
                    self._emit({"type": "end", "id": utterance, "cancelled": True})
                else:
                    self._error(exc.code or "error", exc.message, utterance)
            except SlowClient:
                return
            finally:
                self.current = None

    async def _replay(self, utterance: str, job_id: str, fmt: str) -> None:
        """Follow an existing job of this organization: its audio from the start, live or past."""
        from accounts.tenancy import scoped

        from .models import Job

        try:
            job = await scoped(Job, self.principal.organization).filter(pk=job_id).afirst()
        except ValidationError:  # not a UUID
            job = None
        if job is None:
            raise ApiError(404, f"No job {job_id}.", "not_found")
        feed = actions.JobAudio(job.id, characters=job.characters, queue_timeout=settings.TTS_JOB_QUEUE_TIMEOUT)
        self._emit(
            {"type": "start", "id": utterance, "format": fmt, "job_id": str(job.id), "sample_rate": audio.SAMPLE_RATE}
        )
        await self._pipe(feed, fmt)
        self._emit(
            {
                "type": "end",
                "id": utterance,
                "characters": job.characters,
                "audio_seconds": round(feed.samples / audio.SAMPLE_RATE, 3),
            }
        )

    async def _pipe(self, feed: actions.JobAudio, fmt: str) -> None:
        encoder = audio.StreamEncoder(fmt)
        async for pcm in feed.chunks():
            frame = encoder.feed(pcm)
            if frame:
                self._emit(frame)
        tail = encoder.finish()
        if tail:
            self._emit(tail)

    async def _speak(self, utterance: str, data: dict) -> None:
        fmt = data["response_format"]
        if "follow" in data:
            return await self._replay(utterance, data["follow"], fmt)
        request_id = new_request_id()
        _, limits = await sync_to_async(admit_request, thread_sensitive=False)(
            SimpleNamespace(method="WS"), self.principal
        )
        result = await actions.speak(self.principal, limits, data, request_id)
        if isinstance(result, actions.SpeechResult):
            self._emit(
                {
                    "type": "start",
                    "id": utterance,
                    "format": fmt,
                    "cached": True,
                    "sample_rate": audio.SAMPLE_RATE,
                    "request_id": request_id,
                }
            )
            body = await sync_to_async(audio.encode, thread_sensitive=False)(result.pcm16, fmt)
            for start in range(0, len(body), FRAME_BYTES):
                self._emit(body[start : start + FRAME_BYTES])
            samples = len(result.pcm16) // 2
        else:
            self.current["job_id"] = result.job_id
            self._emit(
                {
                    "type": "start",
                    "id": utterance,
                    "format": fmt,
                    "cached": False,
                    "job_id": result.job_id,
                    "sample_rate": audio.SAMPLE_RATE,
                    "request_id": request_id,
                }
            )
            await self._pipe(result, fmt)
            samples = result.samples
        self._emit(
            {
                "type": "end",
                "id": utterance,
                "characters": len(data["input"]),
                "audio_seconds": round(samples / audio.SAMPLE_RATE, 3),
                "seed": result.seed,
            }
        )
