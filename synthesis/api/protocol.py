"""The WebSocket messages of `tts.v1` and `tts.v2` (docs/websocket.md), typed.

`parse` turns one client text frame into a `Synthesize`, `Follow`, `Cancel` or `Close` — and in
`tts.v2` also `Begin`, `TextDelta`, `Flush` or `CloseText` (text streamed in) — or raises
`ProtocolError` with the code and message the client is sent; the server's own messages are built
by the functions below, so their fields are written in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from synthesis.api.serializers import SpeechRequestSerializer
from synthesis.audio.formats import SAMPLE_RATE, output_format
from tts_saas.errors import ApiError, validation_error
from tts_saas.parsers import load_json

PROTOCOL = "tts.v1"  # without a subprotocol asked for
TEXT_STREAMING = "tts.v2"  # tts.v1 and text streamed in
PROTOCOLS = (PROTOCOL, TEXT_STREAMING)
MAX_MESSAGE_BYTES = 64 * 1024


class ProtocolError(Exception):
    def __init__(self, code: str, message: str, utterance: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.utterance = utterance


@dataclass(frozen=True)
class Synthesize:
    id: str
    speech: dict  # a validated /v1/audio/speech body


@dataclass(frozen=True)
class Follow:
    id: str
    job_id: str
    format: str


@dataclass(frozen=True)
class Cancel:
    id: str | None


@dataclass(frozen=True)
class Close:
    pass


@dataclass(frozen=True)
class Begin:
    """tts.v2: an utterance whose text follows in `text` messages."""

    id: str
    speech: dict  # a validated /v1/audio/speech body; its input is what follows
    text: str  # the first text, if sent along


@dataclass(frozen=True)
class TextDelta:
    id: str
    delta: str


@dataclass(frozen=True)
class Flush:
    id: str


@dataclass(frozen=True)
class CloseText:
    """tts.v2: `close` with an id ends that utterance's text (without one, the connection)."""

    id: str


Message = Synthesize | Follow | Cancel | Close | Begin | TextDelta | Flush | CloseText

# The protocol's names for the fields the REST body calls otherwise.
_REST_NAMES = {"text": "input", "format": "response_format"}
_WS_NAMES = {rest: ws for ws, rest in _REST_NAMES.items()}


def parse(text: str, default_id: str = "u1", version: str = PROTOCOL, organization=None) -> Message:
    """One client frame; `default_id` names a synthesize message that carries no id; the
    `organization`'s default model and voice fill what a synthesize or begin message leaves open."""
    if len(text.encode()) > MAX_MESSAGE_BYTES:
        raise ProtocolError("message_too_large", f"Messages are limited to {MAX_MESSAGE_BYTES} bytes.")
    try:
        message = load_json(text)
    except ApiError:
        raise ProtocolError("invalid_json", "Messages must be JSON objects (not nested too deeply).") from None
    if not isinstance(message, dict):
        raise ProtocolError("invalid_json", "Messages must be JSON objects.")
    kind, utterance = message.get("type"), message.get("id")
    if kind == "synthesize":
        return _synthesize(message, str(utterance or default_id), organization)
    if kind == "follow":
        return _follow(message, str(utterance or "follow"))
    if kind == "cancel":
        return Cancel(utterance)
    if version == TEXT_STREAMING:
        if kind == "begin":
            if not isinstance(utterance, str) or not utterance:
                raise ProtocolError("required", "id: a begin message names its utterance (a string).")
            return _begin(message, utterance, organization)
        if kind in ("text", "flush") or (kind == "close" and utterance is not None):
            if not isinstance(utterance, str) or not utterance:
                raise ProtocolError("required", f"id: a {kind} message names its utterance.")
            if kind == "flush":
                return Flush(utterance)
            if kind == "close":
                return CloseText(utterance)
            delta = message.get("text")
            if not isinstance(delta, str):
                raise ProtocolError("invalid_value", "text: must be a string.", utterance)
            return TextDelta(utterance, delta)
    if kind == "close":
        return Close()
    kinds = "synthesize, follow, cancel or close"
    if version == TEXT_STREAMING:
        kinds = "synthesize, begin, text, flush, follow, cancel or close"
    raise ProtocolError("unknown_type", f"Unknown message type {kind!r}; use {kinds}.", utterance)


def _synthesize(message: dict, utterance: str, organization=None) -> Synthesize:
    body = {k: v for k, v in message.items() if k not in ("type", "id", *_REST_NAMES)}
    if "text" in message:
        body["input"] = message["text"]
    return Synthesize(utterance, _validated(body, message, utterance, organization))


def _begin(message: dict, utterance: str, organization=None) -> Begin:
    text = message.get("text", "")
    if not isinstance(text, str):
        raise ProtocolError("invalid_value", "text: must be a string.", utterance)
    body = {k: v for k, v in message.items() if k not in ("type", "id", *_REST_NAMES)}
    if "input" in body:  # the text comes in `text` messages
        raise ProtocolError("unknown_parameter", "Unknown parameter: 'input'.", utterance)
    if message.get("input_format") == "ssml":
        raise ProtocolError(
            "invalid_value",
            "input_format: streamed text is plain text; send SSML whole in a synthesize message.",
            utterance,
        )
    body["input"] = "-"  # the options are checked now; the text is checked piece by piece
    body["input_format"] = "text"  # streamed text is plain text, even a piece that starts with <speak
    speech = _validated(body, message, utterance, organization)
    del speech["input"]
    return Begin(utterance, speech, text)


def _validated(body: dict, message: dict, utterance: str, organization=None) -> dict:
    if "format" in message or "output_format" not in message:  # the protocol's default: pcm
        body["response_format"] = message.get("format", "pcm")
    serializer = SpeechRequestSerializer(data=body, context={"organization": organization})
    try:
        valid = serializer.is_valid()
    except ApiError as exc:  # the model is not served (404 model_not_found over REST)
        raise ProtocolError(exc.code or "invalid_value", exc.message, utterance) from None
    if not valid:
        error = validation_error(serializer.errors)
        param = _WS_NAMES.get(error.param or "", error.param)
        raise ProtocolError(
            error.code or "invalid_value", error.message.replace(f"{error.param}:", f"{param}:"), utterance
        )
    return dict(serializer.validated_data)


def _follow(message: dict, utterance: str) -> Follow:
    fmt = message.get("format", "pcm")
    try:
        fmt = output_format(fmt).name
    except ValueError as exc:
        message = str(exc).replace("output_format", "format", 1)
        raise ProtocolError("invalid_value", f"format: {message}", utterance) from None
    return Follow(utterance, str(message.get("job_id", "")), fmt)


def ready(version: str = PROTOCOL) -> dict:
    return {"type": "ready", "protocol": version, "sample_rate": SAMPLE_RATE}


def start(utterance: str, fmt: str, **fields) -> dict:
    return {"type": "start", "id": utterance, "format": fmt, **fields, "sample_rate": output_format(fmt).sample_rate}


def end(utterance: str, **fields) -> dict:
    """An utterance's end; with its `segments` (captions), SSML's marks also as one list in order."""
    marks = [m for segment in fields.get("segments") or () for m in segment.get("marks", ())]
    return {"type": "end", "id": utterance, **fields, **({"marks": marks} if marks else {})}


def error(code: str, message: str, utterance: str | None = None) -> dict:
    return {"type": "error", "id": utterance, "code": code, "message": message}
