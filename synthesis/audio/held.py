"""A zero-retention job's audio, held in Redis (never on disk) until its first download, at most
TTS_ZERO_RETENTION_HOLD_SECONDS: handed out once (GETDEL), then gone."""

from __future__ import annotations

from django.conf import settings

from tts_saas.redis import get_redis


def _key(job_id) -> str:
    return f"tts:job:{job_id}:held-audio"


def hold_audio(job_id, data: bytes) -> None:
    get_redis().set(_key(job_id), data, ex=settings.TTS_ZERO_RETENTION_HOLD_SECONDS)


def take_audio(job_id) -> bytes | None:
    """The audio, once; None when it was taken already or its time ran out."""
    return get_redis().getdel(_key(job_id))
