"""The Celery app. Synthesis runs on the `tts` queue (one worker per GPU, model loaded once per
process); light periodic work on `default`. Configuration is Django's CELERY_* settings."""

from __future__ import annotations

import logging
import os

from celery import Celery
from celery.worker.consumer import Consumer as CeleryConsumer

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tts_saas.settings")

app = Celery("tts_saas")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class Consumer(CeleryConsumer):
    """Celery's consumer, surviving a broker connection that breaks in one particular way.

    When Redis drops the connection, the consumer collects the dead connection (which clears its
    transport's client) and then closes it; closing the default channel again asks for a new
    Redis client to give back unacknowledged messages and fails with AttributeError ('NoneType'
    object has no attribute 'hostname'), which Celery's cleanup does not expect (it ignores only
    connection errors). The worker then stops consuming for good while the process lives on. Seen
    with celery/kombu 5.7 in about one Redis restart in five (tests/test_backend_outages.py), when
    a task finished as the connection broke. With Redis down those messages could not be given
    back either way; they stay unacknowledged in Redis and are delivered again after the broker's
    visibility timeout (the synthesis task does nothing for a job that has already ended)."""

    def on_connection_error_after_connected(self, exc):
        try:
            super().on_connection_error_after_connected(exc)
        except AttributeError:
            logging.getLogger(__name__).warning(
                "closing the broken broker connection failed inside kombu; reconnecting anyway", exc_info=True
            )
            self.connection = None
