"""The docs page: API reference link, the WebSocket protocol and examples with the user's key prefix."""

from __future__ import annotations

from django.conf import settings

from accounts.models import ApiKey
from accounts.tenancy import scoped

from ..access import member_required, page


@member_required
def docs(request):
    prefixes = list(
        scoped(ApiKey, request.principal.organization)
        .filter(revoked_at__isnull=True)
        .values_list("prefix", flat=True)[:1]
    )
    example_key = f"tts_{prefixes[0]}_…" if prefixes else "tts_<your key>"
    protocol = (settings.BASE_DIR / "docs" / "websocket.md").read_text(encoding="utf-8")
    return page(
        request,
        "docs.html",
        "docs",
        example_key=example_key,
        base_url=request.build_absolute_uri("/v1"),
        websocket_protocol=protocol,
    )
