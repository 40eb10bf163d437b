"""Voices made from a person's recording (cloning): whether this deployment makes them at all, and
how often an organization may start one. A plan decides whether its tenants may clone and how many
cloned voices they keep (`billing.models.Plan.max_cloned_voices`)."""

from __future__ import annotations

from .env import envbool, envstr

TTS_VOICE_CLONING = envbool("TTS_VOICE_CLONING", True)  # off: no voice from a recording, on any plan
TTS_CLONE_RATE = envstr("TTS_CLONE_RATE", "10/h")  # cloned voices an organization may start (django-ratelimit)
