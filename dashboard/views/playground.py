"""The playground, which speaks through the WebSocket with a member's ticket: a character counter
with the month's remaining quota, Stop, replay and seeking of what was generated (no second bill),
a WAV download and the request as a curl command."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_POST

from accounts.auth import issue_ticket
from accounts.tenancy import scoped
from billing.limits import limits_for
from billing.usage import month_summary
from inference.voices import VOICES
from synthesis.models import Voice

from ..access import member_required, page, require_active


@member_required
def playground(request):
    """The plan's built-in voices, then the organization's own (by id); `?voice=` preselects one."""
    org = request.principal.organization
    limits = limits_for(org)
    month = month_summary(org)
    voices = [v for v in VOICES.values() if not limits.allowed_voices or v.name in limits.allowed_voices]
    return page(
        request,
        "playground.html",
        "playground",
        voices=voices,
        own_voices=scoped(Voice, org).order_by("created_at").only("id", "name"),
        selected=request.GET.get("voice", ""),
        max_chars=limits.max_input_chars,
        remaining=max(0, month.limits.monthly_characters - month.used),
        base_url=request.build_absolute_uri("/v1").rstrip("/"),
    )


@require_POST
@member_required
def playground_ticket(request):
    """A single-use WebSocket ticket for the signed-in member (CSRF-protected POST)."""
    require_active(request)
    ticket = issue_ticket(request.principal)
    return JsonResponse({"ticket": ticket, "url": f"/v1/audio/stream?ticket={ticket}"})
