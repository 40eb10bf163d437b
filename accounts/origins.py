"""Browser origins (CORS): the sites whose pages may call the speech API with an organization's
client tokens. Only `POST /v1/audio/speech` answers a browser, and only for a token: a preflight
(which carries no credentials) is answered for an origin some organization lists, and the actual
response carries `Access-Control-Allow-Origin` only when the token's own organization lists the
origin. An API key's response never does: a key belongs on a server, not in a page. A token that
no longer opens anything (spent, expired, revoked) gets its 401 answered to an origin some
organization lists, as its preflight was, so that the page can say why."""

from __future__ import annotations

import functools

from django.http import HttpResponse

from tts_saas.request_id import actor_var
from tts_saas.threads import in_thread

from . import audit
from .auth import Principal
from .client_tokens import PREFIX as TOKEN_PREFIX
from .models import Organization

PREFLIGHT_SECONDS = 600  # how long a browser may reuse a preflight's answer
ALLOWED_HEADERS = "Authorization, Content-Type, Idempotency-Key"
EXPOSED_HEADERS = "x-job-id, x-request-id, x-ratelimit-remaining-requests, x-ratelimit-reset-requests"


def set_browser_origins(org: Organization, origins: list[str], by) -> None:
    """Store the organization's browser origins (parsed by `parse_origins`), audited."""
    before, org.browser_origins = org.browser_origins, origins
    org.save(update_fields=["browser_origins"])
    audit.record_changes(org, "settings.browser_origins", {"browser_origins": before}, {"browser_origins": origins}, by)


def listed(org: Organization, origin: str) -> bool:
    return isinstance(org.browser_origins, list) and origin.lower() in org.browser_origins


def listed_anywhere(origin: str) -> bool:
    """Does any organization list `origin`? A preflight knows no organization: no token comes with it."""
    lists = Organization.objects.exclude(browser_origins=[]).values_list("browser_origins", flat=True)
    return any(isinstance(found, list) and origin.lower() in found for found in lists.iterator())


def _preflight(origin: str) -> HttpResponse:
    response = HttpResponse(status=204)
    response["Access-Control-Allow-Origin"] = origin
    response["Access-Control-Allow-Methods"] = "POST"
    response["Access-Control-Allow-Headers"] = ALLOWED_HEADERS
    response["Access-Control-Max-Age"] = str(PREFLIGHT_SECONDS)
    response["Vary"] = "Origin"
    return response


def _bears_token(request) -> bool:
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and credential.strip().startswith(TOKEN_PREFIX)


def browser_cors(view):
    """An async speech view that answers browsers calling with a client token (see the module)."""

    @functools.wraps(view)
    async def wrapped(request, *args, **kwargs):
        origin = request.headers.get("Origin")
        if origin and request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            if await in_thread(listed_anywhere)(origin):
                return _preflight(origin)
        response = await view(request, *args, **kwargs)
        principal = actor_var.get()  # who authenticated in the view, if anyone did
        org = principal.organization if isinstance(principal, Principal) and principal.token else None
        answered = bool(origin and org and listed(org, origin))
        if not answered and origin and response.status_code == 401 and _bears_token(request):
            # a spent or expired token: the page may read the 401 that says so (as its preflight was answered)
            answered = await in_thread(listed_anywhere)(origin)
        if answered:
            response["Access-Control-Allow-Origin"] = origin
            response["Access-Control-Expose-Headers"] = EXPOSED_HEADERS
            response["Vary"] = "Origin"
        return response

    return wrapped
