"""What a plan and an organization's overrides of it must be, for every writer that validates them
(`full_clean`: the admin console): numbers the limits can work with, and lists that name what the
API knows — the engines' ids (`inference.registry`), their built-in voices, a weight per engine.
A value of the wrong shape would otherwise fail every request of the plan's organizations (the
limits are read on each). The codec names of `allowed_formats` are checked where the codecs are
known (`dashboard.admin`, over synthesis's formats); here, that it is a list of names."""

from __future__ import annotations

import math
from collections.abc import Callable

from accounts.validation import Check, bounded
from inference.registry import SPECS

QUEUE_PRIORITIES = (0, 9)  # Celery's priorities on a Redis queue: 0 first


def names(field: str, known: Callable[[str], bool] | None = None, what: str = "") -> Check:
    """A list of distinct strings (each `known`, when given); stored without repeats."""

    def check(instance) -> None:
        value = getattr(instance, field)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ValueError('A JSON list of names, e.g. ["a", "b"]; empty: no restriction.')
        unknown = [v for v in value if known is not None and not known(v)]
        if unknown:
            raise ValueError(f"Not {what}: {', '.join(unknown)}.")
        setattr(instance, field, list(dict.fromkeys(value)))

    return check


def _weights(plan) -> None:
    weights = plan.model_weights
    if not isinstance(weights, dict):
        raise ValueError('A JSON object of a weight per model, e.g. {"kokoro": 0.5}; empty: every model 1.')
    for model, weight in weights.items():
        if model not in SPECS:
            raise ValueError(f"'{model}' is not a model id (one of {', '.join(SPECS)}).")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"The weight of '{model}' must be a number above 0.")


def _builtin(voice: str) -> bool:
    return any(spec.voice(voice) is not None for spec in SPECS.values())


PLAN: dict[str, Check] = {
    "monthly_characters": bounded("monthly_characters", 0),
    "requests_per_minute": bounded("requests_per_minute", 1),
    "concurrent_jobs": bounded("concurrent_jobs", 1),
    "max_input_chars": bounded("max_input_chars", 1),
    "max_job_chars": bounded("max_job_chars", 1),
    "queue_priority": bounded("queue_priority", *QUEUE_PRIORITIES),
    "allowed_formats": names("allowed_formats"),
    "allowed_voices": names("allowed_voices", _builtin, "built-in voices of any model"),
    "allowed_models": names("allowed_models", SPECS.__contains__, f"model ids (one of {', '.join(SPECS)})"),
    "model_weights": _weights,
}
# An organization's overrides of its plan's limits (empty: the plan's).
OVERRIDES: dict[str, Check] = {
    "monthly_characters": bounded("monthly_characters", 0),
    "requests_per_minute": bounded("requests_per_minute", 1),
    "concurrent_jobs": bounded("concurrent_jobs", 1),
    "max_input_chars": bounded("max_input_chars", 1),
}
