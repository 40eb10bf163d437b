"""The dashboard's forms: sign-up, API keys, invitations and accepting one, voices and lexicons.
The voice and lexicon forms only carry what is posted: the API's functions validate it."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.password_validation import validate_password
from django.utils.html import format_html

from accounts.models import Membership
from billing import offer
from inference.spec import EngineSpec
from tts_saas.errors import ApiError
from voices.actions import MAX_MIX
from voices.recordings import CONSENT_STATEMENT

from . import engines


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


UPLOAD_FORM_BYTES = 64 * 1024  # of a recording's request, room for the other fields and the multipart framing


class VoiceForm(forms.Form):
    """A voice as `voices.actions.create_voice` takes it: its model (one the plan allows), then
    what that model can make, as its spec says — a speaker from a seed or an embedding string, or
    a mix of built-in voices: rows of a voice and its weight, usable without JavaScript."""

    name = forms.CharField(required=False)
    description = forms.CharField(required=False)
    model = forms.ChoiceField(
        widget=forms.RadioSelect,
        error_messages={
            "invalid_choice": "%(value)s is not a model your plan includes here: pick one of those listed."
        },
    )
    source = forms.ChoiceField(
        required=False,
        choices=[
            ("seed", "From a seed"),
            ("embedding", "From a speaker embedding string"),
            ("recording", "From a recording of the speaker"),
            ("design", "From a description (a designed voice, kept as it first sounds)"),
        ],
        widget=forms.RadioSelect,
        initial="seed",
    )
    audio = forms.FileField(
        required=False,
        label="Recording",
        widget=forms.ClearableFileInput(attrs={"accept": "audio/*,.wav,.mp3,.flac,.ogg,.opus,.m4a,.webm"}),
        help_text="One person speaking clearly, without music or other voices (wav, mp3, flac, ogg, m4a or webm).",
    )
    transcript = forms.CharField(
        required=False,
        max_length=300,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Exactly what the recording says (ChatTTS needs it; VoxCPM2 clones closer with it).",
    )
    consent = forms.BooleanField(required=False, label=CONSENT_STATEMENT)
    design = forms.CharField(
        required=False,
        max_length=300,
        label="Description",
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Who speaks and how, e.g. “A warm, slow older man”. A sample is spoken once and kept, so the voice "
        "sounds the same in every request.",
    )
    keep_upload = forms.BooleanField(
        required=False, label="Keep the uploaded file with the voice (it is deleted with the voice)"
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

    rows: list[int]  # the mix rows sent, in order (the API's mix[i] is the row rows[i])

    def __init__(self, *args, specs: list[EngineSpec], default: str = "", allowed_voices: tuple = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.specs = {spec.name: spec for spec in specs}
        # A request's body is limited (TTS_MAX_BODY_BYTES): the page says so before sending a file over it.
        upload_limit = settings.TTS_MAX_BODY_BYTES - UPLOAD_FORM_BYTES
        self.fields["audio"].widget.attrs["data-max-bytes"] = upload_limit
        lengths = "; ".join(
            f"{spec.title}: {spec.recording_seconds[0]:g} to {spec.recording_seconds[1]:g} s"
            for spec in specs
            if spec.features.recording_voices
        )
        self.fields["audio"].help_text += f" {lengths}. At most {upload_limit / 1e6:.1f} MB."
        self.fields["model"].choices = [(spec.name, engines.label(spec)) for spec in specs]
        self.fields["model"].initial = default if default in self.specs else next(iter(self.specs), None)
        voices = [("", "—")] + [
            (spec.title, [(v.id, f"{v.id} — {v.description}") for v in spec.voices if _allowed(v.id, allowed_voices)])
            for spec in self.mixing()
        ]
        self.rows = []
        for row in range(MAX_MIX):
            self.fields[f"mix_voice_{row}"] = forms.ChoiceField(
                required=False, choices=voices, label=f"Voice {row + 1}"
            )
            self.fields[f"mix_weight_{row}"] = forms.FloatField(
                required=False,
                label=f"Weight {row + 1}",
                widget=forms.NumberInput(attrs={"min": 0, "step": "any", "placeholder": "1"}),
            )

    def mixing(self) -> list[EngineSpec]:
        """The models offered that make voices as mixes (`features.mixed_voices`)."""
        return [spec for spec in self.specs.values() if spec.features.mixed_voices]

    def speaking(self) -> list[EngineSpec]:
        """The models offered that make voices from a seed or an embedding (`features.speaker_voices`)."""
        return [spec for spec in self.specs.values() if spec.features.speaker_voices]

    def mix_rows(self):
        """The mix's (voice, weight) fields, row by row, for the template."""
        return [(self[f"mix_voice_{row}"], self[f"mix_weight_{row}"]) for row in range(MAX_MIX)]

    def designing(self) -> list[EngineSpec]:
        """The models offered that keep designed voices (they follow `instructions` and clone)."""
        return [s for s in self.specs.values() if s.features.instructions and s.features.recording_voices]

    def recording(self) -> bool:
        """Whether the voice is made from an uploaded recording (`voices.actions.create_voice_from_recording`):
        as the choice says, or always on a model that makes voices from nothing else."""
        spec = self.specs.get(self.cleaned_data.get("model", ""))
        only = spec is not None and spec.features.recording_voices and not spec.features.speaker_voices
        source = self.cleaned_data.get("source")
        return (source == "recording" or (only and source != "design")) and not self.rows_sent()

    def rows_sent(self) -> list[int]:
        data = self.cleaned_data
        return [row for row in range(MAX_MIX) if data[f"mix_voice_{row}"] or data[f"mix_weight_{row}"] is not None]

    def body(self) -> dict:
        data = self.cleaned_data
        spec = self.specs[data["model"]]
        body = {"name": data["name"], "description": data["description"], "model": spec.name}
        if self.recording():
            upload = {"audio": data["audio"]} if data["audio"] else {}  # else the API's "No file was submitted."
            fields = {"transcript": data["transcript"], "keep_upload": data["keep_upload"], "consent": data["consent"]}
            return {**body, **fields, **upload}
        if data["source"] == "design" and spec in self.designing():
            return {**body, "design": data["design"]}
        self.rows = self.rows_sent()
        if self.rows or (spec.features.mixed_voices and not spec.features.speaker_voices):
            # A blank weight is 1; the model refuses a mix if it makes none (and says what it makes).
            body["mix"] = [
                {"voice": data[f"mix_voice_{row}"], "weight": _or_one(data[f"mix_weight_{row}"])} for row in self.rows
            ]
        elif data["source"] == "embedding":
            body["speaker"] = data["speaker"]
        else:
            body["seed"] = data["seed"]
        return body

    def add_api_error(self, exc: ApiError) -> None:
        """The API's message on its field; `mix[1].weight: …` on the weight of the second row sent."""
        if not (exc.param or "").startswith("mix"):
            add_api_error(self, exc)
            return
        found = re.search(r"mix\[(\d+)\](?:\.(\w+))?", f"{exc.param} {exc.message}")
        index = int(found.group(1)) if found else 0
        row = self.rows[index] if index < len(self.rows) else (self.rows[0] if self.rows else 0)
        field = f"mix_weight_{row}" if found and found.group(2) == "weight" else f"mix_voice_{row}"
        self.add_error(field, plain(field, exc.message))


def _allowed(voice: str, allowed: tuple) -> bool:
    return not allowed or voice in allowed


def _or_one(weight: float | None) -> float:
    return 1.0 if weight is None else weight


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
