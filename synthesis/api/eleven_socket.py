"""ElevenLabs' text-streaming WebSockets on this service: `/elevenlabs/v1/text-to-speech/{voice_id}/
stream-input` (one text stream a socket) and `…/multi-stream-input` (several, by `context_id`), as
Pipecat's and LiveKit's ElevenLabs services and ElevenLabs' SDK speak them. The same connection,
policy and text streaming as `tts.v2` (`consumers.SpeechStreamConsumer`, `textstream`, `utterances`):
only the messages differ. Text in: `{"text", "flush", "try_trigger_generation", "voice_settings",
"context_id", "close_context", "close_socket", "xi_api_key"}`; out: `{"audio": base64, "alignment",
"normalizedAlignment", "isFinal", "contextId"}`, each sentence's characters with times from where the
sentence before it ended (as ElevenLabs' chunks do). Audio is sent as it is made; a context's text is
cut into sentences as it comes (`chunk_length_schedule` and `try_trigger_generation` are taken and
left to that; with `auto_mode=true` a message ending in an end mark ends its sentence at once). docs/elevenlabs.md."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
from urllib.parse import parse_qs

from accounts import scopes
from accounts.auth import authenticate_key, require
from synthesis.api import protocol
from synthesis.api.consumers import MAX_PENDING, SERVER_ERROR, UNAUTHORIZED, SpeechStreamConsumer
from synthesis.api.eleven_shapes import alignment
from synthesis.api.elevenlabs import lexicon_ids, model_for_voice
from synthesis.api.serializers import SpeechRequestSerializer
from synthesis.api.textstream import TextStream
from synthesis.audio.captions import Caption
from tts_saas.errors import ApiError, validation_error
from tts_saas.parsers import load_json
from tts_saas.threads import in_thread

logger = logging.getLogger(__name__)

SINGLE = "default"  # stream-input's one context
FIELDS = {
    "text",
    "flush",
    "try_trigger_generation",
    "voice_settings",
    "generation_config",
    "xi_api_key",
    "authorization",
    "context_id",
    "close_context",
    "close_socket",
    "pronunciation_dictionary_locators",
}
END_MARK = re.compile(r"[.!?…。！？][\"'”’)\]]*$")  # a message that ends a sentence (auto_mode)
POLICY = 1008  # ElevenLabs closes a socket it refuses with 1008
AUTH_SECONDS = 15  # a socket without a key in its header must send one this soon
MAX_MESSAGE_BYTES = protocol.MAX_MESSAGE_BYTES


def _in_ms(aligned: dict | None, since: float) -> dict | None:
    """ElevenLabs' socket alignment: characters with start and duration in ms from `since` (s)."""
    if aligned is None:
        return None
    starts = aligned["character_start_times_seconds"]
    ends = aligned["character_end_times_seconds"]
    return {
        "chars": aligned["characters"],
        "charStartTimesMs": [round((s - since) * 1000) for s in starts],
        "charDurationsMs": [round((e - s) * 1000) for s, e in zip(starts, ends, strict=True)],
    }


class ElevenLabsSocket(SpeechStreamConsumer):
    multi = False  # ElevenLabsMultiSocket: multi-stream-input

    async def connect(self):
        self.version = protocol.TEXT_STREAMING
        self.aligned: dict[str, tuple[float, Caption | None]] = {}  # context: (aligned until, its last sentence)
        query = parse_qs(self.scope.get("query_string", b"").decode())
        self.voice = self.scope["url_route"]["kwargs"]["voice_id"]
        self.model_id = query.get("model_id", [""])[0]
        self.output_format = query.get("output_format", ["mp3_44100_128"])[0]
        # auto_mode: the client sends whole sentences (Pipecat does), so a message ending in an end
        # mark ends its sentence now, as ElevenLabs then generates at once.
        self.auto_mode = query.get("auto_mode", ["false"])[0].lower() == "true"
        self.zero_retention = query.get("enable_logging", ["true"])[0].lower() == "false"  # ElevenLabs' zero retention
        # sync_alignment=true (LiveKit's plugin sends it, and reads each piece's times as they are): times
        # from the context's first audio; without it (Pipecat) from where the piece before ended.
        self.sync_alignment = query.get("sync_alignment", ["false"])[0].lower() == "true"
        self.normalization = query.get("apply_text_normalization", [""])[0]  # checked with the request
        self.flushed: dict[str, bool] = {}  # context: flushed since its last text (a close then finishes it)
        headers = {k.decode().lower(): v.decode() for k, v in self.scope.get("headers", [])}
        key = headers.get("xi-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        self.principal = None
        if key:
            try:
                self.principal = await self._key(key)
            except ApiError as exc:
                logger.info("elevenlabs socket refused: %s", exc.message)
                await self.close(code=UNAUTHORIZED)
                return
        await self.accept()
        self._prepare()
        if self.principal is not None:
            await self._open()
        else:
            self._deadline = asyncio.get_running_loop().create_task(self._key_by(AUTH_SECONDS))

    async def _key_by(self, seconds: float) -> None:
        """A socket that names no key within `seconds` is closed (it holds nothing until it does)."""
        await asyncio.sleep(seconds)
        if self.principal is None:
            await self.send(text_data=json.dumps({"message": "No key was sent.", "error": "invalid_api_key"}))
            await self.close(code=POLICY)

    async def _key(self, key: str):
        principal = await in_thread(authenticate_key)(f"Bearer {key}", self.address)
        require(principal, scopes.WEBSOCKET, "speaking over the WebSocket")
        return principal

    def _refusal(self, exc: ApiError) -> dict:
        return {"message": exc.message, "error": exc.code or "refused", "code": exc.status}

    async def disconnect(self, code):
        if self.principal is not None:
            await super().disconnect(code)

    def _context(self, message: dict) -> str:
        return str(message.get("context_id") or SINGLE)[:64] if self.multi else SINGLE

    def _emit(self, message: dict | bytes) -> None:
        """The shared utterance path's messages in ElevenLabs' words: audio as JSON, the end as
        `isFinal` (stream-input then closes, as ElevenLabs does), an error with its context."""
        current = self.current["id"] if self.current else None
        if isinstance(message, bytes):
            body: dict | None = {"audio": base64.b64encode(message).decode(), "isFinal": None}
            body.update(alignment=None, normalizedAlignment=None)
        elif message.get("type") == "end":
            body, current = {"isFinal": True}, message.get("id") or current
            self.aligned.pop(current, None)
            if not self.multi:
                asyncio.get_running_loop().create_task(self._close_after_sending(1000))
        elif message.get("type") == "error":
            body = {"message": message["message"], "error": message["code"]}
            current = message.get("id") or current
        else:  # ready, start: ElevenLabs says nothing
            body = None
        if body is not None:
            if self.multi and current is not None:
                body["contextId"] = current
            super()._emit(body)

    def _piece_spoken(self, utterance: str, captions: list[Caption]) -> None:
        if not captions:
            return
        since, last = self.aligned.get(utterance, (0.0, None))
        aligned = _in_ms(alignment(captions, last), 0.0 if self.sync_alignment else last.end if last else since)
        body = {"audio": None, "isFinal": None, "alignment": aligned, "normalizedAlignment": aligned}
        if self.multi:
            body["contextId"] = utterance
        self.aligned[utterance] = (captions[-1].end, captions[-1])
        super()._emit(body)

    def _say(self, code: str, message: str, context: str | None = None) -> None:
        body = {"message": message, "error": code}
        if self.multi and context is not None:
            body["contextId"] = context
        super()._emit(body)

    async def receive(self, text_data=None, bytes_data=None):
        if text_data is not None and len(text_data.encode()) > MAX_MESSAGE_BYTES:
            return self._say("message_too_large", f"Messages are limited to {MAX_MESSAGE_BYTES} bytes.")
        if self.principal is None:  # the key in the first message (a client that cannot set headers)
            try:
                first = load_json(text_data or "")
                self.principal = await self._key(str(first.get("xi_api_key") or first.get("authorization") or ""))
            except (AttributeError, ApiError) as exc:
                reason = exc.message if isinstance(exc, ApiError) else "Send xi_api_key in the first message."
                await self.send(text_data=json.dumps({"message": reason, "error": "invalid_api_key"}))
                await self.close(code=POLICY)
                return
            if not await self._open():
                return
        if bytes_data is not None:
            return self._say("invalid_message", "Send JSON text messages; audio flows server to client only.")
        try:
            message = load_json(text_data)
        except ApiError:
            return self._say("invalid_message", "A message must be a JSON object.")
        if not isinstance(message, dict) or set(message) - FIELDS:
            unknown = sorted(set(message) - FIELDS) if isinstance(message, dict) else []
            return self._say("invalid_message", f"Unknown field(s): {', '.join(unknown) or 'not an object'}.")
        try:
            await self._handle(message)
        except Exception:  # a fault of ours: say so and close, never leave the socket's tasks behind
            logger.exception("elevenlabs socket message failed")
            self._say("server_error", "The server had an error; try again.")
            await self._close_after_sending(SERVER_ERROR)

    async def _handle(self, message: dict) -> None:
        context = self._context(message)
        if message.get("close_socket"):
            for name in list(self.text_streams):
                await self._cancel(name)
            return await self._close_after_sending(1000)
        text = message.get("text")
        if text is not None and not isinstance(text, str):
            return self._say("invalid_message", "text must be a string.", context)
        stream = self.text_streams.get(context)
        if stream is None and text is not None and (text.strip() or not self.multi or message.get("voice_settings")):
            stream = await self._begin(context, message)
            if stream is None:
                return
        if stream is None:
            return  # a keepalive, or a context already over
        if text and self.auto_mode and END_MARK.search(text):
            text += " "  # the sentence is complete: cut it now (the next message's text follows it)
        if text:
            self._text(protocol.TextDelta(context, text))
            self.flushed[context] = False
        if message.get("flush"):
            self._text(protocol.Flush(context))
            self.flushed[context] = True
        if message.get("close_context") and not text and not self.flushed.pop(context, True):
            return await self._cancel(context)  # closed unflushed: an interruption (Pipecat's barge-in)
        if message.get("close_context") or (text == "" and not self.multi):  # stream-input: "" ends the text
            self._text(protocol.CloseText(context))

    async def _begin(self, context: str, message: dict) -> TextStream | None:
        """A context's text stream, its request checked as /v1/audio/speech checks one."""
        if self.pending.qsize() >= MAX_PENDING:
            self._say("too_many_contexts", f"At most {MAX_PENDING} contexts may wait on a socket.", context)
            return None
        settings = message.get("voice_settings") or {}
        body: dict = {"input": "-", "voice": self.voice, "output_format": self.output_format}
        if self.model_id and not self.model_id.startswith("eleven_"):
            body["model"] = self.model_id
        if isinstance(settings, dict) and settings.get("speed") is not None:
            body["speed"] = settings["speed"]
        if self.zero_retention:
            body["zero_retention"] = True
        if self.normalization:
            body["text_normalization"] = self.normalization
        org = self.principal.organization
        try:
            if message.get("pronunciation_dictionary_locators"):
                body["lexicons"] = lexicon_ids(message["pronunciation_dictionary_locators"])
            body["model"] = body.get("model") or await in_thread(model_for_voice)(org, self.voice)
            serializer = SpeechRequestSerializer(data=body, context={"organization": org})
            if not await in_thread(serializer.is_valid)():
                raise validation_error(serializer.errors)
        except ApiError as exc:
            self._say(exc.code or "invalid_request", exc.message, context)
            if self.multi:  # the context is over: its client stops waiting for it
                super()._emit({"isFinal": True, "contextId": context})
            else:  # stream-input has one text: the socket closes, as ElevenLabs closes it
                await self._close_after_sending(POLICY)
            return None
        speech = dict(serializer.validated_data)
        speech.pop("input")
        stream = self.text_streams[context] = TextStream(context, speech)
        self.pending.put_nowait((context, stream))
        return stream


class ElevenLabsMultiSocket(ElevenLabsSocket):
    """multi-stream-input: several contexts on one socket, each message naming its `context_id`."""

    multi = True
