"""The dashboard's forms: sign-up, API keys, invitations and accepting one, voices and lexicons.
The voice and lexicon forms only carry what is posted: the API's functions validate it."""

from __future__ import annotations

import re

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.utils.html import format_html

from accounts.models import Membership
from billing import offer
from tts_saas.errors import ApiError


class PasswordField(forms.CharField):
    """A new password, held to Django's password validators."""

    widget = forms.PasswordInput(attrs={"autocomplete": "new-password"})  # password managers offer to make one

    def __init__(self, **kwargs):
        super().__init__(min_length=10, **kwargs)

    def validate(self, value):
        super().validate(value)
        validate_password(value)


class OrganizationForm(forms.Form):
    organization = forms.CharField(
        max_length=200, label="Organization name", widget=forms.TextInput(attrs={"autocomplete": "organization"})
    )


class SignupForm(OrganizationForm):
    email = forms.EmailField(label="E-mail", widget=forms.EmailInput(attrs={"autocomplete": "email"}))
    password = PasswordField()
    field_order = ["email", "password", "organization"]

    def clean_email(self):
        email = self.cleaned_data["email"].lower()
        if get_user_model().objects.filter(username__iexact=email).exists():
            raise forms.ValidationError("An account with this e-mail exists already: log in instead.")
        return email


class InviteForm(forms.Form):
    email = forms.EmailField(
        label="E-mail", widget=forms.EmailInput(attrs={"autocomplete": "off"})
    )  # someone else's address
    role = forms.ChoiceField(
        choices=[(Membership.Role.MEMBER, "member"), (Membership.Role.ADMIN, "admin")], initial=Membership.Role.MEMBER
    )


class AcceptForm(forms.Form):
    password = PasswordField()


# The API's validation messages in the words of a form: on the field, without the field's name in
# front ("name: This field may not be blank."), nor the API's own jargon.
PLAIN = {
    ("name", "This field may not be blank."): "Give it a name.",
    ("mix_voice", "This field may not be blank."): "Pick a voice for this weight, or clear the weight.",
    ("speaker", "speaker is not a ChatTTS speaker embedding string"): (
        "That is not a speaker embedding: paste the whole string (about 850 characters) that "
        "ChatTTS's Chat.sample_random_speaker() returns."
    ),
    ("audio", "No file was submitted."): "Choose a recording to upload.",
    ("consent", "a voice from a recording needs your statement"): "Tick the statement: a voice is copied only with "
    "its speaker's consent.",
    ("", "This field may not be blank."): "Fill this in.",
    ("", "This field is required."): "Fill this in.",
    ("", "A valid integer is required."): "Enter a whole number.",
}


def plain(field: str, message: str) -> str:
    message = re.sub(r"^[\w.\[\]]+: ", "", message)  # "name: …", "mix[1].weight: …"
    kind = re.sub(r"_\d+$", "", field)
    for (about, said), instead in PLAIN.items():
        if about in ("", kind) and message.startswith(said):
            return instead
    return message[:1].upper() + message[1:]


def add_api_error(form: forms.Form, exc: ApiError) -> None:
    """The API's message, said plainly, on the field it names (else on the form)."""
    field = exc.param if exc.param in form.fields else None
    form.add_error(field, plain(field or "", exc.message))


CASE_MARK = "(case)"  # ends an entry's line: the entry is case-sensitive
# What follows ` = ` on an entry's line: an alias, phonemes between slashes, or an alias then phonemes.
READING = re.compile(r"(?:(?P<alias>.*?)\s+)?/(?P<phonemes>[^/]*)/|(?P<only>.*)", re.DOTALL)


def entry_lines(entries: list[dict]) -> str:
    """A lexicon's entries as the lexicon form shows them, one a line: `text = alias`,
    `text = /phonemes/` or `text = alias /phonemes/`, then ` (case)` for a case-sensitive entry."""
    lines = []
    for e in entries:
        phonemes = e.get("phonemes", "")
        reading = " ".join(part for part in (e.get("alias", ""), f"/{phonemes}/" if phonemes else "") if part)
        lines.append(f"{e['text']} = {reading}" + (f" {CASE_MARK}" if e.get("case_sensitive") else ""))
    return "\n".join(lines)


class LexiconForm(forms.Form):
    """A lexicon as `voices.lexicons.save_lexicon` takes it; only the line format of the entries
    is checked here (`entry_lines`), `entries[N]` in the API's messages becomes a line."""

    name = forms.CharField(required=False)
    is_default = forms.BooleanField(required=False, label="Default: applies to every request")
    entries = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 12, "spellcheck": "false"}),
    )

    lines: list[int]  # the line of each entry, once cleaned

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        specs = offer.served()
        reading = ", ".join(s.title for s in specs if s.features.phoneme_lexicons) or "none served here"
        others = ", ".join(s.title for s in specs if not s.features.phoneme_lexicons) or "none served here"
        self.fields["entries"].help_text = format_html(
            "One a line, <code>text = alias</code>, e.g. <code>SQL = sequel</code>. Phonemes may replace the alias "
            "or follow it, between slashes: <code>Kokoro = /kˈOkəɹO/</code>, <code>SQL = sequel /sˈikwəl/</code>. "
            "Models that read phonemes ({}) use them, in misaki's notation; the others ({}) read the alias, and "
            "leave a word that has phonemes only as it is. End a line with <code>(case)</code> to match that case "
            "only (<code>NASA = nasa (case)</code>); otherwise any case matches. Entries match whole words, the "
            "longest first; blank lines are skipped.",
            reading,
            others,
        )

    def clean_entries(self) -> list[dict]:
        entries, self.lines = [], []
        for number, line in enumerate(self.cleaned_data["entries"].splitlines(), 1):
            line = line.strip()
            if not line:
                continue
            case_sensitive = line.endswith(CASE_MARK)
            if case_sensitive:
                line = line.removesuffix(CASE_MARK).rstrip()
            text, found, reading = line.partition(" = " if " = " in line else "=")
            if not found:
                raise forms.ValidationError(f"Line {number}: write an entry as text = alias, or text = /phonemes/.")
            parts = READING.fullmatch(reading.strip())
            assert parts is not None  # the last alternative matches anything
            alias, phonemes = (
                (parts["alias"] or "", parts["phonemes"]) if parts["only"] is None else (parts["only"], "")
            )
            entry = {
                "text": text.strip(),
                "alias": alias.strip(),
                "phonemes": phonemes.strip(),
                "case_sensitive": case_sensitive,
            }
            entries.append(entry)
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
        if message.startswith("line "):
            message = f"L{message[1:]}"
        else:
            message = plain(field, message)
        self.add_error(field if field in self.fields else None, message)
