"""What stands before a voice is made from a person's recording: the operator's switch
(TTS_VOICE_CLONING), the plan (whether its tenants may clone, how many cloned voices they keep),
the organization's rate (TTS_CLONE_RATE), its data retention (a zero-retention organization keeps
no upload), and the creator's consent statement, kept with the voice and in the audit log."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from django_ratelimit.core import get_usage

from accounts import audit
from accounts.models import Organization
from accounts.tenancy import scoped
from billing.limits import Limits
from tts_saas.errors import ApiError
from tts_saas.request_id import actor_var

from .models import Voice
from .recordings import CONSENT_STATEMENT

GROUP = "voices:clone"


def check_allowed(limits: Limits) -> None:
    """403 when this deployment or the organization's plan makes no voices from recordings."""
    if not settings.TTS_VOICE_CLONING:
        raise ApiError(
            403,
            "This service makes no voices from recordings (the operator has turned voice cloning off).",
            "voice_cloning_disabled",
        )
    if limits.max_cloned_voices < 1:
        raise ApiError(
            403, f"Your plan ({limits.plan}) does not include voices made from recordings.", "plan_limit_reached"
        )


def check_count(org: Organization, limits: Limits) -> None:
    """403 when the organization keeps as many cloned voices as its plan allows (called while the
    organization's row is locked: one creation at a time)."""
    cloned = scoped(Voice, org).filter(source=Voice.Source.RECORDING).count()
    if cloned >= limits.max_cloned_voices:
        raise ApiError(
            403,
            f"Your plan allows {limits.max_cloned_voices} voices made from recordings; delete one first.",
            "plan_limit_reached",
        )


def check_consent(consent: bool) -> None:
    if consent is not True:
        raise ApiError(
            400,
            f"consent: a voice from a recording needs your statement, as `consent: true`: {CONSENT_STATEMENT}",
            "consent_required",
            "consent",
        )


def check_retention(org: Organization, keep_upload: bool) -> None:
    if keep_upload and org.data_retention == Organization.Retention.ZERO:
        raise ApiError(
            400,
            "keep_upload: your organization keeps no data (zero retention), so the recording cannot be kept; "
            "send keep_upload false (the voice keeps only its encoding).",
            "invalid_value",
            "keep_upload",
        )


def count_attempt(org: Organization) -> None:
    """One cloned voice started, against the organization's rate; 429 with Retry-After over it."""
    usage = get_usage(
        None, group=GROUP, key=lambda group, request: f"org:{org.pk}", rate=settings.TTS_CLONE_RATE, increment=True
    )
    if usage and usage["should_limit"]:
        wait = max(1, int(usage["time_left"]))
        raise ApiError(
            429,
            f"Your organization may start {usage['limit']} voices from recordings per period "
            f"({settings.TTS_CLONE_RATE}). Retry in {wait} s.",
            "rate_limit_exceeded",
            headers={"Retry-After": str(wait)},
        )


def consent_record() -> dict:
    """The statement as shown, who made it (the key or the member acting) and when."""
    actor = audit.actor_of(actor_var.get()) if actor_var.get() is not None else audit.Actor("anonymous")
    return {
        "statement": CONSENT_STATEMENT,
        "by": {"type": actor.type, "id": actor.id, "label": actor.label},
        "at": timezone.now().isoformat(),
    }


def record_consent(voice: Voice) -> None:
    audit.record(voice.organization, "voice.consent", target=f"voice:{voice.id}", after=voice.consent)
