"""The one error shape of the API, OpenAI's: {"error": {"message", "type", "param", "code"}}.

Views raise `ApiError`; DRF exceptions and Django's 404/500 handlers are mapped to the same body.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404, JsonResponse
from rest_framework import exceptions as drf_exceptions

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
    return response


def _first_validation_error(detail) -> tuple[str | None, str]:
    if isinstance(detail, dict):
        for key, value in detail.items():
            param = key if key != "non_field_errors" else None
            inner_param, message = _first_validation_error(value)
            return (inner_param or param), message
    if isinstance(detail, list) and detail:
        return _first_validation_error(detail[0])
    return None, detail


def validation_error(detail) -> ApiError:
    """The first problem of a DRF validation error, as a 400 naming the field."""
    param, message = _first_validation_error(detail)
    code = getattr(message, "code", None)
    code = code if code not in (None, "invalid") else "invalid_value"
    return ApiError(400, f"{param}: {message}" if param else str(message), code, param)


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


def not_found(request, exception=None):
    return error_response(404, f"Unknown path: {request.path}", "not_found")


def server_error(request):
    return error_response(500, "The server had an error while processing your request.", "server_error")
