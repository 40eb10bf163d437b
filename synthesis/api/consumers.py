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
import time
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from accounts import scopes
from accounts.auth import authenticate_key, authenticate_ticket, authenticate_token, refresh, require
from billing.limits import limits_for
from billing.ratelimit import count_request
from synthesis.api import connections, protocol
from synthesis.api.outbox import Outbox, SlowClient
from synthesis.api.textstream import TextStream, TextStreamError
from synthesis.api.utterances import Utterances
from synthesis.service.operations import WS_CONNECTIONS
from synthesis.service.speech import abandon
from tts_saas.errors import ApiError
from tts_saas.redis import get_async_redis
from tts_saas.request_id import new_request_id
from tts_saas.threads import in_thread

logger = logging.getLogger(__name__)

MAX_PENDING = 16
MAX_UNSPOKEN_PER_CONNECTION = 32_768  # tts.v2: text received and not yet spoken, all utterances together
SLOW_CLIENT = 4008
UNAUTHORIZED = 4401  # at connect; later: the key was revoked or expired, the member removed
FORBIDDEN = 4403  # the organization suspended, or a scope or an allowlist now refuses the caller
TOO_MANY = 4429  # at connect: the organization's rate limit or its open-connection cap
SERVER_ERROR = 1011
SLOW_CLIENT_SECONDS = 30  # a client reading nothing this long while audio waits for it is closed


class SpeechStreamConsumer(Utterances, AsyncWebsocketConsumer):
    async def connect(self):
        try:
            self.principal = await self._authenticate()
        except ApiError as exc:
            logger.info("websocket refused: %s", exc.message)
            await self.close(code=UNAUTHORIZED)  # before accept: the handshake is refused (403)
            return
        # The subprotocol the client asks for (Sec-WebSocket-Protocol); none means tts.v1.
        asked = [p for p in self.scope.get("subprotocols", []) if p in protocol.PROTOCOLS]
        self.version = protocol.TEXT_STREAMING if protocol.TEXT_STREAMING in asked else protocol.PROTOCOL
        # so that a refusal below can say why before its close code
        await self.accept(subprotocol=self.version if asked else None)
        if await self._open():
            self._emit(protocol.ready(self.version))

    def _prepare(self) -> None:
        """The connection's state, before anything is received."""
        self.outbox = Outbox(settings.TTS_WS_BUFFER_BYTES)
        self.pending: asyncio.Queue[tuple[str, protocol.Synthesize | protocol.Follow | TextStream]] = asyncio.Queue()
        self.current: dict | None = None
        self.text_streams: dict[str, TextStream] = {}  # tts.v2: utterances whose text is still coming

    async def _open(self) -> bool:
        """An accepted connection admitted (or refused, saying why) and its loops started."""
        if not hasattr(self, "outbox"):
            self._prepare()
        refusal = await self._admit()
        if refusal is not None:
            logger.info("websocket refused: %s", refusal.message)
            await self.send(text_data=json.dumps(self._refusal(refusal)))
            await self.close(code=TOO_MANY)
            return False
        await get_async_redis().zadd(WS_CONNECTIONS, {self.connection_id: time.time()})
        self.tasks = [
            asyncio.create_task(self._send_loop()),
            asyncio.create_task(self._utterance_loop()),
            asyncio.create_task(self._keep_slot()),
        ]
        return True

    def _refusal(self, exc: ApiError) -> dict:
        return protocol.error(exc.code or "refused", exc.message)

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

    @property
    def address(self) -> str | None:
        """The client's address, as uvicorn saw it (behind a trusted proxy, the one it forwarded)."""
        client = self.scope.get("client")
        return client[0] if client else None

    async def _authenticate(self):
        headers = {k.decode().lower(): v.decode() for k, v in self.scope.get("headers", [])}
        if "authorization" in headers:
            principal = await in_thread(authenticate_key)(headers["authorization"], self.address)
        else:
            query = parse_qs(self.scope.get("query_string", b"").decode())
            if "token" in query:  # a client token (browsers cannot set headers on a WebSocket)
                principal = await in_thread(authenticate_token)(query["token"][0], self.address)
            else:
                principal = await in_thread(authenticate_ticket)(query.get("ticket", [""])[0], self.address)
        require(principal, scopes.WEBSOCKET, "speaking over the WebSocket")
        return principal

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
            message = protocol.parse(
                text_data,
                default_id=f"u{self.pending.qsize() + 1}",
                version=self.version,
                organization=self.principal.organization,
            )
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
        """Credentials are checked again before every utterance: a revoked key, a removed member, a
        suspended organization, a scope or an allowlist changed since ends the connection with an
        error and a close code."""
        try:
            self.principal = await in_thread(refresh)(self.principal, self.address)
            require(self.principal, scopes.WEBSOCKET, "speaking over the WebSocket")
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
