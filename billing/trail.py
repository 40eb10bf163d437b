"""Plan and billing-term changes in the audit log: a subscription's plan, its per-organization
overrides and its spending limit, before and after, whoever changed them (a member on the billing
page, staff in the admin console, Stripe's webhooks: "stripe")."""

from __future__ import annotations

from django.db.models.signals import post_save, pre_save
from django.dispatch import receiver

from accounts import audit

from .models import Subscription

WATCHED = ("monthly_characters", "requests_per_minute", "concurrent_jobs", "max_input_chars", "spending_limit_cents")


def _terms(subscription: Subscription) -> dict:
    return {field: getattr(subscription, field) for field in WATCHED}


@receiver(pre_save, sender=Subscription)
def _remember(sender, instance: Subscription, **kwargs) -> None:
    stored = Subscription.objects.filter(pk=instance.pk).select_related("plan").first() if instance.pk else None
    instance._stored = (stored.plan.slug, _terms(stored)) if stored is not None else None  # type: ignore[attr-defined]


@receiver(post_save, sender=Subscription)
def _changed(sender, instance: Subscription, created: bool, **kwargs) -> None:
    stored = getattr(instance, "_stored", None)
    if created or stored is None:
        return
    plan, terms = stored
    org = instance.organization
    audit.record_changes(org, "billing.plan_changed", {"plan": plan}, {"plan": instance.plan.slug})
    audit.record_changes(org, "billing.limits_changed", terms, _terms(instance))
