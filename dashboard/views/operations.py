"""The operators' page: queues, workers, throughput, latency, errors, cache, open streams."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from synthesis.service.operations import snapshot


@staff_member_required
def operations(request):
    return render(request, "dashboard/operations.html", {"ops": snapshot(), "nav": "ops"})
