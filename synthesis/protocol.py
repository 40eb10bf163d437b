"""The `tts.v1` WebSocket messages (docs/websocket.md), typed.

`parse` turns one client text frame into a `Synthesize`, `Follow`, `Cancel` or `Close`, or raises
`ProtocolError` with the code and message the client is sent; the server's own messages are built
by the functions below, so their fields are written in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from tts_saas.errors import ApiError, validation_error
from tts_saas.parsers import load_json

from .audio import FORMATS, SAMPLE_RATE
from .serializers import SpeechRequestSerializer

PROTOCOL = "tts.v1"
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


Message = Synthesize | Follow | Cancel | Close

# The protocol's names for the fields the REST body calls otherwise.
_REST_NAMES = {"text": "input", "format": "response_format"}
_WS_NAMES = {rest: ws for ws, rest in _REST_NAMES.items()}


def parse(text: str, default_id: str = "u1") -> Message:
    """One client frame; `default_id` names a synthesize message that carries no id."""
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
        return _synthesize(message, str(utterance or default_id))
    if kind == "follow":
        return _follow(message, str(utterance or "follow"))
    if kind == "cancel":
        return Cancel(utterance)
    if kind == "close":
        return Close()
    raise ProtocolError(
        "unknown_type", f"Unknown message type {kind!r}; use synthesize, follow, cancel or close.", utterance
    )


def _synthesize(message: dict, utterance: str) -> Synthesize:
    body = {k: v for k, v in message.items() if k not in ("type", "id", *_REST_NAMES)}
    if "text" in message:
        body["input"] = message["text"]
    body["response_format"] = message.get("format", "pcm")
    serializer = SpeechRequestSerializer(data=body)
    if not serializer.is_valid():
        error = validation_error(serializer.errors)
        param = _WS_NAMES.get(error.param or "", error.param)
        raise ProtocolError(
            error.code or "invalid_value", error.message.replace(f"{error.param}:", f"{param}:"), utterance
        )
    return Synthesize(utterance, dict(serializer.validated_data))


def _follow(message: dict, utterance: str) -> Follow:
    fmt = message.get("format", "pcm")
    if fmt not in FORMATS:
        raise ProtocolError("invalid_value", f"format: use one of {', '.join(FORMATS)}.", utterance)
    return Follow(utterance, str(message.get("job_id", "")), fmt)


def ready() -> dict:
    return {"type": "ready", "protocol": PROTOCOL, "sample_rate": SAMPLE_RATE}


def start(utterance: str, fmt: str, **fields) -> dict:
    return {"type": "start", "id": utterance, "format": fmt, **fields, "sample_rate": SAMPLE_RATE}


def end(utterance: str, **fields) -> dict:
    return {"type": "end", "id": utterance, **fields}


def error(code: str, message: str, utterance: str | None = None) -> dict:
    return {"type": "error", "id": utterance, "code": code, "message": message}
