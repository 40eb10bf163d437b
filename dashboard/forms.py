"""The dashboard's forms: sign-up, API keys, invitations and accepting one, voices and lexicons.
The voice and lexicon forms only carry what is posted: the API's functions validate it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, time, timedelta

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.utils import timezone
from django.utils.safestring import mark_safe

from accounts.models import ApiKey, Membership
from tts_saas.errors import ApiError


class PasswordField(forms.CharField):
    """A new password, held to Django's password validators."""

    widget = forms.PasswordInput(attrs={"autocomplete": "new-password"})  # password managers offer to make one

    def __init__(self, **kwargs):
        super().__init__(min_length=10, **kwargs)

    def validate(self, value):
        super().validate(value)
        validate_password(value)


class SignupForm(forms.Form):
    email = forms.EmailField(widget=forms.EmailInput(attrs={"autocomplete": "email"}))
    password = PasswordField()
    organization = forms.CharField(
        max_length=200, label="Organization name", widget=forms.TextInput(attrs={"autocomplete": "organization"})
    )

    def clean_email(self):
        email = self.cleaned_data["email"].lower()
        if get_user_model().objects.filter(username__iexact=email).exists():
            raise forms.ValidationError("An account with this e-mail exists already: log in instead.")
        return email


class KeyForm(forms.Form):
    EXPIRY = [("never", "Never"), ("30", "In 30 days"), ("90", "In 90 days"), ("date", "On a date")]

    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=ApiKey.Kind.choices, initial=ApiKey.Kind.STANDARD)
    expires = forms.ChoiceField(choices=EXPIRY, initial="never", label="Expires")
    expires_on = forms.DateField(
        required=False,
        label="Expiry date",
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="with “On a date”",
    )

    def __init__(self, *args, organization=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.organization = organization

    def clean_name(self):
        name = self.cleaned_data["name"].strip()
        active = ApiKey.objects.filter(organization=self.organization, revoked_at__isnull=True, name__iexact=name)
        if self.organization is not None and active.exists():
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


class InviteForm(forms.Form):
    email = forms.EmailField(widget=forms.EmailInput(attrs={"autocomplete": "off"}))  # someone else's address
    role = forms.ChoiceField(
        choices=[(Membership.Role.MEMBER, "member"), (Membership.Role.ADMIN, "admin")], initial=Membership.Role.MEMBER
    )


class AcceptForm(forms.Form):
    password = PasswordField()


def add_api_error(form: forms.Form, exc: ApiError) -> None:
    """The API's message on the field it names (else on the form)."""
    form.add_error(exc.param if exc.param in form.fields else None, exc.message)


class VoiceForm(forms.Form):
    """A voice as `synthesis.custom_voices.create_voice` takes it: a seed or an embedding string."""

    name = forms.CharField(required=False)
    description = forms.CharField(required=False)
    source = forms.ChoiceField(
        choices=[("seed", "From a seed"), ("embedding", "From a speaker embedding string")],
        widget=forms.RadioSelect,
        initial="seed",
    )
    seed = forms.CharField(
        required=False,
        widget=forms.NumberInput(attrs={"min": 0}),
        help_text="A speaker sampled with this seed, as the built-in voices are.",
    )
    speaker = forms.CharField(
        required=False,
        label="Speaker embedding",
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="What ChatTTS's Chat.sample_random_speaker() returns (about 850 characters).",
    )

    def body(self) -> dict:
        data = self.cleaned_data
        body = {"name": data["name"], "description": data["description"]}
        if data["source"] == "embedding":
            body["speaker"] = data["speaker"]
        else:
            body["seed"] = data["seed"]
        return body


CASE_MARK = "(case)"  # ends an entry's line: the entry is case-sensitive


def entry_lines(entries: list[dict]) -> str:
    """A lexicon's entries as the lexicon form shows them, one a line: `text = alias`, then
    ` (case)` for a case-sensitive entry."""
    return "\n".join(
        f"{e['text']} = {e['alias']}" + (f" {CASE_MARK}" if e.get("case_sensitive") else "") for e in entries
    )


class LexiconForm(forms.Form):
    """A lexicon as `synthesis.lexicons.save_lexicon` takes it; only the line format of the
    entries is checked here (`entry_lines`), `entries[N]` in the API's messages becomes a line."""

    name = forms.CharField(required=False)
    is_default = forms.BooleanField(required=False, label="Default: applies to every request")
    entries = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
        help_text=mark_safe(  # a constant of ours
            "One a line, <code>text = alias</code>, e.g. <code>SQL = sequel</code>. End a line with "
            "<code>(case)</code> to match that case only (<code>NASA = nasa (case)</code>); otherwise any case "
            "matches. Entries match whole words, the longest first; blank lines are skipped."
        ),
    )

    lines: list[int]  # the line of each entry, once cleaned

    def clean_entries(self) -> list[dict]:
        entries, self.lines = [], []
        for number, line in enumerate(self.cleaned_data["entries"].splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            case_sensitive = line.endswith(CASE_MARK)
            if case_sensitive:
                line = line.removesuffix(CASE_MARK).rstrip()
            text, found, alias = line.partition(" = " if " = " in line else "=")
            if not found:
                raise forms.ValidationError(f"Line {number}: write an entry as text = alias.")
            entries.append({"text": text.strip(), "alias": alias.strip(), "case_sensitive": case_sensitive})
            self.lines.append(number)
        return entries

    def body(self) -> dict:
        return {name: self.cleaned_data[name] for name in ("name", "is_default", "entries")}

    def add_api_error(self, exc: ApiError) -> None:
        """The API's message on the field it is about, `entries[2].alias: …` as `Line 3 (alias): …`."""

        def line(match: re.Match) -> str:
            index = int(match.group(1))
            number = f"line {self.lines[index]}" if index < len(self.lines) else match.group(0)
            return f"{number} ({match.group(2)})" if match.group(2) else number

        message = re.sub(r"entries\[(\d+)\](?:\.(\w+))?", line, re.sub(r"^entries: (?=entries\[)", "", exc.message))
        field = (exc.param or "").split("[")[0]
        message = f"L{message[1:]}" if message.startswith("line ") else message
        self.add_error(field if field in self.fields else None, message)
