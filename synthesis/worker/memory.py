"""A synthesis worker's memory ceiling (TTS_WORKER_MAX_MEMORY_MB; 0: none). After every batch the
batcher reads the process's resident memory (exported as `tts_worker_resident_memory_bytes`);
past the ceiling the worker leaves as Celery's warm shutdown has it leave: it signals itself
SIGTERM, takes no more tasks (those it had prefetched go back to the queue: tasks are acknowledged
late), lets the jobs it has finish, and exits, to be started again by whoever runs it (`scripts/run`
restarts it; Compose's `restart: unless-stopped` and Kubernetes do). Memory that grows anyway (a
leak of a library, a heap that fragments) then costs a restart, never the machine."""

from __future__ import annotations

import logging
import os
import signal

from prometheus_client import Gauge

logger = logging.getLogger(__name__)

RESIDENT = Gauge("tts_worker_resident_memory_bytes", "Resident memory of the synthesis worker process")
CEILING = Gauge("tts_worker_memory_ceiling_bytes", "The worker's memory ceiling (TTS_WORKER_MAX_MEMORY_MB; 0: none)")

_leaving = False


def resident_bytes() -> int:
    """The process's resident set (Linux: /proc/self/statm); 0 where it cannot be read."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def check(ceiling_mb: int) -> bool:
    """After a batch: the resident memory exported, and past `ceiling_mb` the worker told to leave
    (once). True when it is leaving."""
    global _leaving
    resident = resident_bytes()
    RESIDENT.set(resident)
    CEILING.set(ceiling_mb * 2**20)
    if _leaving or not ceiling_mb or resident <= ceiling_mb * 2**20:
        return _leaving
    _leaving = True
    logger.warning(
        "worker memory over its ceiling: finishing its jobs, then leaving to be started again",
        extra={"resident_mb": resident // 2**20, "ceiling_mb": ceiling_mb},
    )
    os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown
    return True
