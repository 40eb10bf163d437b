"""The organization's own settings: its name, its default model and voice, how long job audio is
kept, leaving it, and closing it (its owner, confirmed by typing its name, saying what happens to
data and billing)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect

from accounts import account
from accounts.keys import set_speech_defaults
from billing import offer
from billing.limits import limits_for
from synthesis.api.defaults import check
from synthesis.service.closing import ClosingRefused, close_organization
from tts_saas.errors import ApiError
from voices.catalog import builtin_listing, own_voices
from voices.models import Voice

from ..access import SESSION_ORG, member_required, page, require_admin

RENAME, LEAVE, CLOSE, DEFAULTS = "rename", "leave", "close", "defaults"


class RenameForm(forms.Form):
    name = forms.CharField(max_length=200, label="Name")


class DefaultsForm(forms.Form):
    """The organization's default model and voice (`synthesis.api.defaults`): the models the plan
    allows, the voices of each (built in, and the organization's own that are ready)."""

    model = forms.ChoiceField(required=False, label="Default model")
    voice = forms.ChoiceField(required=False, label="Default voice")

    def __init__(self, *args, org, **kwargs):
        super().__init__(*args, **kwargs)
        limits = limits_for(org)
        specs = offer.allowed_specs(limits)
        deployment = offer.default_spec()
        self.fields["model"].choices = [("", f"The service's default ({deployment.title})")] + [
            (spec.name, spec.title) for spec in specs
        ]
        ready = own_voices(org).filter(status=Voice.Status.READY).only("id", "name", "model")
        self.fields["voice"].choices = [("", "alloy (OpenAI's default name)")] + [
            (
                spec.title,
                [(v["id"], v["name"]) for v in builtin_listing(spec, limits.allowed_voices)]
                + [(v.id, f"{v.name} (yours)") for v in ready if v.model == spec.name],
            )
            for spec in specs
        ]
        self.fields[
            "model"
        ].help_text = "What requests that name no model, or OpenAI's names (tts-1, gpt-4o-mini-tts), speak with."
        self.fields["voice"].help_text = "The voice of requests to the default model that name none; one of its voices."


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
    if posted == DEFAULTS:
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
        job_retention_hours=settings.TTS_JOB_RETENTION_HOURS,
    )
