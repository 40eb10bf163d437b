"""The Celery app. Synthesis runs on the `tts` queue (one worker per GPU, model loaded once per
process); light periodic work on `default`. Configuration is Django's CELERY_* settings."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tts_saas.settings")

app = Celery("tts_saas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
