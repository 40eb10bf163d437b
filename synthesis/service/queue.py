"""The synthesis tasks, sent by name (`tts_saas.queueing`): each engine's jobs on its own queue."""

from __future__ import annotations

from inference.registry import SPECS
from tts_saas.queueing import send

SYNTHESIZE = "synthesis.tasks.synthesize_job"
DELIVER_CALLBACK = "synthesis.tasks.deliver_callback"


def enqueue_synthesis(job_id, *, engine: str, priority: int, expires: float, request_id: str) -> None:
    """On the engine's queue (`tts-<engine>`); `expires`: a worker that comes back after the job's
    time to wait drops the task unrun."""
    queue = SPECS[engine].queue_name
    send(SYNTHESIZE, job_id, request_id=request_id, queue=queue, priority=priority, expires=expires)


def enqueue_callback(job_id, request_id: str = "") -> None:
    send(DELIVER_CALLBACK, job_id, request_id=request_id, queue="default")
