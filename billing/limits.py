"""An organization's effective limits: its plan, with per-organization overrides applied."""

from __future__ import annotations

from dataclasses import dataclass

from accounts.models import Organization

from .models import Plan, Subscription, default_plan


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


def subscription_for(org: Organization) -> Subscription:
    try:
        return Subscription.objects.select_related("plan").get(organization=org)
    except Subscription.DoesNotExist:
        sub, _ = Subscription.objects.get_or_create(organization=org, defaults={"plan": default_plan()})
        return sub


def limits_for(org: Organization) -> Limits:
    sub = subscription_for(org)
    plan: Plan = sub.plan

    def pick(name: str) -> int:
        override = getattr(sub, name)
        return getattr(plan, name) if override is None else override

    return Limits(
        plan=plan.slug,
        monthly_characters=pick("monthly_characters"),
        requests_per_minute=pick("requests_per_minute"),
        concurrent_jobs=pick("concurrent_jobs"),
        max_input_chars=pick("max_input_chars"),
        allowed_formats=tuple(plan.allowed_formats),
        allowed_voices=tuple(plan.allowed_voices),
        queue_priority=plan.queue_priority,
    )
