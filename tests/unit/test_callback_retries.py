"""A delivery's retry policy (job callbacks and endpoint events alike): exponential backoff with full
jitter, capped at ten minutes, sized by TTS_CALLBACK_MAX_ATTEMPTS and TTS_CALLBACK_BACKOFF_SECONDS;
each retry's time is written on the delivery's row (the log's "next retry"); a failing receiver gets
that many attempts in all, then the task gives up without failing."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.utils import timezone

from synthesis import tasks
from synthesis.service import callbacks


class Rows:
    """Stands in for the delivery log's manager: what the task writes on a delivery's row."""

    def __init__(self) -> None:
        self.updates: list[dict] = []

    def filter(self, **lookup):
        assert lookup == {"pk": 7}
        return self

    def update(self, **fields) -> int:
        self.updates.append(fields)
        return 1


def test_the_tasks_are_late_acknowledged_and_sized_by_the_settings():
    for task in (tasks.deliver_callback, tasks.deliver_event):
        assert task.max_retries == settings.TTS_CALLBACK_MAX_ATTEMPTS - 1
        assert task.acks_late is True


@pytest.mark.parametrize("answers", [[False] * 10, [False, False, True]])
def test_a_failing_receiver_gets_the_configured_number_of_attempts(monkeypatch, caplog, answers):
    calls: list[str] = []
    rows = Rows()

    def deliver(job_id: str):
        calls.append(job_id)
        return SimpleNamespace(pk=7, delivered=answers[len(calls) - 1])

    monkeypatch.setattr(callbacks, "deliver", deliver)
    monkeypatch.setattr(tasks.WebhookDelivery, "objects", rows)
    started = timezone.now()
    with caplog.at_level(logging.WARNING, logger="synthesis.tasks"):
        result = tasks.deliver_callback.apply(args=["job-1"])  # eager: retries run at once
    delivered = True in answers[: settings.TTS_CALLBACK_MAX_ATTEMPTS]
    assert result.successful() and result.result is delivered
    expected = answers.index(True) + 1 if delivered else settings.TTS_CALLBACK_MAX_ATTEMPTS
    assert calls == ["job-1"] * expected
    assert ("given up" in caplog.text) is not delivered
    # One next-retry time a retry, each within its backoff (doubling, capped at ten minutes).
    assert len(rows.updates) == expected - 1
    for retry, update in enumerate(rows.updates):
        wait = (update["next_attempt_at"] - started).total_seconds()
        assert 0 <= wait <= min(tasks.RETRY_MAX_SECONDS, settings.TTS_CALLBACK_BACKOFF_SECONDS * 2**retry) + 5
