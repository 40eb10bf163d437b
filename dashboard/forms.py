"""The dashboard's forms: sign-up, API keys, invitations and accepting one."""

from __future__ import annotations

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.utils import timezone

from accounts.models import ApiKey, Membership


class PasswordField(forms.CharField):
    """A new password, held to Django's password validators."""

    widget = forms.PasswordInput

    def __init__(self, **kwargs):
        super().__init__(min_length=10, **kwargs)

    def validate(self, value):
        super().validate(value)
        validate_password(value)


class SignupForm(forms.Form):
    email = forms.EmailField()
    password = PasswordField()
    organization = forms.CharField(max_length=200, label="Organization name")

    def clean_email(self):
        email = self.cleaned_data["email"].lower()
        if get_user_model().objects.filter(username=email).exists():
            raise forms.ValidationError("An account with this e-mail exists already: log in instead.")
        return email


class KeyForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=ApiKey.Kind.choices, initial=ApiKey.Kind.STANDARD)
    expires_at = forms.DateTimeField(required=False, help_text="optional, e.g. 2027-01-31 23:59")

    def clean_expires_at(self):
        value = self.cleaned_data["expires_at"]
        if value is not None and value <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return value


class InviteForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(
        choices=[(Membership.Role.MEMBER, "member"), (Membership.Role.ADMIN, "admin")], initial=Membership.Role.MEMBER
    )


class AcceptForm(forms.Form):
    password = PasswordField()
