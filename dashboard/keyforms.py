"""The Keys page's forms: a new key (access preset, owner, allowlist, limits, expiry) and the
organization's IP allowlist."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta

from django import forms
from django.utils import timezone

from accounts.models import ApiKey
from accounts.network import parse_networks


def name_taken(organization, name: str, renamed: ApiKey | None = None) -> bool:
    """Another active key of the organization has this name (in any case)."""
    active = ApiKey.objects.filter(organization=organization, revoked_at__isnull=True, name__iexact=name)
    return active.exclude(pk=renamed.pk).exists() if renamed is not None else active.exists()


class KeyForm(forms.Form):
    EXPIRY = [("never", "Never"), ("30", "In 30 days"), ("90", "In 90 days"), ("date", "On a date")]

    ACCESS = [
        ("standard", "Standard: speech, jobs, voices, lexicons, usage"),
        ("speech", "Speech only"),
        ("read_only", "Read-only"),
        ("admin", "All, management too (admin)"),
    ]

    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=ACCESS, initial="standard", label="Access")
    owner = forms.ChoiceField(
        choices=[("me", "Mine: revoked if I leave the organization"), ("service", "Service key: the organization's")],
        initial="me",
        required=False,
        label="Owner",
    )
    allowed_ips = forms.CharField(
        required=False,
        label="Allowed IPs",
        help_text="addresses or CIDR networks, comma-separated; empty: any",
        widget=forms.TextInput(attrs={"placeholder": "203.0.113.0/24, 2001:db8::/32"}),
    )
    monthly_character_cap = forms.IntegerField(
        required=False, min_value=1, label="Monthly characters", help_text="a cap of its own; empty: none"
    )
    requests_per_minute = forms.IntegerField(
        required=False, min_value=1, label="Requests a minute", help_text="a limit of its own; empty: none"
    )
    expires = forms.ChoiceField(choices=EXPIRY, initial="never", label="Expires")
    expires_on = forms.DateField(
        required=False,
        label="Expiry date",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="with “On a date”",
    )

    def __init__(self, *args, organization=None, admin: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.organization = organization
        if not admin:  # a member's own key: no management scopes, and theirs
            self.fields["kind"].choices = [c for c in self.ACCESS if c[0] != "admin"]
            del self.fields["owner"]

    def clean_allowed_ips(self):
        return networks_field(self.cleaned_data["allowed_ips"])

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if self.organization is not None and name_taken(self.organization, name):
            raise forms.ValidationError(f"A key named “{name}” exists already: choose another name.")
        return name

    def clean(self):
        data = super().clean()
        choice, day = data.get("expires"), data.get("expires_on")
        if choice in ("30", "90"):
            data["expires_at"] = timezone.now() + timedelta(days=int(choice))
        elif choice == "date":
            if day is None:
                self.add_error("expires_on", "Choose the day the key stops working.")
            elif day <= timezone.now().date():
                self.add_error("expires_on", "The expiry must be in the future.")
            else:  # the end of that day, UTC
                data["expires_at"] = datetime.combine(day, time.max, tzinfo=UTC)
        else:
            data["expires_at"] = None
        return data


def networks_field(text: str) -> list[str]:
    """A form's comma- or space-separated networks, checked as the API checks them."""
    try:
        return parse_networks([part for part in re.split(r"[\s,]+", text) if part])
    except ValueError as exc:
        raise forms.ValidationError(str(exc)) from None


ROTATION_GRACE = [("0", "at once"), ("3600", "in 1 hour"), ("86400", "in 24 hours"), ("604800", "in 7 days")]


class KeyChangeForm(forms.Form):
    """A key renamed, or its secret rotated with the old one working for a grace period."""

    name = forms.CharField(max_length=200, required=False)
    grace = forms.ChoiceField(choices=ROTATION_GRACE, required=False, initial="86400", label="Old secret stops")


class IpAllowlistForm(forms.Form):
    allowed_ips = forms.CharField(
        required=False,
        label="Allowed IPs",
        widget=forms.Textarea(attrs={"rows": 2, "placeholder": "203.0.113.0/24, 2001:db8::/32"}),
        help_text="API calls (REST and WebSocket) from other addresses are refused; empty: any address",
    )

    def clean_allowed_ips(self):
        return networks_field(self.cleaned_data["allowed_ips"])
