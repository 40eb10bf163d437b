"""The operators' page: queues, workers, throughput, latency, errors, cache, open streams, read
when the page is served and read again every REFRESH_SECONDS by the page itself (pausable)."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render
from django.utils import timezone

from synthesis.service.operations import snapshot

REFRESH_SECONDS = 10


@staff_member_required
def operations(request):
    context = {"ops": snapshot(), "read_at": timezone.now(), "refresh_seconds": REFRESH_SECONDS, "nav": "ops"}
    return render(request, "dashboard/operations.html", context)
