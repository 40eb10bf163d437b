"""The organization's browser origins (accounts.origins), set from its Settings page: the sites
whose pages may call the speech API with its client tokens."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.origin_names import parse_origins
from accounts.origins import set_browser_origins

from ..access import member_required, require_admin


@require_POST
@member_required
def browser_origins(request):
    require_admin(request, "change the browser origins")
    org = request.membership.organization
    typed = request.POST.get("browser_origins", "").replace(",", "\n").splitlines()
    try:
        origins = parse_origins(typed)
    except ValueError as exc:
        messages.error(request, f"Browser origins not saved: {exc}")
    else:
        set_browser_origins(org, origins, request.user)
        listed = ", ".join(origins) if origins else "none: no page may call the API with a client token"
        messages.info(request, f"Browser origins saved: {listed}.")
    return redirect(reverse("dashboard:organization") + "#browser-origins")
