"""Jobs waiting for their organization's slot (synthesis.service.waiting) against the races around
them: a waiting job cancelled or expired from a copy read before it took a slot still gives the slot
back (else the organization is blocked for the slot's hour), and one organization's failure never
stops beat's sweep for the others."""

from __future__ import annotations

import pytest

from billing import concurrency
from synthesis.models import Job
from synthesis.service import waiting
from synthesis.service.jobs import settle_job
from tests.conftest import make_persona
from tests.factories import make_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def enqueued(monkeypatch) -> list[str]:
    """What goes on an engine's queue (no worker here): the jobs' ids."""
    sent: list[str] = []
    monkeypatch.setattr(waiting.queue, "enqueue_synthesis", lambda job_id, **_: sent.append(str(job_id)))
    return sent


def test_a_waiting_job_settled_from_a_stale_copy_gives_its_slot_back(enqueued):
    persona = make_persona("Waiting Race", concurrent_jobs=1)
    org_id = persona.org.pk
    job = make_job(persona.org, interactive=False)
    stale = Job.objects.get(pk=job.pk)  # as cancel or the reaper read it: no lease yet
    assert waiting.start_waiting(org_id) == 1 and enqueued == [str(job.pk)]
    assert concurrency.in_flight(org_id) == 1
    assert settle_job(stale, Job.Status.CANCELLED, from_status=Job.Status.QUEUED)
    assert concurrency.in_flight(org_id) == 0  # the slot it took is free again
    after = make_job(persona.org, interactive=False)
    assert waiting.start_waiting(org_id) == 1 and enqueued[-1] == str(after.pk)


def test_one_organizations_failure_does_not_stop_the_sweep(monkeypatch, enqueued):
    broken, fine = make_persona("Broken Org", concurrent_jobs=1), make_persona("Fine Org", concurrent_jobs=1)
    make_job(broken.org, interactive=False)
    job = make_job(fine.org, interactive=False)
    real = waiting.start_waiting

    def start(org_id: int) -> int:
        if org_id == broken.org.pk:
            raise ConnectionError("Redis went away for a moment")
        return real(org_id)

    monkeypatch.setattr(waiting, "start_waiting", start)
    assert waiting.start_all_waiting() == 1
    assert enqueued == [str(job.pk)]
