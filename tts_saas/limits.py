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

from .errors import error_response, shaped_for
from .middleware import RequestCheckMiddleware
from .request_id import new_request_id

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
    Content-Length, or (sent without one) once read (Django refuses a spooled body past the same
    size). A view marked with `large_body` takes up to its own limit in a POST of its content type,
    announced by Content-Length. HttpBodyLimits below refuses the same bodies before they are read."""
    limit = settings.TTS_MAX_BODY_BYTES
    message = too_large(limit)
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return "The Content-Length header is not a number."
    if length > limit:
        own = own_limit(request.path_info, request.content_type) if request.method == "POST" else None
        if own is None:
            return message
        return too_large(own) if length > own else None
    if request.method in ("POST", "PUT", "PATCH"):
        try:
            request.body  # noqa: B018  (reads it, bounded by DATA_UPLOAD_MAX_MEMORY_SIZE)
        except RequestDataTooBig:
            return message
    return None


def too_large(limit: int) -> str:
    return f"The request body is too large: at most {limit} bytes are accepted."


def large_body(max_bytes: int, content_type: str):
    """Mark a view that takes bodies of `content_type` up to `max_bytes` (more than
    TTS_MAX_BODY_BYTES): it reads them itself, with `request.read()`, never `request.body`."""

    def mark(view):
        view.large_body = (max_bytes, content_type)
        return view

    return mark


def own_limit(path: str, content_type: str) -> int | None:
    """The limit of the `large_body` view at `path` for a body of `content_type`, if it is one."""
    try:
        match = resolve(path)
    except Resolver404:
        return None
    max_bytes, accepted = getattr(match.func, "large_body", (None, None))
    return max_bytes if content_type == accepted else None


class BodyLimitsMiddleware(RequestCheckMiddleware):
    """Refuses an oversized body with 413 before any view or parser sees it."""

    def refuse(self, request):
        problem = body_problem(request)
        return error_response(413, problem, "request_too_large") if problem else None


class HttpBodyLimits:
    """The body limits before the body is read. Django's ASGI handler reads a whole request body
    (into a temporary file) before any middleware runs, so BodyLimitsMiddleware alone spares the
    parsers, not the bandwidth or the disk. This ASGI wrapper answers 413 at once when the
    Content-Length is over the limit (a `large_body` view's own for a POST of its content type),
    and counts a body sent without one (chunked, of any method) as it arrives: past
    TTS_MAX_BODY_BYTES it ends the read as a disconnect (Django then answers nothing) and answers
    413 itself. Either way the connection is closed after the 413, so the rest is not received."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers", []))
        limit = settings.TTS_MAX_BODY_BYTES
        length = headers.get(b"content-length", b"").decode("latin-1")
        if length and b"transfer-encoding" not in headers:
            if not (length.isascii() and length.isdigit()):
                return await self.app(scope, receive, send)  # BodyLimitsMiddleware words this one
            if int(length) > limit and scope["method"] == "POST":
                content_type = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
                limit = own_limit(_path_info(scope), content_type) or limit
            if int(length) > limit:
                return await _answer(scope, send, too_large(limit))
            return await self.app(scope, receive, send)
        received, over, started = 0, False, False

        async def counted():
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def watched(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, counted, watched)
        if over and not started:
            await _answer(scope, send, too_large(limit))


def _path_info(scope) -> str:
    """The path as Django resolves it: without the prefix the server is mounted at (root_path)."""
    path, root = scope["path"], scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


async def _answer(scope, send, message: str) -> None:
    """413 in the API's error shape, with a request id as every response has, and the connection
    closed after it (else the server would go on receiving the body it refused)."""
    request_id = new_request_id(dict(scope.get("headers", [])).get(b"x-request-id", b"").decode("latin-1"))
    body = shaped_for(_path_info(scope), error_response(413, message, "request_too_large")).content
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"x-request-id", request_id.encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
