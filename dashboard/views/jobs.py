"""The organization's recent jobs, with their stored audio."""

from __future__ import annotations

from django.http import FileResponse, Http404

from accounts.tenancy import scoped
from synthesis.audio import output_format
from synthesis.models import Job

from ..access import member_required, page


@member_required
def jobs(request):
    recent = scoped(Job, request.principal.organization).order_by("-created_at")[:100]
    return page(request, "jobs.html", "jobs", jobs=recent)


@member_required
def job_audio(request, job_id):
    job = scoped(Job, request.principal.organization).filter(pk=job_id).first()
    if job is None or not job.result:
        raise Http404
    return FileResponse(job.result.open("rb"), content_type=output_format(job.response_format).content_type)
