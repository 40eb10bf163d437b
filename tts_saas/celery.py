"""The Celery app. Synthesis runs on the `tts` queue (one worker per GPU, model loaded once per
process); light periodic work on `default`. Configuration is Django's CELERY_* settings."""

from __future__ import annotations

import logging
import os

import redis
from celery import Celery
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu.transport import redis as kombu_redis

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


def _connparams_of_a_live_connection(original):
    """kombu's Redis channel asks its transport's client for the broker's address whenever it
    needs a new Redis client. Once the consumer has collected a broken connection that client (or
    the transport) is None, and the question fails with AttributeError, which nothing in Celery
    expects: an ack of a task that finished as Redis went away then left the worker consuming
    nothing while it lived on (tests/test_backend_outages.py, about one Redis restart in five). As
    a redis ConnectionError (one of the transport's connection errors) Celery handles it as it
    handles the outage itself: the ack is logged as failed (the message is delivered again after
    the visibility timeout, and the synthesis task does nothing for a job that has ended) and the
    consumer reconnects."""

    def _connparams(self, asynchronous=False):
        if self.connection is None or self.connection.client is None:
            raise redis.exceptions.ConnectionError("the broker connection was closed")
        return original(self, asynchronous)

    return _connparams


kombu_redis.Channel._connparams = _connparams_of_a_live_connection(  # type: ignore[method-assign]
    kombu_redis.Channel._connparams
)
