"""The audit log for owners and admins: every event of the organization, newest first, filtered
by action group, actor and period, paged by cursor; the same as CSV."""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime, time, timedelta

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.utils.http import content_disposition_header

from accounts import audit

from ..access import member_required, page
from .usage import cell

PAGE = 50
GROUPS = [("", "Everything"), ("signin.", "Sign-ins"), ("key.", "API keys"), ("member.", "Members")]
GROUPS += [("access.", "Refused calls"), ("ip_allowlist.", "IP allowlist"), ("webhook_secret.", "Webhook secret")]
GROUPS += [("voice.", "Voices"), ("lexicon.", "Lexicons"), ("billing.", "Plan and billing"), ("staff.", "Staff")]


class AuditFilter(forms.Form):
    action = forms.ChoiceField(choices=GROUPS, required=False, label="What")
    actor = forms.CharField(required=False, max_length=64, label="Actor id", help_text="a member's id or a key's id")
    start = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)


def _filtered(request):
    if not request.principal.is_admin:
        raise PermissionDenied("Only owners and admins read the audit log.")
    form = AuditFilter(request.GET or None)
    q = form.cleaned_data if form.is_valid() else {}
    start, end = q.get("start"), q.get("end")
    found = audit.events(
        request.principal.organization,
        action=q.get("action") or None,
        actor_id=q.get("actor") or None,
        since=datetime.combine(start, time(), UTC) if start else None,
        until=datetime.combine(end, time(), UTC) + timedelta(days=1) if end else None,
        after=q.get("after"),
    )
    return form, found


@member_required
def audit_log(request):
    form, found = _filtered(request)
    events = list(found[: PAGE + 1])
    query = request.GET.copy()
    if len(events) > PAGE:
        query["after"] = str(events[PAGE - 1].pk)
    csv_query = request.GET.copy()
    csv_query.pop("after", None)
    return page(
        request,
        "audit.html",
        "audit",
        form=form,
        events=[(event, audit.ACTIONS.get(event.action, event.action)) for event in events[:PAGE]],
        older=query.urlencode() if len(events) > PAGE else None,
        csv_query=csv_query.urlencode(),
    )


@member_required
def audit_csv(request):
    _, found = _filtered(request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    filename = f"{request.principal.organization.slug}-audit-log.csv"
    response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=filename)
    out = csv.writer(response)
    out.writerow(["time", "action", "actor_type", "actor_id", "actor", "ip", "target", "before", "after"])
    for event in found.iterator():
        out.writerow(
            [
                event.created_at.isoformat(),
                event.action,
                event.actor_type,
                cell(event.actor_id),
                cell(event.actor_label),
                event.ip or "",
                cell(event.target),
                cell(_json(event.before)),
                cell(_json(event.after)),
            ]
        )
    return response


def _json(value) -> str:
    return "" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)
