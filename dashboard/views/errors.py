"""Error pages: the dashboard's 403, 404 and 500 are pages with its navigation (a signed-in member
keeps their way around), and so is any other path a browser asks for outside the API (it sends
`Accept: text/html`); the API's stay JSON in its error shape (tts_saas.errors)."""

from __future__ import annotations

from django.shortcuts import render

from tts_saas import errors

from ..access import current_membership

PAGES = ("/dashboard", "/accounts")
API = ("/v1/", "/v1", "/elevenlabs/", "/billing/stripe/", "/healthz", "/metrics")  # JSON whoever asks
TITLES = {403: "Not allowed", 404: "Page not found", 500: "Something went wrong"}


def _page(request, status: int, message: str):
    context: dict = {"status": status, "title": TITLES[status], "message": message}
    user = getattr(request, "user", None)
    if status != 500 and user is not None and user.is_authenticated:  # (a 500 renders with as little as it can)
        current, memberships = current_membership(request)
        if current is not None:
            context.update(current_org=current.organization, memberships=memberships, membership=current)
    return render(request, "dashboard/error.html", context, status=status)


def _is_page(request) -> bool:
    if request.path.startswith(PAGES):
        return True
    return not request.path.startswith(API) and "text/html" in request.headers.get("Accept", "")


def not_found(request, exception=None):
    if _is_page(request):
        return _page(request, 404, f"There is no page at {request.path}.")
    return errors.not_found(request, exception)


def forbidden(request, exception=None):
    if _is_page(request):
        reason = str(exception) if exception is not None and str(exception) else "You may not do that here."
        return _page(request, 403, reason)
    return errors.error_response(403, "Forbidden.", "forbidden")


def server_error(request):
    if _is_page(request):
        return _page(request, 500, "The server had an error. It has been logged; try again in a moment.")
    return errors.server_error(request)
