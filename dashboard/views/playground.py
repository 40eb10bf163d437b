"""The voices page and the playground, which speaks through the WebSocket with a member's ticket."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_POST

from accounts.auth import issue_ticket
from billing.limits import limits_for
from inference.voices import VOICES

from ..access import member_required, page, require_active


@member_required
def voices(request):
    allowed = limits_for(request.principal.organization).allowed_voices
    rows = [{"voice": v, "available": not allowed or v.name in allowed} for v in VOICES.values()]
    return page(request, "voices.html", "voices", voices=rows)


@member_required
def playground(request):
    limits = limits_for(request.principal.organization)
    voices = [v for v in VOICES.values() if not limits.allowed_voices or v.name in limits.allowed_voices]
    return page(request, "playground.html", "playground", voices=voices, max_chars=limits.max_input_chars)


@require_POST
@member_required
def playground_ticket(request):
    """A single-use WebSocket ticket for the signed-in member (CSRF-protected POST)."""
    require_active(request)
    ticket = issue_ticket(request.principal)
    return JsonResponse({"ticket": ticket, "url": f"/v1/audio/stream?ticket={ticket}"})
