from __future__ import annotations

from celery import shared_task

from . import audit


@shared_task(name="accounts.tasks.expire_audit_events")
def expire_audit_events() -> int:
    """Audit events older than TTS_AUDIT_RETENTION_DAYS are deleted (daily, by beat)."""
    return audit.expire()
