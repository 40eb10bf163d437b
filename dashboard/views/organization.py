"""The organization's own settings: its name, how long job audio is kept, leaving it, and closing
it (its owner, confirmed by typing its name, saying what happens to data and billing)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect

from accounts import account
from synthesis.service.closing import ClosingRefused, close_organization

from ..access import SESSION_ORG, member_required, page, require_admin

RENAME, LEAVE, CLOSE = "rename", "leave", "close"


class RenameForm(forms.Form):
    name = forms.CharField(max_length=200, label="Name")


@member_required
def organization(request):
    membership = request.membership
    org = membership.organization
    posted = request.POST.get("action") if request.method == "POST" else None
    rename = RenameForm(request.POST if posted == RENAME else None, initial={"name": org.name})
    if posted == RENAME:
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
        job_retention_hours=settings.TTS_JOB_RETENTION_HOURS,
    )
