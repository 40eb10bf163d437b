"""An organization's effective limits: its plan, with per-organization overrides applied."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from django.conf import settings

from accounts.models import Organization
from tts_saas.errors import ApiError

from . import terms
from .models import Plan, Subscription, default_plan

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    plan: str
    monthly_characters: int
    requests_per_minute: int
    concurrent_jobs: int
    max_input_chars: int
    allowed_formats: tuple[str, ...]
    allowed_voices: tuple[str, ...]
    queue_priority: int
    # The characters reservations may reach this month: the included ones, or more where the plan
    # sells overage to this organization (up to its spending limit).
    quota_characters: int = 0
    spending_limit_cents: int | None = None
    has_overage: bool = False  # characters beyond the included ones are sold (up to the spending limit)
    max_job_chars: int = 20_000  # input of one asynchronous job
    max_custom_voices: int = 3
    max_cloned_voices: int = 3  # of those, made from a recording (0: the plan has no voice cloning)
    max_lexicon_entries: int = 100
    max_webhook_endpoints: int = 10  # the plan's, within the deployment's TTS_MAX_WEBHOOK_ENDPOINTS
    allowed_models: tuple[str, ...] = ()  # empty: every model served
    model_weights: dict[str, float] = field(default_factory=dict, hash=False, compare=False)

    def billed_characters(self, model: str, characters: int) -> int:
        """The characters a request of `characters` on `model` is billed: the plan's weight for the
        model (1 when it names none), rounded up, so a non-empty request is never free."""
        weight = float(self.model_weights.get(model, 1.0))
        return math.ceil(characters * weight - 1e-9) if characters else 0


def subscription_for(org: Organization) -> Subscription:
    try:
        return Subscription.objects.select_related("plan").get(organization=org)
    except Subscription.DoesNotExist:
        sub, _ = Subscription.objects.get_or_create(organization=org, defaults={"plan": default_plan()})
        return sub


def _names(plan: Plan, field: str) -> tuple[str, ...]:
    value = getattr(plan, field) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _unreadable(plan, field)
    return tuple(value)


def _weights(plan: Plan) -> dict[str, float]:
    value = plan.model_weights or {}
    if not isinstance(value, dict) or not all(
        isinstance(w, int | float) and not isinstance(w, bool) and w > 0 for w in value.values()
    ):
        raise _unreadable(plan, "model_weights")
    return dict(value)


def _unreadable(plan: Plan, field: str) -> ApiError:
    """A plan written with a value no form takes (a raw write, an old row): its organizations'
    requests are refused, plainly, never a 500, and the operator reads why in the log."""
    logger.error("plan %s: %s is not readable", plan.slug, field, extra={"plan": plan.slug, "field": field})
    return ApiError(
        503,
        f"Your plan ({plan.slug}) has a setting the service cannot read ({field}); the operator must correct it.",
        "plan_misconfigured",
    )


def limits_for(org: Organization) -> Limits:
    sub = subscription_for(org)
    plan: Plan = sub.plan

    def pick(name: str) -> int:
        override = getattr(sub, name)
        return getattr(plan, name) if override is None else override

    # Stripe bills the plan's included characters (its overage price's free tier is the plan's):
    # an operator's override of them applies only to organizations not billed through Stripe.
    included = plan.monthly_characters if terms.stripe_billed(sub) else pick("monthly_characters")
    overage = terms.overage_allowed(plan, sub)
    return Limits(
        plan=plan.slug,
        monthly_characters=included,
        requests_per_minute=pick("requests_per_minute"),
        concurrent_jobs=pick("concurrent_jobs"),
        max_input_chars=pick("max_input_chars"),
        allowed_formats=_names(plan, "allowed_formats"),
        allowed_voices=_names(plan, "allowed_voices"),
        queue_priority=plan.queue_priority,
        quota_characters=terms.ceiling(plan, sub, included),
        spending_limit_cents=sub.spending_limit_cents if overage else None,
        has_overage=overage,
        max_job_chars=max(plan.max_job_chars, pick("max_input_chars")),
        max_custom_voices=plan.max_custom_voices,
        max_cloned_voices=min(plan.max_cloned_voices, plan.max_custom_voices),
        max_lexicon_entries=plan.max_lexicon_entries,
        max_webhook_endpoints=min(plan.max_webhook_endpoints, settings.TTS_MAX_WEBHOOK_ENDPOINTS),
        allowed_models=_names(plan, "allowed_models"),
        model_weights=_weights(plan),
    )
