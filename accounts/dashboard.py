"""The developer dashboard (server-rendered): sign up, organization switching, overview of
usage against the quota with a 30-day chart, API keys, voices, jobs and docs. Every page is
scoped to the signed-in user's current organization through `member_required`."""

from __future__ import annotations

import functools
from datetime import UTC, timedelta

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model, login
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Q, Sum
from django.db.models.functions import TruncDate
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.text import slugify
from django.views.decorators.http import require_POST

from .models import ApiKey, Membership, Organization
from .tenancy import scoped

SESSION_ORG = "organization_id"


def member_required(view):
    """Signed in and a member of the current organization (the session's choice, else the first)."""

    @login_required
    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        memberships = list(Membership.objects.filter(user=request.user).select_related("organization"))
        if not memberships:
            return redirect("dashboard:signup")
        chosen = request.session.get(SESSION_ORG)
        membership = next((m for m in memberships if m.organization_id == chosen), memberships[0])
        request.membership, request.memberships = membership, memberships
        return view(request, *args, **kwargs)

    return wrapped


def page(request, template: str, nav: str, **context):
    context.update(
        nav=nav,
        current_org=request.membership.organization,
        memberships=request.memberships,
        membership=request.membership,
        now=timezone.now(),
    )
    return render(request, f"dashboard/{template}", context)


class SignupForm(forms.Form):
    email = forms.EmailField()
    password = forms.CharField(widget=forms.PasswordInput, min_length=10)
    organization = forms.CharField(max_length=200, label="Organization name")

    def clean_email(self):
        email = self.cleaned_data["email"].lower()
        if get_user_model().objects.filter(username=email).exists():
            raise forms.ValidationError("An account with this e-mail exists already: log in instead.")
        return email

    def clean_password(self):
        from django.contrib.auth.password_validation import validate_password

        validate_password(self.cleaned_data["password"])
        return self.cleaned_data["password"]


def unique_slug(name: str) -> str:
    base = slugify(name)[:90] or "org"
    slug, n = base, 1
    while Organization.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def signup(request):
    """A new user and organization (on the default plan), with the user as its owner."""
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                username=form.cleaned_data["email"],
                email=form.cleaned_data["email"],
                password=form.cleaned_data["password"],
            )
            name = form.cleaned_data["organization"]
            org = Organization.objects.create(name=name, slug=unique_slug(name))
            Membership.objects.create(user=user, organization=org, role=Membership.Role.OWNER)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        request.session[SESSION_ORG] = org.pk
        return redirect("dashboard:overview")
    return render(request, "dashboard/signup.html", {"form": form})


@require_POST
@member_required
def switch(request):
    chosen = int(request.POST.get("organization", 0))
    if not any(m.organization_id == chosen for m in request.memberships):
        raise Http404
    request.session[SESSION_ORG] = chosen
    return redirect("dashboard:overview")


def daily_chart(rows: list[dict], days: int = 30) -> dict:
    """Bars for an inline SVG: characters per day for the last `days` days (UTC)."""
    today = timezone.now().astimezone(UTC).date()
    by_day = {r["date"]: r["characters"] or 0 for r in rows}
    series = [
        (today - timedelta(days=days - 1 - i), by_day.get(today - timedelta(days=days - 1 - i), 0)) for i in range(days)
    ]
    peak = max((v for _, v in series), default=0) or 1
    width, height, gap = 600, 160, 2
    bar = width / days
    bars = [
        {
            "x": round(i * bar + gap / 2, 1),
            "w": round(bar - gap, 1),
            "h": round(height * v / peak, 1),
            "y": round(height - height * v / peak, 1),
            "day": d.isoformat(),
            "value": v,
        }
        for i, (d, v) in enumerate(series)
    ]
    return {"bars": bars, "width": width, "height": height, "peak": peak, "total": sum(v for _, v in series)}


@member_required
def overview(request):
    from billing import quota
    from billing.limits import limits_for
    from billing.models import UsageEvent

    org = request.membership.organization
    limits = limits_for(org)
    used, reserved, resets_at = quota.usage(org)
    month_start = quota.period_start()
    events = scoped(UsageEvent, org)
    month = events.filter(created_at__date__gte=month_start).aggregate(
        requests=Count("id", filter=Q(status="succeeded")),
        cached=Count("id", filter=Q(cached=True)),
        seconds=Sum("audio_seconds"),
    )
    since = timezone.now() - timedelta(days=30)
    daily = list(
        events.filter(created_at__gte=since)
        .annotate(date=TruncDate("created_at", tzinfo=UTC))
        .values("date")
        .annotate(characters=Sum("characters"))
        .order_by("date")
    )
    requests_count = month["requests"] or 0
    return page(
        request,
        "overview.html",
        "overview",
        limits=limits,
        used=used,
        reserved=reserved,
        resets_at=resets_at,
        percent=round(100 * used / limits.monthly_characters, 1) if limits.monthly_characters else 0,
        requests=requests_count,
        audio_minutes=round((month["seconds"] or 0) / 60, 1),
        hit_rate=round(100 * (month["cached"] or 0) / requests_count, 1) if requests_count else None,
        chart=daily_chart(daily),
    )


class KeyForm(forms.Form):
    name = forms.CharField(max_length=200)
    kind = forms.ChoiceField(choices=ApiKey.Kind.choices, initial=ApiKey.Kind.STANDARD)
    expires_at = forms.DateTimeField(required=False, help_text="optional, e.g. 2027-01-31 23:59")

    def clean_expires_at(self):
        value = self.cleaned_data["expires_at"]
        if value is not None and value <= timezone.now():
            raise forms.ValidationError("The expiry must be in the future.")
        return value


@member_required
def keys(request):
    org, can_manage = request.membership.organization, request.membership.can_manage_keys
    form = KeyForm(request.POST or None)
    created = None
    if request.method == "POST":
        if not can_manage:
            raise PermissionDenied("Your role cannot manage API keys.")
        if form.is_valid():
            key, raw = org.create_api_key(
                form.cleaned_data["name"],
                expires_at=form.cleaned_data["expires_at"],
                created_by=request.user,
                kind=form.cleaned_data["kind"],
            )
            created = {"key": key, "raw": raw}
            form = KeyForm()
    return page(
        request, "keys.html", "keys", keys=scoped(ApiKey, org), form=form, created=created, can_manage=can_manage
    )


@require_POST
@member_required
def revoke_key(request, prefix: str):
    if not request.membership.can_manage_keys:
        raise PermissionDenied("Your role cannot manage API keys.")
    key = scoped(ApiKey, request.membership.organization).filter(prefix=prefix).first()
    if key is None:
        raise Http404
    key.revoke()
    messages.info(request, f"Key {key.name} ({key.prefix}) revoked: it is refused from now on.")
    return redirect("dashboard:keys")


@member_required
def voices(request):
    from billing.limits import limits_for
    from inference.voices import VOICES

    allowed = limits_for(request.membership.organization).allowed_voices
    rows = [{"voice": v, "available": not allowed or v.name in allowed} for v in VOICES.values()]
    return page(request, "voices.html", "voices", voices=rows)


@member_required
def jobs(request):
    from synthesis.models import Job

    recent = scoped(Job, request.membership.organization).order_by("-created_at")[:100]
    return page(request, "jobs.html", "jobs", jobs=recent)


@member_required
def job_audio(request, job_id):
    from synthesis.audio import CONTENT_TYPES
    from synthesis.models import Job

    job = scoped(Job, request.membership.organization).filter(pk=job_id).first()
    if job is None or not job.result:
        raise Http404
    return FileResponse(job.result.open("rb"), content_type=CONTENT_TYPES[job.response_format])


@member_required
def docs(request):
    prefixes = list(
        scoped(ApiKey, request.membership.organization)
        .filter(revoked_at__isnull=True)
        .values_list("prefix", flat=True)[:1]
    )
    example_key = f"tts_{prefixes[0]}_…" if prefixes else "tts_<your key>"
    from django.conf import settings

    protocol = (settings.BASE_DIR / "docs" / "websocket.md").read_text(encoding="utf-8")
    return page(
        request,
        "docs.html",
        "docs",
        example_key=example_key,
        base_url=request.build_absolute_uri("/v1"),
        websocket_protocol=protocol,
    )


@member_required
def playground(request):
    from billing.limits import limits_for
    from inference.voices import VOICES

    limits = limits_for(request.membership.organization)
    voices = [v for v in VOICES.values() if not limits.allowed_voices or v.name in limits.allowed_voices]
    return page(request, "playground.html", "playground", voices=voices, max_chars=limits.max_input_chars)


@require_POST
@member_required
def playground_ticket(request):
    """A single-use WebSocket ticket for the signed-in member (CSRF-protected POST)."""
    from django.http import JsonResponse

    from synthesis import tickets

    ticket = tickets.issue(organization_id=request.membership.organization_id, user_id=request.user.pk)
    return JsonResponse({"ticket": ticket, "url": f"/v1/audio/stream?ticket={ticket}"})


class InviteForm(forms.Form):
    email = forms.EmailField()
    role = forms.ChoiceField(choices=[("member", "member"), ("admin", "admin")], initial="member")


@member_required
def members(request):
    from django.core.mail import send_mail

    from .models import Invitation

    org, can_manage = request.membership.organization, request.membership.can_manage_keys
    form = InviteForm(request.POST or None)
    if request.method == "POST":
        if not can_manage:
            raise PermissionDenied("Only owners and admins invite people.")
        if form.is_valid():
            invitation = Invitation.objects.create(
                organization=org,
                email=form.cleaned_data["email"].lower(),
                role=form.cleaned_data["role"],
                invited_by=request.user,
            )
            link = request.build_absolute_uri(f"/dashboard/invite/{invitation.token}")
            send_mail(
                f"Join {org.name} on tts_saas",
                f"{request.user.email} invites you to {org.name} as {invitation.role}.\n\n"
                f"Accept within 7 days: {link}\n",
                None,
                [invitation.email],
            )
            messages.info(request, f"Invitation sent to {invitation.email}.")
            return redirect("dashboard:members")
    team = Membership.objects.filter(organization=org).select_related("user").order_by("created_at")
    pending = [i for i in Invitation.objects.filter(organization=org, accepted_at__isnull=True) if i.is_open]
    return page(request, "members.html", "members", team=team, pending=pending, form=form, can_manage=can_manage)


@require_POST
@member_required
def remove_member(request, membership_id: int):
    org = request.membership.organization
    if request.membership.role != Membership.Role.OWNER:
        raise PermissionDenied("Only owners remove members.")
    target = Membership.objects.filter(organization=org, pk=membership_id).first()
    if target is None:
        raise Http404
    owners = Membership.objects.filter(organization=org, role=Membership.Role.OWNER).count()
    if target.role == Membership.Role.OWNER and owners == 1:
        messages.info(request, "The last owner cannot be removed.")
    else:
        target.delete()
        messages.info(request, f"{target.user.email} no longer belongs to {org.name}.")
    return redirect("dashboard:members")


class AcceptForm(forms.Form):
    password = forms.CharField(widget=forms.PasswordInput, min_length=10)

    def clean_password(self):
        from django.contrib.auth.password_validation import validate_password

        validate_password(self.cleaned_data["password"])
        return self.cleaned_data["password"]


def accept_invitation(request, token: str):
    """The invitation link: join as the invited address (creating the account if it has none)."""
    from .models import Invitation

    invitation = Invitation.objects.select_related("organization").filter(token=token).first()
    if invitation is None or not invitation.is_open:
        raise Http404("This invitation is unknown, used or expired.")
    users = get_user_model().objects
    if request.user.is_authenticated:
        if request.user.email.lower() != invitation.email:
            raise PermissionDenied(f"This invitation is for {invitation.email}.")
        invitation.accept(request.user)
        request.session[SESSION_ORG] = invitation.organization_id
        return redirect("dashboard:overview")
    existing = users.filter(username=invitation.email).exists()
    form = AcceptForm(request.POST or None)
    if not existing and request.method == "POST" and form.is_valid():
        with transaction.atomic():
            user = users.create_user(
                username=invitation.email, email=invitation.email, password=form.cleaned_data["password"]
            )
            invitation.accept(user)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        request.session[SESSION_ORG] = invitation.organization_id
        return redirect("dashboard:overview")
    return render(request, "dashboard/accept.html", {"invitation": invitation, "form": form, "existing": existing})
