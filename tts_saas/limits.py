"""Limits on requests that the HTTP server does not fully enforce itself: the head, and the body.

uvicorn runs with `--http h11 --h11-max-incomplete-event-size 16384` (the Dockerfile's CMD and
every other place that starts it): h11 stops buffering a request head that is still incomplete
past 16 KiB and uvicorn answers 400 before any of our code runs. That bound only holds while the
head is incomplete: a larger head that arrives in one read (up to 256 KiB) is parsed whole. And h11
has no limit on how many header fields there are, each costing work in every layer that reads
them. So here, first thing after the request id, a request with more than MAX_HEADERS fields or
more than MAX_HEADER_BYTES of them is refused with 431 Request Header Fields Too Large.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.urls import Resolver404, resolve

from .errors import error_response
from .middleware import RequestCheckMiddleware

MAX_HEADERS = 100
MAX_HEADER_BYTES = 16 * 1024  # as the server's --h11-max-incomplete-event-size


def _fields(request) -> list[tuple[bytes, bytes]]:
    """The header fields as received. ASGI requests carry them in the scope, one entry per field
    (Django's META merges repeated fields into one, so counting META would miss them)."""
    scope = getattr(request, "scope", None)
    if scope is not None and "headers" in scope:
        return list(scope["headers"])
    return [
        (name.encode("latin-1"), str(value).encode("latin-1", "replace"))
        for name, value in request.META.items()
        if name.startswith("HTTP_") or name in ("CONTENT_TYPE", "CONTENT_LENGTH")
    ]


def header_problem(request) -> str | None:
    return fields_problem(_fields(request))


def fields_problem(fields: list[tuple[bytes, bytes]]) -> str | None:
    if len(fields) > MAX_HEADERS:
        return f"The request has too many header fields: at most {MAX_HEADERS} are accepted."
    size = sum(len(name) + len(value) + 4 for name, value in fields)  # "name: value\r\n"
    if size > MAX_HEADER_BYTES:
        return f"The request's header fields are too large: at most {MAX_HEADER_BYTES} bytes are accepted."
    return None


def refused(message: str):
    return error_response(431, message, "request_header_fields_too_large")


class HeaderLimitsMiddleware(RequestCheckMiddleware):
    """Refuses a request with too many or too large header fields (431)."""

    def refuse(self, request):
        problem = header_problem(request)
        return refused(problem) if problem else None


def body_problem(request) -> str | None:
    """Why the body is refused before anything parses it: larger than TTS_MAX_BODY_BYTES by its
    Content-Length, or (sent without one) once read (Django stops reading at the same size). A view
    marked with `large_body` takes up to its own limit, announced by Content-Length."""
    limit = settings.TTS_MAX_BODY_BYTES
    message = f"The request body is too large: at most {limit} bytes are accepted."
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return "The Content-Length header is not a number."
    if length > limit:
        own = _own_limit(request)
        if own is None:
            return message
        return f"The request body is too large: at most {own} bytes are accepted." if length > own else None
    if request.method in ("POST", "PUT", "PATCH"):
        try:
            request.body  # noqa: B018  (reads it, bounded by DATA_UPLOAD_MAX_MEMORY_SIZE)
        except RequestDataTooBig:
            return message
    return None


def large_body(max_bytes: int):
    """Mark a view that takes bodies up to `max_bytes` (more than TTS_MAX_BODY_BYTES): it reads
    them itself, with `request.read()`, never `request.body`."""

    def mark(view):
        view.max_body_bytes = max_bytes
        return view

    return mark


def _own_limit(request) -> int | None:
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    return getattr(match.func, "max_body_bytes", None)


class BodyLimitsMiddleware(RequestCheckMiddleware):
    """Refuses an oversized body with 413 before any view or parser sees it."""

    def refuse(self, request):
        problem = body_problem(request)
        return error_response(413, problem, "request_too_large") if problem else None


class WebSocketHeaderLimits:
    """The same limits for WebSocket handshakes, which never pass through Django's middleware: an
    ASGI wrapper that refuses the handshake (the server answers 403) before any consumer runs."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "websocket" and fields_problem(list(scope.get("headers", []))):
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
            return None
        return await self.app(scope, receive, send)
