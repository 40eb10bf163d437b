"""The callback task's retry policy is Celery's own (autoretry with exponential backoff and
jitter), sized by TTS_CALLBACK_MAX_ATTEMPTS and TTS_CALLBACK_BACKOFF_SECONDS: a failing receiver
gets that many attempts in all, then the task gives up without failing."""

from __future__ import annotations

import logging

import pytest
from django.conf import settings

from synthesis import tasks
from synthesis.service import callbacks


def test_the_task_uses_celerys_retry_policy_sized_by_the_settings():
    task = tasks.deliver_callback
    assert task.autoretry_for == (tasks.CallbackNotDelivered,)
    assert task.max_retries == settings.TTS_CALLBACK_MAX_ATTEMPTS - 1
    assert task.retry_backoff == settings.TTS_CALLBACK_BACKOFF_SECONDS
    assert task.retry_jitter is True
    assert task.acks_late is True


@pytest.mark.parametrize("answers", [[False] * 10, [False, False, True]])
def test_a_failing_receiver_gets_the_configured_number_of_attempts(monkeypatch, caplog, answers):
    calls: list[str] = []

    def deliver(job_id: str) -> bool:
        calls.append(job_id)
        return answers[len(calls) - 1]

    monkeypatch.setattr(callbacks, "deliver", deliver)
    with caplog.at_level(logging.WARNING, logger="synthesis.tasks"):
        result = tasks.deliver_callback.apply(args=["job-1"])  # eager: retries run at once
    delivered = True in answers[: settings.TTS_CALLBACK_MAX_ATTEMPTS]
    assert result.successful() and result.result is delivered
    expected = answers.index(True) + 1 if delivered else settings.TTS_CALLBACK_MAX_ATTEMPTS
    assert calls == ["job-1"] * expected
    assert ("given up" in caplog.text) is not delivered
