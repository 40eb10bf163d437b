"""The admin console's pages for tenants, their members, keys, invitations and audit log.

What staff type is checked as the API checks it: by the models (`accounts.validation`, run by the
admin's `full_clean`) and, for what needs the upper layers, by `dashboard.admin`, which adds its
checks to the organization's page. Secrets are never shown: not the webhook signing secret (rotated
by an action), not a key's hash, not an invitation's link. Staff's actions are recorded in the
tenant's audit log, as staff: by the action itself, or by the console's change log
(`audit._staff_acted`)."""

from __future__ import annotations

from django import forms
from django.contrib import admin
from django.contrib.admin import helpers
from django.template.response import TemplateResponse
from django.utils import timezone

from . import actions, audit
from .models import WEBHOOK_SECRET_GRACE, ApiKey, AuditEvent, Invitation, Membership, Organization

GRACE_HOURS = int(WEBHOOK_SECRET_GRACE.total_seconds() // 3600)


class SuspendForm(forms.Form):
    reason = forms.CharField(
        max_length=400,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Shown to the tenant word for word: in every API error and on every dashboard page, with your "
        "contact (TTS_OPERATOR_CONTACT). Say what happened and what lifts it, e.g. "
        "“abuse reports about generated audio; write to abuse@example.com”.",
    )


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "suspended_at", "created_at")
    list_filter = ("suspended_at",)
    search_fields = ("name", "slug")
    exclude = ("webhook_secret", "previous_webhook_secret", "webhook_url")  # endpoints: the dashboard's Webhooks page
    # Voice aliases are checked where they are set (the organization's Settings, its API), not here.
    readonly_fields = ("webhook_signing_secret", "webhook_secret_rotated_at", "voice_aliases", "created_at")
    actions = ["suspend", "unsuspend", "rotate_webhook_secret"]

    def has_delete_permission(self, request, obj=None) -> bool:
        # Django's delete (the page and "Delete selected") would cascade past what closing keeps (the
        # ledger, the audit log) and skip what it does (revoking keys, deleting stored audio). An
        # organization is closed by its owner (Organization page) or `manage.py close_org SLUG`.
        return False

    @admin.display(description="webhook signing secret")
    def webhook_signing_secret(self, org: Organization) -> str:
        until = org.previous_webhook_secret_valid_until()
        previous = f"; the previous one signs too until {until:%Y-%m-%d %H:%M} UTC" if until else ""
        return f"set, not shown (the action “Rotate the webhook signing secret” replaces it){previous}"

    @admin.action(description="Suspend (asks for the reason: every API call answers 403 with it)")
    def suspend(self, request, queryset):
        """A confirmation page first, with the reason the tenant is told (the API's 403, the
        dashboard's banner); the suspension is recorded with it in the tenant's audit log."""
        form = SuspendForm(request.POST if "apply" in request.POST else None)
        orgs = list(queryset.filter(suspended_at__isnull=True))
        if form.is_valid():
            reason = form.cleaned_data["reason"].strip().rstrip(".")
            for org in orgs:
                Organization.objects.filter(pk=org.pk).update(suspended_at=timezone.now(), suspension_reason=reason)
                audit.record(
                    org,
                    "staff.suspended",
                    request.user,
                    staff=True,
                    target=f"organization:{org.slug}",
                    after={"suspension_reason": reason},
                )
            self.message_user(request, f"{len(orgs)} organization(s) suspended: {reason}.")
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Suspend organizations",
            "opts": self.opts,
            "form": form,
            "orgs": orgs,
            "already": queryset.count() - len(orgs),
            "checkbox": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/accounts/organization/suspend.html", context)

    @admin.action(description="Unsuspend")
    def unsuspend(self, request, queryset):
        orgs = list(queryset.filter(suspended_at__isnull=False))
        for org in orgs:
            Organization.objects.filter(pk=org.pk).update(suspended_at=None, suspension_reason="")
            audit.record(org, "staff.unsuspended", request.user, staff=True, target=f"organization:{org.slug}")
        self.message_user(request, f"{len(orgs)} organization(s) unsuspended.")

    @admin.action(description=f"Rotate the webhook signing secret (the old one signs {GRACE_HOURS} hours more)")
    def rotate_webhook_secret(self, request, queryset):
        orgs = list(queryset)
        for org in orgs:
            actions.rotate_webhook_secret(org, request.user, staff=True)  # recorded as staff's
        self.message_user(request, f"Webhook signing secret rotated for {len(orgs)} organization(s).")


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ("email", "organization", "role", "created_at", "accepted_at")
    exclude = ("token",)  # the link lets anyone join: only the invited address gets it


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "organization", "role", "created_at")
    list_filter = ("role",)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """A key's name, scopes, allowlist, limits and expiry can be changed; what identifies it, its
    hashes and its history cannot. Keys are made by their organization (the API, the dashboard):
    a key made here would have a secret nobody was ever shown."""

    list_display = ("name", "prefix", "kind", "organization", "created_at", "last_used_at", "revoked_at")
    exclude = ("hashed_key", "previous_hashed_key")
    readonly_fields = (
        "organization",
        "prefix",
        "kind",
        "owner",
        "created_by",
        "created_at",
        "last_used_at",
        "previous_valid_until",
        "revoked_at",
    )
    search_fields = ("prefix", "name", "organization__name")
    list_filter = ("kind",)
    actions = ["revoke"]

    def has_add_permission(self, request) -> bool:
        return False

    @admin.action(description="Revoke (refused at once)")
    def revoke(self, request, queryset):
        keys = list(queryset.filter(revoked_at__isnull=True).select_related("organization"))
        for key in keys:
            key.revoke()
            audit.record(key.organization, "key.revoked", request.user, staff=True, target=f"key:{key.prefix}")
        self.message_user(request, f"{len(keys)} key(s) revoked.")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records nobody edits here: the audit log, the ledger, Stripe's events, meter reports."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "organization", "action", "actor_type", "actor_label", "ip", "target")
    list_filter = ("action", "actor_type")
    search_fields = ("organization__name", "actor_label", "target")
