"""API keys: the list (each key's name links to its page, `key_page`), create with a preset's
scopes and an IP allowlist (the secret shown once), rename, rotate, revoke."""

from __future__ import annotations

from datetime import timedelta

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts import actions, scopes
from accounts.models import ApiKey
from accounts.tenancy import scoped
from billing import quota
from billing.models import KeyQuotaPeriod
from synthesis.api.defaults import default_model

from ..access import member_required, page, require_active
from ..keyforms import KeyChangeForm, KeyForm, access_of, name_taken
from .docs import snippets

NEW_KEY = "new_api_key"  # the session's one-time copy of a key just created


@member_required
def keys(request):
    org = request.principal.organization
    admin = request.principal.is_admin
    form = KeyForm(request.POST if request.method == "POST" else None, organization=org, admin=admin)
    if request.method == "POST":
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
            request.session[NEW_KEY] = {"raw": raw, "name": key.name, "kind": access_of(key)}
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
        created=created,
        **new_key_examples(request),
        can_manage=request.principal.is_admin,
        can_create=request.principal.organization.suspended_at is None,
    )
    response["Cache-Control"] = "no-store"  # a new key's secret
    return response


def with_usage(keys) -> list[ApiKey]:
    """The keys, each with the characters it used this month (`used_this_month`) and its access in
    a word (`access`: its preset, or custom)."""
    keys = list(keys)
    this_month = KeyQuotaPeriod.objects.filter(period_start=quota.period_start(), api_key__in=keys)
    used = dict(this_month.values_list("api_key_id", "used"))
    for key in keys:
        key.used_this_month = used.get(key.pk, 0)
        key.access = access_of(key)
    return keys


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
            return redirect("dashboard:key", key.prefix)
        grace = timedelta(seconds=int(form.cleaned_data["grace"] or 0))
        raw = actions.rotate_key(key, request.principal, grace)
        request.session[NEW_KEY] = {"raw": raw, "name": key.name, "kind": access_of(key), "rotated": True}
        until = f"until {key.previous_valid_until:%Y-%m-%d %H:%M} UTC" if key.previous_valid_until else "no more"
        messages.info(request, f"Key {key.name} has a new secret; the old one works {until}.")
        return redirect("dashboard:key", key.prefix)
    name = form.cleaned_data["name"].strip()
    if not name or name_taken(key.organization, name, renamed=key):
        messages.error(
            request, f"Not renamed: {'a key named “' + name + '” exists already' if name else 'give a name'}."
        )
    else:
        actions.update_key(key, request.principal, {"name": name})
        messages.info(request, f"Key {key.prefix} is now named {name}.")
    return redirect("dashboard:key", key.prefix)


def new_key_examples(request) -> dict:
    """What a new key's panel shows beside its secret: the Docs page's curl and Python, the same
    ones (the panel's export line carries the key itself)."""
    base_url = request.build_absolute_uri("/v1").rstrip("/")
    shown = snippets(base_url, default_model(request.principal.organization))
    return {"base_url": base_url, "snippets": [x for x in shown if x.id in ("snippet-curl", "snippet-python")]}
