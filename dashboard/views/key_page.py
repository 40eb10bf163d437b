"""One API key's page: what it is (access, owner, expiry, last use with its address, this month's
characters) and what PATCH /v1/keys/{id} changes — name, scopes (a preset or any combination),
allowed networks, monthly cap, requests a minute — through `accounts.keys.update_key`, so
`accounts.grants.check` decides what the viewer may give; rotate and revoke post to `keys`."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect

from accounts import actions
from accounts.models import ApiKey
from accounts.tenancy import scoped
from tts_saas.errors import ApiError

from ..access import member_required, page, require_active
from ..keyforms import ROTATION_GRACE, KeySettingsForm
from .keys import NEW_KEY, new_key_examples, with_usage


def viewed_key(request, prefix: str) -> ApiKey:
    """A key this member may see, revoked ones too: any of the organization's for owners and
    admins, else their own; 404 otherwise."""
    keys = scoped(ApiKey, request.principal.organization).filter(prefix=prefix).select_related("owner", "created_by")
    if not request.principal.is_admin:
        keys = keys.filter(owner=request.user)
    key = keys.first()
    if key is None:
        raise Http404
    return key


@member_required
def key_page(request, prefix: str):
    key = viewed_key(request, prefix)
    posted = request.method == "POST"
    form = KeySettingsForm(request.POST if posted else None, key=key, viewer=request.principal.scopes)
    if posted:
        require_active(request)
        if key.revoked_at is not None:
            raise Http404
        if form.is_valid():
            changes = form.changes()
            try:
                if changes:
                    actions.update_key(key, request.principal, changes)
            except ApiError as exc:  # beyond what the viewer may give (accounts.grants)
                field = "access" if exc.param == "scopes" else exc.param
                form.add_error(field if field in form.fields else None, exc.message)
            else:
                saved = f"Key {key.name} saved: it applies from the key's next request."
                messages.info(request, saved if changes else "Nothing changed.")
                return redirect("dashboard:key", key.prefix)
    [key] = with_usage([key])
    response = page(
        request,
        "key.html",
        "keys",
        key=key,
        form=form,
        created=request.session.pop(NEW_KEY, None),
        **new_key_examples(request),
        can_change=key.revoked_at is None and request.principal.organization.suspended_at is None,
        graces=ROTATION_GRACE,
    )
    response["Cache-Control"] = "no-store"  # a rotated key's new secret
    return response
