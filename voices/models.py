"""An organization's speech assets, used by every engine: its own voices and its pronunciation
lexicons."""

from __future__ import annotations

import secrets

from django.db import models
from django.utils import timezone

from accounts.models import Organization


def new_voice_id() -> str:
    return f"voice_{secrets.token_hex(8)}"


class Voice(models.Model):
    """An organization's own voice, for one model: a ChatTTS speaker (from a seed, an embedding
    string or a reference recording), a Kokoro mix of built-in voices, or a VoxCPM2 clone of a
    recording (its encoded reference in `sample`)."""

    class Source(models.TextChoices):
        SEED = "seed"
        EMBEDDING = "embedding"
        RECORDING = "recording"
        MIX = "mix"
        DESIGN = "design"  # a VoxCPM2 voice design made fixed: a sample of it kept as its reference

    class Status(models.TextChoices):
        READY = "ready"
        PROCESSING = "processing"  # a recording waits for a worker to encode it
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=32, default=new_voice_id, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="voices")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=300, blank=True)
    model = models.CharField(max_length=32, default="chattts")  # the engine it is a voice of
    source = models.CharField(max_length=16, choices=Source.choices)
    seed = models.PositiveIntegerField(null=True, blank=True)
    speaker = models.TextField(blank=True)  # the embedding string (source "embedding")
    design = models.CharField(max_length=300, blank=True)  # source "design": the description it was made from
    # Source "recording": the engine's encoding of the reference audio (ChatTTS's `spk_smp`, VoxCPM2's
    # latent patches), its transcript as sent and as spelled out for the model (ChatTTS's `txt_smp`);
    # the upload itself only when the tenant asked.
    sample = models.TextField(blank=True)
    transcript = models.TextField(blank=True)
    sample_text = models.TextField(blank=True)
    upload = models.FileField(upload_to="voices/", blank=True)
    # A voice from a recording: the creator's statement that they may copy the speaker's voice, as
    # shown to them, who made it and when ({"statement", "by", "at"}); kept with the voice.
    consent = models.JSONField(default=dict, blank=True)
    mix = models.JSONField(default=list, blank=True)  # source "mix": [[built-in voice id, weight], ...]
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.READY)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "synthesis_voice"  # made when voices lived in the synthesis app
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="one_voice_per_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


def new_lexicon_id() -> str:
    return f"lex_{secrets.token_hex(8)}"


class Lexicon(models.Model):
    """Pronunciation entries (`voices.lexicon.Entry` as dicts: text, alias, phonemes, case_sensitive),
    applied to requests that name the lexicon, and to every request when `is_default`."""

    id = models.CharField(primary_key=True, max_length=32, default=new_lexicon_id, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="lexicons")
    name = models.CharField(max_length=100)
    entries = models.JSONField(default=list, blank=True)
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "synthesis_lexicon"  # made when lexicons lived in the synthesis app
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="one_lexicon_per_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"
