"""Sending Celery tasks by name: the modules that enqueue work never import the task modules
(which import them), and each message carries the request id into the worker's log lines."""

from __future__ import annotations

from tts_saas.celery import app
from tts_saas.request_id import request_id_var


def send(name: str, object_id, *, request_id: str = "", **options) -> None:
    """Task `name` with one argument, the id of what it works on; `options` as Celery's send_task
    (queue, priority, expires)."""
    headers = {"request_id": request_id or request_id_var.get()}
    app.send_task(name, args=[str(object_id)], headers=headers, **options)


def delete_queue(name: str) -> None:
    """Delete the broker's queue `name` and the messages in it (a gone worker's own queue)."""
    with app.connection_for_write() as connection:
        connection.default_channel.queue_delete(name)
