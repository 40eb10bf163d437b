"""Where staff land: the operator's ways in (the admin console, the operations page). Staff who
belong to no organization come here from any dashboard page (they have no tenant's pages to see);
those who do belong to one find the same links in the dashboard's menu."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render

from accounts.models import Membership


@staff_member_required
def staff(request):
    memberships = Membership.objects.filter(user=request.user).select_related("organization")
    return render(request, "dashboard/staff.html", {"nav": "staff", "memberships": memberships})
