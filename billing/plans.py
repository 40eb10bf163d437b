"""The plans a new installation starts with (seeded by a data migration; editable in the admin)."""

from __future__ import annotations

# Characters billed per character of input, by model, from what a second of its audio costs to make,
# rounded to the steps other speech APIs bill their models at (a lighter model at half, a larger,
# "HD" one at twice the standard, as OpenAI's tts-1 and tts-1-hd): Kokoro (82 M parameters, about
# 1/11 of ChatTTS's compute per second of audio: docs/benchmarks.md) costs a fraction of ChatTTS to
# run, billed at half; VoxCPM2 (2 B parameters, about 25 times Kokoro's compute, so more than twice
# ChatTTS's) at twice. The steps stay coarse on purpose: a model is not priced at its compute alone.
MODEL_WEIGHTS = {"chattts": 1.0, "kokoro": 0.5, "voxcpm": 2.0}

DEFAULT_PLANS = [
    {
        "slug": "free",
        "name": "Free",
        "monthly_characters": 10_000,
        "requests_per_minute": 10,
        "concurrent_jobs": 1,
        "max_input_chars": 1_000,
        "max_job_chars": 20_000,
        "max_custom_voices": 3,
        "max_cloned_voices": 3,
        "max_lexicon_entries": 100,
        "queue_priority": 6,
        "model_weights": MODEL_WEIGHTS,
        "is_default": True,
        "monthly_price_cents": 0,
    },
    {
        "slug": "pro",
        "name": "Pro",
        "monthly_characters": 500_000,
        "requests_per_minute": 120,
        "concurrent_jobs": 4,
        "max_input_chars": 4_096,
        "max_job_chars": 200_000,
        "max_custom_voices": 30,
        "max_cloned_voices": 30,
        "max_lexicon_entries": 2_000,
        "queue_priority": 3,
        "model_weights": MODEL_WEIGHTS,
        "is_default": False,
        "monthly_price_cents": 2_200,
        "overage_cents_per_1k": 3,  # $30 per million characters beyond the 500,000 included
    },
    {
        "slug": "enterprise",
        "name": "Enterprise",
        "monthly_characters": 10_000_000,
        "requests_per_minute": 600,
        "concurrent_jobs": 16,
        "max_input_chars": 4_096,
        "max_job_chars": 200_000,
        "max_custom_voices": 300,
        "max_cloned_voices": 300,
        "max_lexicon_entries": 20_000,
        "queue_priority": 0,
        "model_weights": MODEL_WEIGHTS,
        "is_default": False,
        "monthly_price_cents": 33_000,
        "overage_cents_per_1k": 2,
    },
]


def ensure_plans(plan_model) -> None:
    """Create the default plans that do not exist yet; never changes existing ones. `plan_model`
    may be a migration's historical model, which lacks the fields later migrations add."""
    fields = {f.name for f in plan_model._meta.get_fields()}
    for spec in DEFAULT_PLANS:
        plan_model.objects.get_or_create(slug=spec["slug"], defaults={k: v for k, v in spec.items() if k in fields})


def add_overage_terms(plan_model) -> None:
    """Give the seeded paid plans their overage price where an operator has not set one."""
    for spec in DEFAULT_PLANS:
        if spec.get("overage_cents_per_1k") is not None:
            plan_model.objects.filter(slug=spec["slug"], overage_cents_per_1k__isnull=True).update(
                overage_cents_per_1k=spec["overage_cents_per_1k"]
            )


def add_library_limits(plan_model) -> None:
    """Give the seeded plans their job, voice and lexicon limits where an operator has not changed
    them from the fields' defaults."""
    defaults = {
        f.name: f.default
        for f in plan_model._meta.get_fields()
        if f.name.startswith("max_") and f.name != "max_input_chars"
    }
    for spec in DEFAULT_PLANS:
        for name, default in defaults.items():
            if name in spec:
                plan_model.objects.filter(slug=spec["slug"], **{name: default}).update(**{name: spec[name]})


def add_model_weights(plan_model) -> None:
    """Give the seeded plans their models' price weights where an operator has set none."""
    for spec in DEFAULT_PLANS:
        plan_model.objects.filter(slug=spec["slug"], model_weights={}).update(model_weights=spec["model_weights"])


def replace_model_weights(plan_model, before: dict[str, float], after: dict[str, float]) -> None:
    """Give the seeded plans the weights `after` where they still have the weights `before` they were
    seeded with: a plan whose weights an operator changed (or emptied: every model 1) keeps them.
    Compared as numbers (1 and 1.0 alike), whatever the database's JSON makes of them."""
    for spec in DEFAULT_PLANS:
        for plan in plan_model.objects.filter(slug=spec["slug"]):
            weights = plan.model_weights
            if isinstance(weights, dict) and weights == before:
                plan.model_weights = dict(after)
                plan.save(update_fields=["model_weights"])
