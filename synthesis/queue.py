"""Sending Celery tasks, by name: the modules that enqueue work never import the task module
(which imports them), and each message carries the request id into the worker's log lines."""

from __future__ import annotations

from tts_saas.celery import app
from tts_saas.request_id import request_id_var

SYNTHESIZE = "synthesis.tasks.synthesize_job"
DELIVER_CALLBACK = "synthesis.tasks.deliver_callback"
ENCODE_VOICE = "synthesis.tasks.encode_voice_recording"


def _send(name: str, job_id, *, request_id: str = "", **options) -> None:
    headers = {"request_id": request_id or request_id_var.get()}
    app.send_task(name, args=[str(job_id)], headers=headers, **options)


def enqueue_synthesis(job_id, *, priority: int, expires: float, request_id: str) -> None:
    """On the `tts` queue; `expires`: a worker that comes back after the job's time to wait drops
    the task unrun."""
    _send(SYNTHESIZE, job_id, request_id=request_id, queue="tts", priority=priority, expires=expires)


def enqueue_voice_recording(voice_id: str) -> None:
    """On the `tts` queue: a worker's model encodes the recording (at the front of the queue)."""
    _send(ENCODE_VOICE, voice_id, queue="tts", priority=0, expires=3600)


def enqueue_callback(job_id, request_id: str = "") -> None:
    _send(DELIVER_CALLBACK, job_id, request_id=request_id, queue="default")
