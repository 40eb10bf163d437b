"""The API keys pages' forms: a new key (access preset, owner, allowlist, limits, expiry); a key's
page: what PATCH /v1/keys/{id} changes (name, scopes as a preset or any combination, allowlist,
limits), offering no more than the viewer may give, and a rotation's grace."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta

from django import forms
from django.utils import timezone

from accounts import scopes
from accounts.models import ApiKey
from accounts.network import parse_networks
from accounts.validation import KEY_CAP, KEY_RATE


def name_taken(organization, name: str, renamed: ApiKey | None = None) -> bool:
    """Another active key of the organization has this name (in any case)."""
    active = ApiKey.objects.filter(organization=organization, revoked_at__isnull=True, name__iexact=name)
    return active.exclude(pk=renamed.pk).exists() if renamed is not None else active.exists()


class KeyForm(forms.Form):
    EXPIRY = [("never", "Never"), ("30", "In 30 days"), ("90", "In 90 days"), ("date", "On a date")]

    ACCESS = [("standard", "Standard"), ("speech", "Speech only"), ("read_only", "Read-only"), ("admin", "Admin")]
    # Shown folded under "Limits and allowed networks" (also on the key's page, any time later).
    MORE = ("allowed_ips", "monthly_character_cap", "requests_per_minute")

    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(
        choices=ACCESS,
        initial="standard",
        label="Access",
        help_text="standard: speech, jobs, voices, lexicons, usage; admin: management too; "
        "any combination on the key's page",
    )
    owner = forms.ChoiceField(
        choices=[("me", "Mine"), ("service", "Service key")],
        initial="me",
        required=False,
        label="Owner",
        help_text="mine: revoked if I leave the organization; a service key is the organization's",
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

    def more_open(self) -> bool:
        """The folded fields are shown: one of them was filled in or is wrong."""
        return self.is_bound and any(self.data.get(name) or name in self.errors for name in self.MORE)

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


ACCESS_NAMES = {"admin": "admin", "standard": "standard", "speech": "speech only", "read_only": "read-only"}
LEVELS = [("", "none"), ("read", "read"), ("write", "read and write")]


def access_of(key: ApiKey) -> str:
    """The key's scopes in a word: its preset's name, or "custom" for any other combination."""
    return ACCESS_NAMES.get(scopes.preset_of(key.scopes if isinstance(key.scopes, list) else []), "custom")


class KeySettingsForm(forms.Form):
    """What PATCH /v1/keys/{id} changes. Presets and levels beyond the viewer's own rights are not
    offered (the key's own are kept on show); `accounts.grants.check` decides when it is saved."""

    name = forms.CharField(max_length=200)
    access = forms.ChoiceField(label="Access")
    allowed_ips = forms.CharField(
        required=False,
        label="Allowed networks",
        help_text="addresses or CIDR networks, comma-separated; empty: any (within the organization's list)",
        widget=forms.TextInput(attrs={"placeholder": "203.0.113.0/24, 2001:db8::/32"}),
    )
    monthly_character_cap = forms.IntegerField(
        required=False,
        min_value=KEY_CAP[0],
        max_value=KEY_CAP[1],
        label="Monthly characters",
        help_text="empty: no cap",
    )
    requests_per_minute = forms.IntegerField(
        required=False, min_value=KEY_RATE[0], max_value=KEY_RATE[1], label="Requests a minute", help_text="empty: none"
    )

    def __init__(self, *args, key: ApiKey, viewer: frozenset[str], **kwargs):
        stored = frozenset(key.scopes if isinstance(key.scopes, list) else [])
        preset = scopes.preset_of(stored)
        level = {s.partition(":")[0]: s.partition(":")[2] for s in stored}
        level.update({area: "read" for area in scopes.READ_ONLY if area in level})  # a key from before: `usage:write`
        initial = {
            "name": key.name,
            "access": preset if preset in scopes.PRESETS else "custom",
            "allowed_ips": ", ".join(map(str, key.allowed_ips or [])),
            "monthly_character_cap": key.monthly_character_cap,
            "requests_per_minute": key.requests_per_minute,
            **{f"scope_{area}": level.get(area, "") for area in scopes.AREAS},
        }
        super().__init__(*args, initial=initial, **kwargs)
        self.key, self.viewer = key, viewer
        givable = [p for p, named in scopes.PRESETS.items() if all(scopes.allows(viewer, s) for s in named)]
        self.fields["access"].choices = [
            (p, f"{ACCESS_NAMES[p].capitalize()}: {', '.join(sorted(scopes.PRESETS[p]))}")
            for p in scopes.PRESETS
            if p in givable or p == preset
        ] + [("custom", "Custom: the scopes chosen below")]
        for area, words in scopes.AREAS.items():
            offered = [
                (value, label)
                for value, label in LEVELS
                if not (value == "write" and area in scopes.READ_ONLY)  # it only reads: no write to give
                and (not value or scopes.allows(viewer, f"{area}:{value}") or level.get(area) == value)
            ]
            field = forms.ChoiceField(choices=offered, required=False, label=area, help_text=words)
            self.fields[f"scope_{area}"] = field

    def scope_fields(self):
        return [self[f"scope_{area}"] for area in scopes.AREAS]

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        if name_taken(self.key.organization, name, renamed=self.key):
            raise forms.ValidationError(f"A key named “{name}” exists already: choose another name.")
        return name

    def clean_allowed_ips(self):
        return networks_field(self.cleaned_data["allowed_ips"])

    def clean(self):
        data = super().clean()
        access = data.get("access")
        if access in scopes.PRESETS and "access" not in self.changed_data:
            data["scopes"] = list(self.key.scopes)  # left as it is (never narrowed by saving a name)
        elif access in scopes.PRESETS:  # a preset as far as the viewer's rights go, as a new key gets it
            data["scopes"] = scopes.bounded(scopes.PRESETS[access], self.viewer)
        elif access == "custom":
            chosen = {f"{area}:{data[f'scope_{area}']}" for area in scopes.AREAS if data.get(f"scope_{area}")}
            if not chosen:
                self.add_error("access", "Choose at least one scope below, or a preset.")
            data["scopes"] = scopes.normalized(chosen)
        return data

    def changes(self) -> dict:
        """The fields that differ from the key's, as PATCH /v1/keys/{id} would send them."""
        data, key = self.cleaned_data, self.key
        now = {
            "name": key.name,
            "scopes": frozenset(key.scopes if isinstance(key.scopes, list) else []),
            "allowed_ips": list(key.allowed_ips or []),
            "monthly_character_cap": key.monthly_character_cap,
            "requests_per_minute": key.requests_per_minute,
        }
        wanted = {**{field: data.get(field) for field in now}, "scopes": frozenset(data.get("scopes", ()))}
        return {field: value for field, value in wanted.items() if value != now[field]}
