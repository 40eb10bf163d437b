"""The Voices page's form: a voice as `voices.actions` makes it, from what the model picked can
make (a speaker from a seed or an embedding, a recording, a description, a mix of built-in voices)."""

from __future__ import annotations

import re

from django import forms
from django.conf import settings

from inference.spec import EngineSpec
from tts_saas.errors import ApiError
from voices.actions import MAX_MIX
from voices.recordings import CONSENT_STATEMENT

from . import engines
from .forms import add_api_error, plain

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
