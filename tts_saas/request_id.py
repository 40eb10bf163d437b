"""Request ids: every response carries `x-request-id`, and every log line written while
serving it carries the same id (structured JSON logs); Celery tasks adopt the id of the request
that sent them. The client's address (the socket's peer, as uvicorn resolved it) is kept beside it
for the audit log."""

from __future__ import annotations

import contextvars
import logging
import re
import uuid

from pythonjsonlogger.json import JsonFormatter

from .middleware import SyncAndAsyncMiddleware

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
client_address_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("client_address", default=None)
# Who acts in this request (a key's or a member's principal, a user), once authentication knows:
# what the audit log records for changes made deep inside (model signals) without being told.
actor_var: contextvars.ContextVar[object | None] = contextvars.ContextVar("actor", default=None)
_VALID = re.compile(r"^[A-Za-z0-9._\-]{1,128}$")


def new_request_id(incoming: str | None = None) -> str:
    if incoming and _VALID.match(incoming):
        return incoming
    return f"req_{uuid.uuid4().hex}"


class RequestIdMiddleware(SyncAndAsyncMiddleware):
    """Takes a well-formed incoming `X-Request-ID` or makes one; sync and async capable."""

    def _begin(self, request):
        rid = new_request_id(request.headers.get("X-Request-ID"))
        request.request_id = rid
        return (
            request_id_var.set(rid),
            client_address_var.set(request.META.get("REMOTE_ADDR")),
            actor_var.set(None),
        )

    @staticmethod
    def _end(tokens) -> None:
        request_id_var.reset(tokens[0])
        client_address_var.reset(tokens[1])
        actor_var.reset(tokens[2])

    def __call__(self, request):
        if self._async:
            return self.__acall__(request)
        token = self._begin(request)
        try:
            response = self.get_response(request)
            response["x-request-id"] = request.request_id
            return response
        finally:
            self._end(token)

    async def __acall__(self, request):
        token = self._begin(request)
        try:
            response = await self.get_response(request)
            response["x-request-id"] = request.request_id
            return response
        finally:
            self._end(token)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        return True


def json_formatter() -> JsonFormatter:
    """One JSON object per line: time (UTC, with its zone), level, logger, message, request id and
    every `extra` field the call passed (job_id, org_id, model_version, ...)."""
    return JsonFormatter(
        "%(levelname)s %(name)s %(message)s %(request_id)s",
        rename_fields={"levelname": "level", "name": "logger", "message": "msg"},
        timestamp="ts",
        json_ensure_ascii=False,
    )
