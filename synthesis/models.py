"""Job: one synthesis request, from acceptance to audio (or failure)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from accounts.models import ApiKey, Organization

from .webhook_models import WebhookDelivery, WebhookEndpoint

__all__ = ["Job", "WebhookDelivery", "WebhookEndpoint"]


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
    # Without a key: the dashboard member who asked (the playground), for the ledger row it settles into.
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    request_id = models.CharField(max_length=128, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    model = models.CharField(max_length=64)
    model_version = models.CharField(max_length=64, blank=True)
    voice = models.CharField(max_length=64)
    response_format = models.CharField(max_length=16)  # audio.output_format names, e.g. "mp3_44100_128"
    input = models.TextField()
    segments = models.JSONField(default=list)  # what is spoken (lexicons applied), one entry per generation
    caption_texts = models.JSONField(default=list, blank=True)  # the segments as sent, where lexicons changed them
    continued = models.JSONField(default=list, blank=True)  # segments that continue the sentence before (one caption)
    params = models.JSONField(default=dict)  # the engine's row parameters (EngineSpec.params) as a dict
    # SSML: how each segment is said (inference.text.ssml_text.SegmentStyle as a dict, with its own `params`
    # where another voice, rate or language changes them); empty for plain text.
    styles = models.JSONField(default=list, blank=True)
    cacheable = models.BooleanField(default=False)  # deterministic: a seed was given
    # Zero retention: its texts are blanked when it ends, its audio neither cached nor stored on disk.
    zero_retention = models.BooleanField(default=False)
    interactive = models.BooleanField(default=True)  # someone listens live: stream, latency first
    progress = models.FloatField(default=0.0)  # share of segments done
    idempotency_key = models.CharField(max_length=255, blank=True)
    request_hash = models.CharField(max_length=64, blank=True)  # of the body an idempotency key came with
    callback_url = models.URLField(max_length=2000, blank=True)
    callback_attempts = models.JSONField(default=list, blank=True)
    # The service's address as its submitter reached it (or TTS_PUBLIC_URL): the callback's audio_url is absolute.
    base_url = models.CharField(max_length=500, blank=True)
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
