"""The admin console's checks that need the whole product, added to the pages `accounts.admin` and
`billing.admin` register (re-registered here, the layer that may import every app): an
organization's default model and voice are checked by `synthesis.api.defaults.check`, as `PUT
/v1/organization/speech_defaults` and the Settings page check them (webhook endpoints are the
tenant's, on the dashboard's Webhooks page); a plan's formats must be codecs synthesis encodes.
What accounts and billing can check themselves is in their models (`full_clean`, which the
console runs first); a value that passed neither is refused when a request reads it
(`synthesis.api.defaults`, `accounts.auth`), never a 500."""

from __future__ import annotations

from django import forms
from django.contrib import admin

from accounts.models import Organization
from billing import offer
from billing.admin import OrganizationBillingAdmin, PlanAdmin
from billing.models import Plan
from synthesis.api.defaults import check
from synthesis.audio.formats import FORMATS, G711_CONTENT_TYPES
from tts_saas.errors import ApiError

CODECS = (*FORMATS, *G711_CONTENT_TYPES)  # what a plan's allowed_formats name (a format's codec)


class ListField(forms.JSONField):
    """A JSON list typed as one entry a line (or comma-separated), shown the same way: the console
    showed the stored list's JSON (`[]`, `["10.0.0.0/8"]`). What each entry must be is the model's
    check (`full_clean`)."""

    widget = forms.Textarea(attrs={"rows": 3, "cols": 50})

    def prepare_value(self, value):
        if isinstance(value, str):  # typed and sent back with an error: as typed
            return value
        return "\n".join(map(str, value or ()))

    def to_python(self, value):
        if isinstance(value, list):
            return value
        text = str(value or "").strip()
        if text.startswith("["):  # a JSON list, as the console once showed it
            return super().to_python(text)
        return [part.strip() for part in text.replace(",", "\n").splitlines() if part.strip()]

    def bound_data(self, data, initial):
        return data

    def has_changed(self, initial, data):
        return self.to_python(data) != (initial or [])


class OrganizationForm(forms.ModelForm):
    """The organization's page (its fields are the admin's: accounts.admin): the networks and origins
    one a line, the default model picked from the models served."""

    allowed_ips = ListField(
        required=False, help_text="CIDR networks, one a line (e.g. 203.0.113.0/24); none: any address."
    )
    browser_origins = ListField(
        required=False, help_text="https://host[:port], one a line; none: no site may call with client tokens."
    )
    default_model = forms.ChoiceField(required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "default_model" not in self.fields:  # the add page: read-only until the organization exists
            return
        served = [(spec.name, f"{spec.title} ({spec.name})") for spec in offer.served()]
        current = self.initial.get("default_model") or ""
        if current and current not in dict(served):  # stored, no longer served: shown, and refused on save
            served.append((current, f"{current} (not served here)"))
        self.fields["default_model"].choices = [("", "The deployment's default"), *served]

    def clean(self):
        data = super().clean()
        model, voice = data.get("default_model"), data.get("default_voice")
        if self.instance.pk is not None and model is not None and voice is not None:
            try:  # stored as the API stores them: the model's engine name, a voice with its model
                data["default_model"], data["default_voice"] = check(self.instance, model, voice)
            except ApiError as exc:
                self.add_error("default_voice" if exc.param == "voice" else "default_model", _words(exc))
        return data


def _words(exc: ApiError) -> str:
    return exc.message.removeprefix("voice: ")


class PlanForm(forms.ModelForm):
    """A plan's page (its fields are the admin's: billing.admin)."""

    def clean_allowed_formats(self):
        value = self.cleaned_data["allowed_formats"]
        unknown = [v for v in value if v not in CODECS] if isinstance(value, list) else []
        if unknown:
            raise forms.ValidationError(f"Not codecs: {', '.join(map(str, unknown))} (use {', '.join(CODECS)}).")
        return value


admin.site.unregister(Organization)
admin.site.unregister(Plan)


@admin.register(Organization)
class OrganizationConsoleAdmin(OrganizationBillingAdmin):
    form = OrganizationForm

    def get_readonly_fields(self, request, obj=None):
        # A new organization has no plan yet to check a default against: set them once it exists.
        later = ("default_model", "default_voice") if obj is None else ()
        return (*super().get_readonly_fields(request, obj), *later)


@admin.register(Plan)
class PlanConsoleAdmin(PlanAdmin):
    form = PlanForm
