"""Voices made from a person's recording (cloning): whether this deployment makes them at all, and
how often an organization may start one. A plan decides whether its tenants may clone and how many
cloned voices they keep (`billing.models.Plan.max_cloned_voices`). And where a cloned voice's jobs
run: on the worker that owns the voice, which keeps its prompt (`synthesis.service.routing`)."""

from __future__ import annotations

from .env import envbool, envfloat, envstr

TTS_VOICE_CLONING = envbool("TTS_VOICE_CLONING", True)  # off: no voice from a recording, on any plan
TTS_CLONE_RATE = envstr("TTS_CLONE_RATE", "10/h")  # cloned voices an organization may start (django-ratelimit)
TTS_VOICE_ROUTING = envbool("TTS_VOICE_ROUTING", True)  # off: every job on its engine's shared queue
TTS_VOICE_PROMPT_MB = envfloat("TTS_VOICE_PROMPT_MB", 256.0)  # cloned voices' prompts a worker keeps (LRU by bytes)
