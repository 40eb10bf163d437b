"""Job: one synthesis request, from acceptance to audio (or failure). Lexicon: an organization's
pronunciation entries."""

from __future__ import annotations

import secrets
import uuid

from django.db import models
from django.utils import timezone

from accounts.models import ApiKey, Organization


class Job(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"
        EXPIRED = "expired"  # no worker took it in time; never run

    FINAL = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED, Status.EXPIRED)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="jobs")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    request_id = models.CharField(max_length=128, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    model = models.CharField(max_length=64)
    model_version = models.CharField(max_length=64, blank=True)
    voice = models.CharField(max_length=64)
    response_format = models.CharField(max_length=16)  # audio.output_format names, e.g. "mp3_44100_128"
    input = models.TextField()
    segments = models.JSONField(default=list)  # what is spoken (lexicons applied), one entry per generation
    caption_texts = models.JSONField(default=list, blank=True)  # the segments as sent, where lexicons changed them
    params = models.JSONField(default=dict)  # inference.engine.SynthesisParams as a dict
    cacheable = models.BooleanField(default=False)  # deterministic: a seed was given
    interactive = models.BooleanField(default=True)  # someone listens live: stream, latency first
    progress = models.FloatField(default=0.0)  # share of segments done
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_hash = models.CharField(max_length=64, blank=True)  # of the body an idempotency key came with
    callback_url = models.URLField(max_length=2000, blank=True)
    callback_attempts = models.JSONField(default=list, blank=True)
    result = models.FileField(upload_to="jobs/", blank=True)
    cache_key = models.CharField(max_length=200, blank=True)  # set when the result was cached
    characters = models.PositiveIntegerField(default=0)  # billed characters, reserved at submission
    quota_period = models.DateField(null=True, blank=True)  # the month the reservation was taken in
    lease = models.CharField(max_length=128, blank=True)  # the concurrency slot it holds
    worker = models.CharField(max_length=255, blank=True)  # the worker process running it (workers.worker_name)
    attempts = models.PositiveSmallIntegerField(default=0)  # times a worker took it (a lost worker's job is retried)
    audio_seconds = models.FloatField(default=0.0)
    captions = models.JSONField(default=list, blank=True)  # captions.Caption dicts, one per segment, on success
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "-created_at"])]
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="one_job_per_idempotency_key",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.id} ({self.status})"

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL


def new_voice_id() -> str:
    return f"voice_{secrets.token_hex(8)}"


class Voice(models.Model):
    """An organization's own voice: a speaker from a seed, or a ChatTTS speaker embedding string."""

    class Source(models.TextChoices):
        SEED = "seed"
        EMBEDDING = "embedding"
        RECORDING = "recording"

    class Status(models.TextChoices):
        READY = "ready"
        PROCESSING = "processing"  # a recording waits for a worker to encode it
        FAILED = "failed"

    id = models.CharField(primary_key=True, max_length=32, default=new_voice_id, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="voices")
    name = models.CharField(max_length=64)
    description = models.CharField(max_length=300, blank=True)
    source = models.CharField(max_length=16, choices=Source.choices)
    seed = models.PositiveIntegerField(null=True, blank=True)
    speaker = models.TextField(blank=True)  # the embedding string (source "embedding")
    # Source "recording": ChatTTS's encoding of the reference audio (`spk_smp`), its transcript as sent
    # and as spelled out for the model (`txt_smp`); the upload itself only when the tenant asked.
    sample = models.TextField(blank=True)
    transcript = models.TextField(blank=True)
    sample_text = models.TextField(blank=True)
    upload = models.FileField(upload_to="voices/", blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.READY)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="one_voice_per_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


def new_lexicon_id() -> str:
    return f"lex_{secrets.token_hex(8)}"


class Lexicon(models.Model):
    """Pronunciation entries (`synthesis.lexicon.Entry` as dicts: text, alias, case_sensitive),
    applied to requests that name the lexicon, and to every request when `is_default`."""

    id = models.CharField(primary_key=True, max_length=32, default=new_lexicon_id, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="lexicons")
    name = models.CharField(max_length=100)
    entries = models.JSONField(default=list, blank=True)
    is_default = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="one_lexicon_per_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"
