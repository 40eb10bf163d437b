"""Browser origins as values: `scheme://host[:port]` as a browser sends it in `Origin`. Parsed
alike by the API (`PUT /v1/organization/browser_origins`), the dashboard's Settings and the admin
console (the organization model's check, `accounts.validation`)."""

from __future__ import annotations

from urllib.parse import urlsplit

MAX_ORIGINS = 20


def parse_origin(value: str) -> str:
    """`scheme://host[:port]` as a browser sends it in `Origin` (lower case, no path); ValueError
    saying what is wrong."""
    text = value.strip().rstrip("/").lower()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"'{value}' is not an origin: write https://host or https://host:port.")
    if parts.path or parts.query or parts.fragment or parts.username or parts.password:
        raise ValueError(f"'{value}' has more than an origin: write only https://host[:port], no path.")
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise ValueError(f"'{value}' has a port that is not a number.") from None
    return text


def parse_origins(values: list[str]) -> list[str]:
    origins = list(dict.fromkeys(parse_origin(v) for v in values if v.strip()))
    if len(origins) > MAX_ORIGINS:
        raise ValueError(f"At most {MAX_ORIGINS} origins.")
    return origins
