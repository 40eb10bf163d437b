"""Rows for tests, with sensible defaults: `make_job(org, status=..., ...)`, `own_plan(org, ...)`."""

from __future__ import annotations

from dataclasses import asdict

from billing.limits import subscription_for
from inference.chattts.params import ChatTTSParams
from synthesis.models import Job


def make_job(org, **overrides) -> Job:
    """A job of `org` as the API would have accepted it (queued, one segment, billed for its
    input); `overrides` set any field, e.g. status=Job.Status.RUNNING, created_at=..."""
    text = overrides.pop("input", "Hello from a test.")
    fields = {
        "organization": org,
        "status": Job.Status.QUEUED,
        "model": "chattts",
        "voice": "alloy",
        "response_format": "mp3",
        "input": text,
        "segments": [text],
        "params": asdict(ChatTTSParams(voice_seed=1, seed=1)),
        "characters": len(text),
    }
    fields.update(overrides)
    return Job.objects.create(**fields)


def own_plan(org, slug: str, **fields) -> None:
    """Move `org` to a copy of its plan with `fields` changed (plan limits that a subscription
    cannot override, e.g. max_custom_voices, allowed_formats)."""
    sub = subscription_for(org)
    plan = sub.plan
    plan.pk, plan.slug = None, slug
    for name, value in fields.items():
        setattr(plan, name, value)
    plan.save()
    sub.plan = plan
    sub.save()
