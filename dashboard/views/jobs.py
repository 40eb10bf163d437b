"""The old Jobs page, now History (every request, cache hits included): its address sends
there. A job's audio (`dashboard:job-audio`) is served by views.history.job_audio."""

from __future__ import annotations

from django.shortcuts import redirect

from ..access import member_required


@member_required
def jobs(request):
    return redirect("dashboard:history")
