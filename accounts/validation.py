"""What an organization's and a key's settings must be, for every writer that validates a model
(`full_clean`: the admin console does): the API's own parsers (`network.parse_networks`,
`scopes.parse`) and the bounds of a key's limits, so nothing typed in the console is something the
API would have refused. Each check normalizes its field as the API stores it, or raises
ValueError saying what is wrong. The models run them after Django's own field checks
(`clean_fields`, which knows the fields a form leaves out); the checks that need the upper layers
(a default model and voice, an event endpoint's address) are the console's (`dashboard.admin`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from django.core.exceptions import ValidationError

from . import scopes as key_scopes
from .network import parse_networks
from .origin_names import parse_origins

Check = Callable[[Any], None]

# A key's own limits, as the API (`accounts.serializers`: cap_field, rate_field) and the console take them.
KEY_CAP = (1, 10**12)
KEY_RATE = (1, 1_000_000)


def clean_fields(
    instance, exclude: Iterable[str] | None, django_checks: Callable[..., None], checks: dict[str, Check]
) -> None:
    """Django's checks of each field (`django_checks`, the model's own `clean_fields`), then
    `checks` on the fields they passed and the caller validates; one ValidationError for all."""
    errors: dict[str, list] = {}
    try:
        django_checks(exclude)
    except ValidationError as exc:
        errors = exc.update_error_dict(errors)
    skipped = set(exclude or ())
    for field, check in checks.items():
        if field in skipped or field in errors:
            continue
        try:
            check(instance)
        except ValueError as exc:
            errors[field] = [ValidationError(str(exc), code="refused")]  # a code forms do not reword
    if errors:
        raise ValidationError(errors)


def bounded(field: str, low: int, high: int | None = None) -> Check:
    """An optional number from `low` (to `high`)."""

    def check(instance) -> None:
        value = getattr(instance, field)
        if value is not None and (value < low or (high is not None and value > high)):
            upper = f" and at most {high:,}" if high is not None else ""
            raise ValueError(f"At least {low:,}{upper}.")

    return check


def _networks(instance) -> None:
    instance.allowed_ips = parse_networks(instance.allowed_ips)


def _scopes(key) -> None:
    scopes = key_scopes.parse(key.scopes)
    key.scopes, key.kind = sorted(scopes), key.kind_of(scopes)  # the kind follows the scopes, as in the API


# As `PUT /v1/organization/ip_allowlist` and `POST/PATCH /v1/keys` parse them.
def _origins(instance) -> None:
    instance.browser_origins = parse_origins([str(v) for v in instance.browser_origins or []])


ORGANIZATION: dict[str, Check] = {"allowed_ips": _networks, "browser_origins": _origins}
API_KEY: dict[str, Check] = {
    "scopes": _scopes,
    "allowed_ips": _networks,
    "monthly_character_cap": bounded("monthly_character_cap", *KEY_CAP),
    "requests_per_minute": bounded("requests_per_minute", *KEY_RATE),
}
