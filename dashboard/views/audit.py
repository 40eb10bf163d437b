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
from accounts.models import ApiKey, AuditEvent, Membership, Organization

from ..access import member_required, page
from .usage import cell

PAGE = 50
GROUPS = [("", "Everything"), ("signin.", "Sign-ins"), ("key.", "API keys"), ("member.", "Members")]
GROUPS += [("settings.", "Settings"), ("organization.", "Organization"), ("sso.", "Single sign-on")]
GROUPS += [("mfa.", "Second factors"), ("account.", "Accounts deleted"), ("access.", "Refused calls")]
GROUPS += [("ip_allowlist.", "IP allowlist"), ("webhook_secret.", "Webhook secret")]
GROUPS += [("webhook_endpoint.", "Webhook endpoints"), ("voice.", "Voices"), ("lexicon.", "Lexicons")]
GROUPS += [("billing.", "Plan and billing"), ("staff.", "Staff")]


class AuditFilter(forms.Form):
    action = forms.ChoiceField(choices=GROUPS, required=False, label="What")
    actor = forms.ChoiceField(required=False, label="Who", help_text="a member, an API key or the operator's staff")
    start = forms.DateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    after = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, org: Organization, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["actor"].choices = [("", "Anyone"), *actor_choices(org)]


def actor_choices(org: Organization) -> list[tuple[str, list[tuple[str, str]]]]:
    """Who may appear in the log, by name: the members, the keys (revoked ones too), and whoever
    else acted (staff, systems, people who have left)."""
    members = [
        (str(m.user_id), m.user.get_full_name() or m.user.email)
        for m in Membership.objects.filter(organization=org).select_related("user").order_by("user__email")
    ]
    keys = [(k.prefix, f"{k.name} ({k.prefix})") for k in ApiKey.objects.filter(organization=org).order_by("name")]
    known = {value for value, _ in members + keys}
    others = (
        AuditEvent.objects.filter(organization=org)
        .exclude(actor_id="")
        .exclude(actor_id__in=known)
        .values_list("actor_id", "actor_label", "actor_type")
        .distinct()
        .order_by("actor_label")[:100]
    )
    groups = [("Members", members), ("API keys", keys)]
    if others:
        groups.append(("Others", [(i, f"{label or i} ({kind})") for i, label, kind in others]))
    return [(name, choices) for name, choices in groups if choices]


def _shown(value) -> str:
    if value is None or value == "" or value == []:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ", ".join(_shown(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_shown(v)}" for k, v in value.items())
    return str(value)


def change_lines(before, after) -> list[str]:
    """An event's change as lines a person reads: `field: before → after`, or `field: value`
    for what was only made or only removed."""
    was = before if isinstance(before, dict) else ({} if before is None else {"value": before})
    now = after if isinstance(after, dict) else ({} if after is None else {"value": after})
    lines = []
    for field in list(dict.fromkeys([*was, *now])):
        label = field.replace("_", " ")
        if field in was and field in now:
            lines.append(f"{label}: {_shown(was[field])} → {_shown(now[field])}")
        else:
            lines.append(f"{label}: {_shown(now.get(field, was.get(field)))}")
    return lines


def _filtered(request):
    if not request.principal.is_admin:
        raise PermissionDenied("Only owners and admins read the audit log.")
    form = AuditFilter(request.GET or None, org=request.principal.organization)
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
        events=[(event, audit.label(event.action), change_lines(event.before, event.after)) for event in events[:PAGE]],
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
