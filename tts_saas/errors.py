"""The error shape of the API, OpenAI's: {"error": {"message", "type", "param", "code"}}; under
/elevenlabs/ (ElevenLabs' wire) ElevenLabs' own, {"detail": {"status", "message"}}.

Views raise `ApiError`; DRF exceptions and Django's 404/500 handlers are mapped to the same body,
and ErrorShapeMiddleware turns any error of a request under /elevenlabs/ into ElevenLabs' shape
(the limits', the outages' and the 500 handler's too), so one wire never answers in the other's.
"""

from __future__ import annotations

import functools
import json
import logging

import redis.exceptions
from asgiref.sync import iscoroutinefunction
from django import db
from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from drf_spectacular.utils import OpenApiResponse
from rest_framework import exceptions as drf_exceptions
from rest_framework import serializers

from .middleware import ResponseMiddleware, SyncAndAsyncMiddleware

logger = logging.getLogger(__name__)

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable",
}


class ErrorDetailSerializer(serializers.Serializer):
    message = serializers.CharField()
    # Statuses not in TYPES: "api_error" from 500 up, "invalid_request_error" below.
    type = serializers.ChoiceField(choices=sorted({*TYPES.values(), "api_error", "invalid_request_error"}))
    param = serializers.CharField(allow_null=True, help_text="The request field at fault, if one is.")
    code = serializers.CharField(allow_null=True, help_text="A stable machine-readable reason.")


class ErrorSerializer(serializers.Serializer):
    """The body of every error response; the OpenAPI schema documents it from here."""

    error = ErrorDetailSerializer()


def error_responses(descriptions: dict[int, str], shape=ErrorSerializer) -> dict:
    """`extend_schema` responses: each status with the error body (`shape`), described as given."""
    return {status: OpenApiResponse(shape, description=text) for status, text in descriptions.items()}


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    def response(self) -> JsonResponse:
        return error_response(self.status, self.message, self.code, self.param, self.headers)


def error_response(
    status: int,
    message: str,
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    body = {
        "error": {
            "message": message,
            "type": TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error"),
            "param": param,
            "code": code,
        }
    }
    response = JsonResponse(body, status=status, json_dumps_params={"ensure_ascii": False})
    for name, value in (headers or {}).items():
        response[name] = value
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="api"'
    if status == 409:  # a conflict stays one: the openai SDKs retry a 409 unless told not to
        response["x-should-retry"] = "false"
    return response


def _path(outer: str | None, inner: str | None) -> str | None:
    """A nested field's name as OpenAI writes them: `entries[1].text`, `lexicons[0]`."""
    if outer is None or inner is None:
        return outer or inner
    return f"{outer}{inner}" if inner.startswith("[") else f"{outer}.{inner}"


def _first_validation_error(detail) -> tuple[str | None, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            if isinstance(key, int):  # a list field's item
                param: str | None = f"[{key}]"
            else:
                param = key if key != "non_field_errors" else None
            inner_param, message = _first_validation_error(value)
            return _path(param, inner_param), message
    if isinstance(detail, list) and detail:
        if all(isinstance(item, dict) for item in detail):  # a list of objects: the first with an error
            for index, item in enumerate(detail):
                if item:
                    inner_param, message = _first_validation_error(item)
                    return _path(f"[{index}]", inner_param), message
        return _first_validation_error(detail[0])
    return None, detail


def validation_error(detail) -> ApiError:
    """The first problem of a DRF validation error, as a 400 naming the field."""
    param, message = _first_validation_error(detail)
    code = getattr(message, "code", None)
    code = code if code not in (None, "invalid") else "invalid_value"
    named = param and code not in ("unknown_parameter", "unsupported_parameter")  # those name it themselves
    return ApiError(400, f"{param}: {message}" if named else str(message), code, param)


def drf_exception_handler(exc, context):
    if isinstance(exc, ApiError):
        return exc.response()
    if isinstance(exc, drf_exceptions.ValidationError):
        return validation_error(exc.detail).response()
    if isinstance(exc, drf_exceptions.ParseError):
        return error_response(400, f"The request body is not valid JSON: {exc.detail}", "invalid_json")
    if isinstance(exc, drf_exceptions.NotAuthenticated | drf_exceptions.AuthenticationFailed):
        return error_response(401, str(exc.detail), "invalid_api_key")
    if isinstance(exc, drf_exceptions.Throttled):
        return error_response(429, str(exc.detail), "rate_limit_exceeded")
    if isinstance(exc, Http404):
        exc = drf_exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    if not isinstance(exc, drf_exceptions.APIException):
        return None  # not an API error: Django's 500 handler answers
    return error_response(exc.status_code, str(exc.detail), exc.default_code)


def require_methods(*methods: str):
    """Django's require_http_methods, but the refusal is a 405 in the API's error shape (with
    Allow), as DRF views give, rather than an empty text/html one. For sync and async views."""

    def refuse(request):
        message = f'Method "{request.method}" not allowed.'
        return error_response(405, message, "method_not_allowed", headers={"Allow": ", ".join(methods)})

    def decorator(view):
        async def async_view(request, *args, **kwargs):
            if request.method not in methods:
                return refuse(request)
            return await view(request, *args, **kwargs)

        def sync_view(request, *args, **kwargs):
            if request.method not in methods:
                return refuse(request)
            return view(request, *args, **kwargs)

        return functools.wraps(view)(async_view if iscoroutinefunction(view) else sync_view)

    return decorator


def not_found(request, exception=None):
    return error_response(404, f"Unknown path: {request.path}", "not_found")


def server_error(request):
    return error_response(500, "The server had an error while processing your request.", "server_error")


# A backing service that is down or restarting: the request may succeed when retried.
OUTAGES: tuple[type[Exception], ...] = (
    redis.exceptions.ConnectionError,  # also a pool with no free connection in time
    redis.exceptions.TimeoutError,
    db.OperationalError,
    db.InterfaceError,
)
OUTAGE_RETRY_AFTER = "5"


class OutageMiddleware(SyncAndAsyncMiddleware):
    """While Redis or the database is down (restarting, failing over), a view that needs it
    answers 503 with Retry-After in the API's error shape instead of a 500; the clients' pools
    reconnect by themselves once it is back."""

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, OUTAGES):
            return None
        logger.warning("backing service unavailable: %s", type(exception).__name__, extra={"path": request.path})
        return error_response(
            503,
            "A backing service of this API is briefly unavailable. Try again shortly.",
            "service_unavailable",
            headers={"Retry-After": OUTAGE_RETRY_AFTER},
        )


ELEVENLABS_PREFIX = "/elevenlabs/"
# Our error codes as ElevenLabs names them in `detail.status` (others keep ours).
ELEVENLABS_STATUS = {
    "missing_api_key": "invalid_api_key",
    "invalid_api_key": "invalid_api_key",
    "insufficient_quota": "quota_exceeded",
    "too_many_concurrent_requests": "too_many_concurrent_requests",
    "too_many_connections": "too_many_concurrent_requests",
    "rate_limit_exceeded": "too_many_requests",
    "worker_unavailable": "system_busy",
    "queue_timeout": "system_busy",
}


def elevenlabs_body(code: str | None, message: str) -> dict:
    """ElevenLabs' error body, `{"detail": {"status": …, "message": …}}`."""
    return {"detail": {"status": ELEVENLABS_STATUS.get(code or "", code or "error"), "message": message}}


def shaped_for(path: str, response):
    """`response` as the wire of `path` words it: an error in the API's shape becomes ElevenLabs'
    under /elevenlabs/ (its status and headers kept); anything else is returned as it is."""
    if not path.startswith(ELEVENLABS_PREFIX) or response.status_code < 400 or response.streaming:
        return response
    if not response.get("Content-Type", "").startswith("application/json"):
        return response
    try:
        error = json.loads(response.content).get("error")
    except (ValueError, AttributeError):
        return response
    if not isinstance(error, dict):
        return response
    body = json.dumps(elevenlabs_body(error.get("code"), str(error.get("message", ""))), ensure_ascii=False)
    response.content = body.encode()
    if response.has_header("Content-Length"):  # set by CommonMiddleware, within
        response["Content-Length"] = str(len(response.content))
    return response


class ErrorShapeMiddleware(ResponseMiddleware):
    """Every error of a request under /elevenlabs/ in ElevenLabs' shape, whichever part refused it."""

    def process(self, request, response, started: float):
        return shaped_for(request.path, response)
