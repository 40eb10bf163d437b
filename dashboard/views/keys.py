"""API keys: list, create with a preset's scopes and an IP allowlist (the secret shown once),
revoke; the webhook signing secret: shown to owners and admins, rotated; the organization's IP
allowlist."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts import actions, scopes
from accounts.models import WEBHOOK_SECRET_GRACE, ApiKey
from accounts.tenancy import scoped
from tts_saas.errors import ApiError

from ..access import member_required, page, require_admin
from ..forms import IpAllowlistForm, KeyForm

ROTATE_WEBHOOK_SECRET = "rotate-webhook-secret"  # the rotate form's `action`: it posts to this page
IP_ALLOWLIST = "ip-allowlist"
NEW_KEY = "new_api_key"  # the session's one-time copy of a key just created


@member_required
def keys(request):
    org = request.principal.organization
    if request.method == "POST" and request.POST.get("action") == ROTATE_WEBHOOK_SECRET:
        return _rotate_webhook_secret(request)
    posted = request.POST.get("action") if request.method == "POST" else None
    allowlist = IpAllowlistForm(
        request.POST if posted == IP_ALLOWLIST else None, initial={"allowed_ips": ", ".join(org.allowed_ips)}
    )
    if posted == IP_ALLOWLIST:
        require_admin(request, "change the IP allowlist")
        if allowlist.is_valid():
            try:
                actions.set_ip_allowlist(
                    org, allowlist.cleaned_data["allowed_ips"], request.META.get("REMOTE_ADDR"), request.user
                )
            except ApiError as exc:
                allowlist.add_error("allowed_ips", exc.message)
            else:
                messages.info(request, "IP allowlist saved: API calls from other addresses are refused from now on.")
                return redirect("dashboard:keys")
    form = KeyForm(request.POST if request.method == "POST" and not posted else None, organization=org)
    if request.method == "POST" and not posted:
        require_admin(request, "manage API keys")
        if form.is_valid():
            key, raw = actions.create_key(
                org,
                form.cleaned_data["name"],
                request.user,
                expires_at=form.cleaned_data["expires_at"],
                created_by=request.user,
                scopes=scopes.PRESETS[form.cleaned_data["kind"]],
                allowed_ips=form.cleaned_data["allowed_ips"],
            )
            # Shown once, on the page the browser is sent to: a reload makes no second key and
            # shows the secret no more.
            request.session[NEW_KEY] = {"raw": raw, "name": key.name, "kind": key.kind}
            return redirect("dashboard:keys")
    created = request.session.pop(NEW_KEY, None)
    return page(
        request,
        "keys.html",
        "keys",
        keys=scoped(ApiKey, org).select_related("created_by"),
        form=form,
        allowlist=allowlist,
        allowlist_action=IP_ALLOWLIST,
        created=created,
        base_url=request.build_absolute_uri("/v1").rstrip("/"),
        can_manage=request.principal.is_admin,
        webhook_secret=org.webhook_secret if request.principal.is_admin else None,
        previous_valid_until=org.previous_webhook_secret_valid_until(),
        rotate_action=ROTATE_WEBHOOK_SECRET,
    )


def _rotate_webhook_secret(request):
    require_admin(request, "rotate the webhook signing secret")
    actions.rotate_webhook_secret(request.principal.organization, request.user)
    hours = int(WEBHOOK_SECRET_GRACE.total_seconds() // 3600)
    messages.info(
        request,
        f"Webhook signing secret rotated. The previous secret stays valid for {hours} h (callbacks carry a "
        "signature with each): switch your receivers to the new one within that time.",
    )
    return redirect("dashboard:keys")


@require_POST
@member_required
def revoke_key(request, prefix: str):
    require_admin(request, "manage API keys")
    key = scoped(ApiKey, request.principal.organization).filter(prefix=prefix).first()
    if key is None:
        raise Http404
    actions.revoke_key(key, request.user)
    messages.info(request, f"Key {key.name} ({key.prefix}) revoked: it is refused from now on.")
    return redirect("dashboard:keys")
