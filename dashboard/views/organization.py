"""The organization's own settings: its name, its default model and voice, its voice aliases, how
long job audio is kept and its data retention, the IP allowlist of its API calls, leaving it, and
closing it (its owner, confirmed by typing its name, saying what happens to data and billing)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect

from accounts import account
from accounts.keys import set_data_retention, set_ip_allowlist, set_speech_defaults, set_voice_aliases
from accounts.models import Organization
from synthesis.api import aliases as voice_aliases
from synthesis.api.defaults import check
from synthesis.service.closing import ClosingRefused, close_organization
from tts_saas.errors import ApiError

from ..access import SESSION_ORG, member_required, page, require_admin
from ..orgforms import AliasesForm, DefaultsForm, IpAllowlistForm, RenameForm

RENAME, LEAVE, CLOSE, DEFAULTS = "rename", "leave", "close", "defaults"
RETENTION, IP_ALLOWLIST, ALIASES = "data-retention", "ip-allowlist", "aliases"


@member_required
def organization(request):
    membership = request.membership
    org = membership.organization
    posted = request.POST.get("action") if request.method == "POST" else None
    rename = RenameForm(request.POST if posted == RENAME else None, initial={"name": org.name})
    defaults = DefaultsForm(
        request.POST if posted == DEFAULTS else None,
        org=org,
        initial={"model": org.default_model, "voice": org.default_voice},
    )
    aliases = AliasesForm(request.POST if posted == ALIASES else None, org=org)
    allowlist = IpAllowlistForm(
        request.POST if posted == IP_ALLOWLIST else None,
        initial={"allowed_ips": ", ".join(map(str, org.allowed_ips)) if isinstance(org.allowed_ips, list) else ""},
    )
    if posted == IP_ALLOWLIST:
        require_admin(request, "change the IP allowlist")
        if allowlist.is_valid():  # the dashboard is not restricted by it: no check of this browser's address
            set_ip_allowlist(org, allowlist.cleaned_data["allowed_ips"], None, request.user)
            messages.info(request, "IP allowlist saved: API calls from other addresses are refused from now on.")
            return redirect("dashboard:organization")
    elif posted == RETENTION:
        require_admin(request, "change data retention")
        chosen = request.POST.get("data_retention", "")
        if chosen not in Organization.Retention.values:
            messages.error(request, "Choose standard, optional or zero retention.")
        else:
            set_data_retention(org, chosen, request.user)
            messages.info(request, f"Data retention: {Organization.Retention(chosen).label}, for requests from now on.")
        return redirect("dashboard:organization")
    elif posted == DEFAULTS:
        require_admin(request, "change the default model and voice")
        if defaults.is_valid():
            try:
                model, voice = check(org, defaults.cleaned_data["model"], defaults.cleaned_data["voice"])
            except ApiError as exc:
                defaults.add_error("voice" if exc.param == "voice" else "model", exc.message.removeprefix("voice: "))
            else:
                set_speech_defaults(org, model, voice, request.user)
                messages.info(request, "Default model and voice saved: requests from now on use them.")
                return redirect("dashboard:organization")
    elif posted == ALIASES:
        require_admin(request, "change the voice aliases")
        if aliases.is_valid():
            try:
                chosen = voice_aliases.check(org, aliases.aliases())
            except ApiError as exc:
                name = exc.param.removeprefix("aliases.") if exc.param and exc.param.startswith("aliases.") else None
                aliases.add_error(name if name in aliases.names else None, exc.message.split(": ", 1)[-1])
            else:
                set_voice_aliases(org, chosen, request.user)
                messages.info(request, f"Voice aliases saved: {len(chosen)} of OpenAI's names speak your choices.")
                return redirect("dashboard:organization")
    elif posted == RENAME:
        require_admin(request, "rename the organization")
        if rename.is_valid():
            account.rename(org, rename.cleaned_data["name"].strip(), request.user)
            messages.info(request, f"The organization is now named {org.name}.")
            return redirect("dashboard:organization")
    elif posted == LEAVE:
        try:
            account.leave(membership)
        except account.LastOwner as exc:
            messages.error(request, str(exc))
            return redirect("dashboard:organization")
        request.session.pop(SESSION_ORG, None)
        messages.info(request, f"You left {org.name}.")
        return redirect("dashboard:overview")
    elif posted == CLOSE:
        if membership.role != membership.Role.OWNER:
            raise PermissionDenied("Only owners close the organization.")
        if request.POST.get("confirm_name", "").strip() != org.name:
            messages.error(request, f"Type the organization's name, {org.name}, to close it.")
            return redirect("dashboard:organization")
        try:
            close_organization(org, request.user)
        except ClosingRefused as exc:
            messages.error(request, str(exc))
            return redirect("dashboard:organization")
        request.session.pop(SESSION_ORG, None)
        messages.info(request, f"{org.name} is closed.")
        return redirect("dashboard:overview")
    return page(
        request,
        "organization.html",
        "organization",
        rename=rename,
        defaults=defaults,
        aliases=aliases,
        default_model=defaults.model_label(org.default_model),
        model_titles=defaults.model_titles(),
        allowlist=allowlist,
        retentions=Organization.Retention.choices,
        job_retention_hours=settings.TTS_JOB_RETENTION_HOURS,
        # Leaving is not offered to the only owner (it would only be refused after the confirmation).
        only_owner=membership.role == membership.Role.OWNER
        and not org.memberships.filter(role=membership.Role.OWNER).exclude(pk=membership.pk).exists(),
    )
