"""The form of a webhook endpoint (the Webhooks page adds one, its own page changes it), checked
as the API checks it (synthesis.api.webhook_serializers): nothing is implemented twice."""

from __future__ import annotations

from django import forms

from synthesis.api.webhook_serializers import WebhookEndpointWriteSerializer
from synthesis.webhook_models import EVENT_TYPES
from tts_saas.errors import validation_error

EVENT_CHOICES = [(name, f"{name}: {meaning}") for name, meaning in EVENT_TYPES.items()]


class EndpointForm(forms.Form):
    url = forms.CharField(label="URL", max_length=2000, widget=forms.URLInput(attrs={"placeholder": "https://"}))
    description = forms.CharField(max_length=200, required=False)
    events = forms.MultipleChoiceField(
        choices=EVENT_CHOICES, widget=forms.CheckboxSelectMultiple, label="Events it receives"
    )
    enabled = forms.BooleanField(required=False, initial=True, label="Enabled (a disabled endpoint gets nothing)")

    def checked(self) -> dict | None:
        """The API's validation of what was typed (its refusals on the field they name), or None."""
        if not self.is_valid():
            return None
        incoming = WebhookEndpointWriteSerializer(data=self.cleaned_data)
        if not incoming.is_valid():
            error = validation_error(incoming.errors)
            self.add_error(error.param if error.param in self.fields else None, error.message)
            return None
        return dict(incoming.validated_data)
