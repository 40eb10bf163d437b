"""The synthesis tasks, sent by name (`tts_saas.queueing`): each engine's jobs on its own queue, or
on the queue of the worker that owns the job's voice (`routing`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from inference.registry import SPECS
from synthesis.service import routing
from tts_saas.queueing import send

SYNTHESIZE = "synthesis.tasks.synthesize_job"
DELIVER_CALLBACK = "synthesis.tasks.deliver_callback"
PUBLISH_JOB_EVENT = "synthesis.tasks.publish_job_event"


def enqueue_synthesis(
    job_id,
    *,
    engine: str,
    priority: int,
    expires: float,
    request_id: str,
    params: dict | None = None,
    styles: Sequence[Mapping] = (),
) -> None:
    """On the engine's queue (`tts-<engine>`), or with `params` (the job's, and its SSML `styles`)
    on its voice's owner's (`routing.queue_for`); `expires`: a worker that comes back after the
    job's time to wait drops the task unrun."""
    queue = routing.queue_for(engine, params, styles) if params is not None else SPECS[engine].queue_name
    send(SYNTHESIZE, job_id, request_id=request_id, queue=queue, priority=priority, expires=expires)
    if queue != SPECS[engine].queue_name:
        routing.note_routed(job_id, queue, engine, time.time())


def enqueue_callback(job_id, request_id: str = "") -> None:
    send(DELIVER_CALLBACK, job_id, request_id=request_id, queue="default")


def enqueue_job_event(job_id, request_id: str = "") -> None:
    send(PUBLISH_JOB_EVENT, job_id, request_id=request_id, queue="default")
