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
from billing.admin import OrganizationBillingAdmin, PlanAdmin
from billing.models import Plan
from synthesis.api.defaults import check
from synthesis.audio.formats import FORMATS, G711_CONTENT_TYPES
from tts_saas.errors import ApiError

CODECS = (*FORMATS, *G711_CONTENT_TYPES)  # what a plan's allowed_formats name (a format's codec)


class OrganizationForm(forms.ModelForm):
    """The organization's page (its fields are the admin's: accounts.admin)."""

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
