"""Request ids: every response carries `x-request-id`, and every log line written while
serving it carries the same id (structured JSON logs)."""

from __future__ import annotations

import contextvars
import json
import logging
import re
import uuid

from asgiref.sync import iscoroutinefunction, markcoroutinefunction

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_VALID = re.compile(r"^[A-Za-z0-9._\-]{1,128}$")


def new_request_id(incoming: str | None = None) -> str:
    if incoming and _VALID.match(incoming):
        return incoming
    return f"req_{uuid.uuid4().hex}"


class RequestIdMiddleware:
    """Takes a well-formed incoming `X-Request-ID` or makes one; sync and async capable."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def _begin(self, request):
        rid = new_request_id(request.headers.get("X-Request-ID"))
        request.request_id = rid
        return request_id_var.set(rid)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        token = self._begin(request)
        try:
            response = self.get_response(request)
            response["x-request-id"] = request.request_id
            return response
        finally:
            request_id_var.reset(token)

    async def __acall__(self, request):
        token = self._begin(request)
        try:
            response = await self.get_response(request)
            response["x-request-id"] = request.request_id
            return response
        finally:
            request_id_var.reset(token)


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = request_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
            "request_id": getattr(record, "request_id", "-"),
        }
        for key in ("job_id", "org_id"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)
