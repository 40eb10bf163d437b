"""Views of the base: the health check and the site's icon."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

# A speech bubble with a sound wave, in the dashboard's accent colour: what browsers ask for at
# /favicon.ico on every page that names no icon (the admin, /ops/), a 404 before.
ICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<path d="M4 5h24a2 2 0 0 1 2 2v14a2 2 0 0 1-2 2H13l-7 6v-6H4a2 2 0 0 1-2-2V7a2 2 0 0 1 2-2z" fill="#3b5bdb"/>'
    '<path d="M9 14v0M13 10v8M17 8v12M21 11v6M25 13v2" stroke="#fff" stroke-width="2" stroke-linecap="round"/>'
    "</svg>"
)


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def icon(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(ICON, content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response
