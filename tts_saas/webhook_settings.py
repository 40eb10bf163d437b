"""Job callbacks and webhook endpoints: how often a delivery is retried, how long the delivery log
keeps entries, whether receivers on private or loopback addresses may be reached (off: a tenant
could otherwise reach into the operator's network; on for a self-hosted receiver on the LAN or
this machine), and the service's public address for absolute URLs in callbacks."""

from __future__ import annotations

from .env import envbool, envfloat, envint, envstr

TTS_CALLBACK_MAX_ATTEMPTS = envint("TTS_CALLBACK_MAX_ATTEMPTS", 6)
TTS_CALLBACK_BACKOFF_SECONDS = envfloat("TTS_CALLBACK_BACKOFF_SECONDS", 10)  # doubles each retry
TTS_WEBHOOK_LOG_DAYS = envint("TTS_WEBHOOK_LOG_DAYS", 30)  # test events' and endpoints' deliveries
TTS_CALLBACK_ALLOW_PRIVATE = envbool("TTS_CALLBACK_ALLOW_PRIVATE", False)  # receivers on the LAN or loopback
# Webhook endpoints one organization may keep, whatever its plan says: each event makes a delivery
# per endpoint on the light worker's queue, which every tenant shares.
TTS_MAX_WEBHOOK_ENDPOINTS = envint("TTS_MAX_WEBHOOK_ENDPOINTS", 20)
# One organization's webhook attempts running at once on the light worker (synthesis.service.
# delivery_share); 0: no share (every queued attempt runs in turn, whoever's it is).
TTS_WEBHOOK_ORG_SLOTS = envint("TTS_WEBHOOK_ORG_SLOTS", 1)
TTS_PUBLIC_URL = envstr("TTS_PUBLIC_URL", "").rstrip("/")  # e.g. https://tts.example.com; empty: the caller's host
