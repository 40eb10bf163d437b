"""API keys: list, create (the secret shown once), revoke."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.models import ApiKey
from accounts.tenancy import scoped

from ..access import member_required, page, require_admin
from ..forms import KeyForm


@member_required
def keys(request):
    org = request.principal.organization
    form = KeyForm(request.POST or None)
    created = None
    if request.method == "POST":
        require_admin(request, "manage API keys")
        if form.is_valid():
            key, raw = org.create_api_key(
                form.cleaned_data["name"],
                expires_at=form.cleaned_data["expires_at"],
                created_by=request.user,
                kind=form.cleaned_data["kind"],
            )
            created = {"key": key, "raw": raw}
            form = KeyForm()
    return page(
        request,
        "keys.html",
        "keys",
        keys=scoped(ApiKey, org),
        form=form,
        created=created,
        can_manage=request.principal.is_admin,
    )


@require_POST
@member_required
def revoke_key(request, prefix: str):
    require_admin(request, "manage API keys")
    key = scoped(ApiKey, request.principal.organization).filter(prefix=prefix).first()
    if key is None:
        raise Http404
    key.revoke()
    messages.info(request, f"Key {key.name} ({key.prefix}) revoked: it is refused from now on.")
    return redirect("dashboard:keys")
