"""API keys: list, create with a preset's scopes and an IP allowlist (the secret shown once),
revoke; the webhook signing secret: shown to owners and admins, rotated; the organization's IP
allowlist."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts import actions, scopes
from accounts.models import WEBHOOK_SECRET_GRACE, ApiKey, Organization
from accounts.tenancy import scoped
from billing import quota
from billing.models import KeyQuotaPeriod
from synthesis.api.webhooks import WebhookEndpointSerializer
from tts_saas.errors import ApiError

from ..access import member_required, page, require_active, require_admin
from ..keyforms import ROTATION_GRACE, IpAllowlistForm, KeyChangeForm, KeyForm, name_taken

ROTATE_WEBHOOK_SECRET = "rotate-webhook-secret"  # the rotate form's `action`: it posts to this page
IP_ALLOWLIST = "ip-allowlist"
WEBHOOK_ENDPOINT = "webhook-endpoint"
DATA_RETENTION = "data-retention"
NEW_KEY = "new_api_key"  # the session's one-time copy of a key just created


@member_required
def keys(request):
    org = request.principal.organization
    posted = request.POST.get("action") if request.method == "POST" else None
    if posted in SETTINGS:  # the page's other forms post here, each with its `action`
        return SETTINGS[posted](request)
    allowlist = IpAllowlistForm(  # prefixed: the key form has a field of that name too
        request.POST if posted == IP_ALLOWLIST else None,
        initial={"allowed_ips": ", ".join(map(str, org.allowed_ips)) if isinstance(org.allowed_ips, list) else ""},
        prefix="org",
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
    admin = request.principal.is_admin
    form = KeyForm(request.POST if request.method == "POST" and not posted else None, organization=org, admin=admin)
    if request.method == "POST" and not posted:
        require_active(request)  # members make their own keys; owners and admins any
        if form.is_valid():
            key, raw = actions.create_key(
                org,
                form.cleaned_data["name"],
                request.principal,
                expires_at=form.cleaned_data["expires_at"],
                created_by=request.user,
                # A member's key: the preset as far as the member's role goes (a key gives no more).
                scopes=scopes.bounded(scopes.PRESETS[form.cleaned_data["kind"]], request.principal.scopes),
                allowed_ips=form.cleaned_data["allowed_ips"],
                owner=None if admin and form.cleaned_data.get("owner") == "service" else request.user,
                monthly_character_cap=form.cleaned_data["monthly_character_cap"],
                requests_per_minute=form.cleaned_data["requests_per_minute"],
            )
            # Shown once, on the page the browser is sent to: a reload makes no second key and
            # shows the secret no more.
            request.session[NEW_KEY] = {"raw": raw, "name": key.name, "kind": key.kind}
            return redirect("dashboard:keys")
    created = request.session.pop(NEW_KEY, None)
    every = scoped(ApiKey, org).select_related("created_by", "owner")
    if not admin:  # a member sees their own keys; owners and admins every key
        every = every.filter(owner=request.user)
    show_revoked = request.GET.get("revoked") == "1"  # revoked keys are history: listed on request
    response = page(
        request,
        "keys.html",
        "keys",
        keys=with_usage(every if show_revoked else every.filter(revoked_at__isnull=True)),
        show_revoked=show_revoked,
        revoked_count=every.filter(revoked_at__isnull=False).count(),
        form=form,
        allowlist=allowlist,
        allowlist_action=IP_ALLOWLIST,
        created=created,
        base_url=request.build_absolute_uri("/v1").rstrip("/"),
        can_manage=request.principal.is_admin,
        can_create=request.principal.organization.suspended_at is None,
        graces=ROTATION_GRACE,
        webhook_secret=org.webhook_secret if request.principal.is_admin else None,
        previous_valid_until=org.previous_webhook_secret_valid_until(),
        rotate_action=ROTATE_WEBHOOK_SECRET,
        endpoint_action=WEBHOOK_ENDPOINT,
        retention_action=DATA_RETENTION,
        retentions=Organization.Retention.choices,
    )
    response["Cache-Control"] = "no-store"  # a new key's secret, the webhook signing secret
    return response


def with_usage(keys) -> list[ApiKey]:
    """The keys, each with the characters it used this month (`used_this_month`)."""
    keys = list(keys)
    this_month = KeyQuotaPeriod.objects.filter(period_start=quota.period_start(), api_key__in=keys)
    used = dict(this_month.values_list("api_key_id", "used"))
    for key in keys:
        key.used_this_month = used.get(key.pk, 0)
    return keys


def _set_data_retention(request):
    require_admin(request, "change data retention")
    chosen = request.POST.get("data_retention", "")
    if chosen not in Organization.Retention.values:
        messages.error(request, "Choose standard, optional or zero retention.")
    else:
        actions.set_data_retention(request.principal.organization, chosen, request.user)
        messages.info(request, f"Data retention: {Organization.Retention(chosen).label}, for requests from now on.")
    return redirect("dashboard:keys")


def _set_webhook_endpoint(request):
    require_admin(request, "set the webhook endpoint")
    org = request.principal.organization
    incoming = WebhookEndpointSerializer(data={"url": request.POST.get("url", "")})
    if not incoming.is_valid():
        messages.error(request, f"Webhook endpoint not saved: {incoming.errors['url'][0]}")
    else:
        url = incoming.validated_data["url"]
        actions.set_webhook_endpoint(org, url, request.user)
        messages.info(request, "Webhook endpoint saved." if url else "Webhook endpoint removed: no events are sent.")
    return redirect("dashboard:keys")


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


SETTINGS = {
    ROTATE_WEBHOOK_SECRET: _rotate_webhook_secret,
    WEBHOOK_ENDPOINT: _set_webhook_endpoint,
    DATA_RETENTION: _set_data_retention,
}


def managed_key(request, prefix: str) -> ApiKey:
    """A key this member may change: any of the organization's for owners and admins, else their own."""
    require_active(request)
    keys = scoped(ApiKey, request.principal.organization).filter(prefix=prefix, revoked_at__isnull=True)
    key = keys.first() if request.principal.is_admin else keys.filter(owner=request.user).first()
    if key is None:
        raise Http404
    return key


@require_POST
@member_required
def revoke_key(request, prefix: str):
    key = managed_key(request, prefix)
    actions.revoke_key(key, request.principal)
    messages.info(request, f"Key {key.name} ({key.prefix}) revoked: it is refused from now on.")
    return redirect("dashboard:keys")


@require_POST
@member_required
def change_key(request, prefix: str):
    """Rename a key, or rotate its secret (the new one shown once; the old one works for the grace chosen)."""
    key = managed_key(request, prefix)
    form = KeyChangeForm(request.POST)
    if not form.is_valid():
        raise Http404
    if request.POST.get("action") == "rotate":
        if not key.is_usable():
            messages.error(request, f"Key {key.name} has expired: make a new one.")
            return redirect("dashboard:keys")
        grace = timedelta(seconds=int(form.cleaned_data["grace"] or 0))
        raw = actions.rotate_key(key, request.principal, grace)
        request.session[NEW_KEY] = {"raw": raw, "name": key.name, "kind": key.kind, "rotated": True}
        until = f"until {key.previous_valid_until:%Y-%m-%d %H:%M} UTC" if key.previous_valid_until else "no more"
        messages.info(request, f"Key {key.name} has a new secret; the old one works {until}.")
        return redirect("dashboard:keys")
    name = form.cleaned_data["name"].strip()
    if not name or name_taken(key.organization, name, renamed=key):
        messages.error(
            request, f"Not renamed: {'a key named “' + name + '” exists already' if name else 'give a name'}."
        )
    else:
        actions.update_key(key, request.principal, {"name": name})
        messages.info(request, f"Key {key.prefix} is now named {name}.")
    return redirect("dashboard:keys")
