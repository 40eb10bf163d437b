"""The worker's broker consumer keeps reconnecting when kombu fails to close a dead connection.

The failure itself is a race (a task finishing as Redis drops the connection: about one Redis
restart in five in tests/test_backend_outages.py, which asserts the worker takes jobs again);
here the error is raised on purpose to check what the consumer does with it."""

from __future__ import annotations

import logging

import pytest
from celery.worker.consumer import Consumer as CeleryConsumer

from tts_saas.celery import Consumer, app


def consumer_whose_cleanup_raises(monkeypatch, error: Exception) -> Consumer:
    def cleanup(self, exc):
        raise error

    monkeypatch.setattr(CeleryConsumer, "on_connection_error_after_connected", cleanup)
    consumer = object.__new__(Consumer)  # no broker needed: only the error handling runs
    consumer.connection = object()
    return consumer


def test_the_worker_uses_this_consumer():
    assert app.conf.worker_consumer == "tts_saas.celery:Consumer"


def test_kombus_attribute_error_on_close_is_logged_and_the_consumer_reconnects(monkeypatch, caplog):
    kombu_error = AttributeError("'NoneType' object has no attribute 'hostname'")
    consumer = consumer_whose_cleanup_raises(monkeypatch, kombu_error)
    with caplog.at_level(logging.WARNING, logger="tts_saas.celery"):
        consumer.on_connection_error_after_connected(ConnectionError("Connection closed by server."))
    assert consumer.connection is None  # Celery's loop then restarts its blueprint: a new connection
    assert "reconnecting anyway" in caplog.text


def test_other_errors_on_close_still_stop_the_consumer(monkeypatch):
    consumer = consumer_whose_cleanup_raises(monkeypatch, ValueError("something else"))
    with pytest.raises(ValueError):
        consumer.on_connection_error_after_connected(ConnectionError("Connection closed by server."))
