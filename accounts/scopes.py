"""What a key may do: scopes, `area:level` strings (OpenAI's restricted keys, Deepgram's scoped keys).
`write` includes `read`; an area whose routes only read (usage, billing, audit) has only `read`, so
a key lists what it allows (`usage:write`, once listed, is read as `usage:read`). Every /v1 route
names the scope it needs here, by the route's name and method, and `billing.policy` checks it once
for every call; a route missing from the table is refused to every key but one with every scope (a
test keeps the table complete).

Presets: `standard` (everything a tenant's application does: speech, jobs, voices, lexicons, usage
and billing, no management), `admin` (every scope), `speech` (speech only), `read_only` (reads of
the non-management areas).

Roles: what a member may do (`ROLES`), in the dashboard and through their own keys: owners and
admins every scope; a member speaks, runs jobs and reads the rest of the non-management areas (the
dashboard shows them voices and lexicons without letting them change them). A member's own key is
bounded by the member's role at each request (`accounts.grants.effective_scopes`)."""

from __future__ import annotations

from collections.abc import Iterable

AREAS = {
    "speech": "make speech: POST /v1/audio/speech, WebSocket streaming and its tickets",
    "jobs": "asynchronous jobs: create and cancel (write), read, their audio and captions",
    "voices": "the organization's voices and previews",
    "lexicons": "pronunciation lexicons",
    "usage": "usage reports",
    "billing": "the subscription and its plan",
    "keys": "API keys: list (read), create and revoke (write)",
    "webhooks": "webhook endpoints, their deliveries and the signing secrets: read; change, rotate, redeliver (write)",
    "organization": "the organization's settings: IP allowlist, data retention, single sign-on, second factors",
    "audit": "the audit log",
    "tokens": "short-lived client tokens",
}
LEVELS = ("read", "write")
MANAGEMENT = ("keys", "webhooks", "organization", "audit", "tokens")
READ_ONLY = ("usage", "billing", "audit")  # areas whose routes only read: no `write` level


def top(area: str) -> str:
    """The area's highest scope: `area:write`, or `area:read` where the area only reads."""
    return f"{area}:{'read' if area in READ_ONLY else 'write'}"


ALL = frozenset(top(area) for area in AREAS)
STANDARD = frozenset(top(area) for area in AREAS if area not in MANAGEMENT)
PRESETS: dict[str, frozenset[str]] = {
    "admin": ALL,
    "standard": STANDARD,
    "speech": frozenset({"speech:write"}),
    "read_only": frozenset(f"{area}:read" for area in AREAS if area not in MANAGEMENT),
}

MEMBER = frozenset({"speech:write", "jobs:write"}) | frozenset(
    f"{area}:read" for area in AREAS if area not in MANAGEMENT and area not in ("speech", "jobs")
)
ROLES: dict[str, frozenset[str]] = {"owner": ALL, "admin": ALL, "member": MEMBER}
MAX_LISTED = 50  # entries of a request's `scopes`: there are 22 scopes and 4 presets

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# Route name → area; the level comes from the method (GET/HEAD read, anything else write), except
# where a route says `area:level` itself. None: no scope needed (the public model lists).
ROUTES: dict[str, str | None] = {
    "speech": "speech",
    "stream-ticket": "speech:write",
    "voices": "voices",
    "audio-voices": "voices",
    "audio-voice": "voices",
    "audio-voice-preview": "voices:read",
    "audio-models": None,
    "models": None,
    "model": None,
    "jobs": "jobs",
    "job": "jobs",
    "job-audio": "jobs",
    "job-captions": "jobs",
    "job-cancel": "jobs",
    "job-stream": "jobs",
    "lexicons": "lexicons",
    "lexicon": "lexicons",
    "keys": "keys",
    "key": "keys",
    "key-rotate": "keys:write",
    "webhook-secret": "webhooks:read",
    "webhook-endpoint": "webhooks",
    "webhook-secret-rotate": "webhooks:write",
    "webhook-endpoints": "webhooks",
    "webhook-endpoint-item": "webhooks",
    "webhook-endpoint-rotate": "webhooks:write",
    "webhook-endpoint-test": "webhooks:write",
    "webhook-endpoint-deliveries": "webhooks:read",
    "webhook-delivery": "webhooks:read",
    "webhook-delivery-redeliver": "webhooks:write",
    "ip-allowlist": "organization",
    "data-retention": "organization",
    "sso": "organization",
    "sso-verify": "organization:write",
    "require-mfa": "organization",
    "speech-defaults": "organization",
    "voice-aliases": "organization",
    "browser-origins": "organization",
    "usage": "usage",
    "subscription": "billing",
    "audit-logs": "audit",
    "tokens": "tokens",
    # ElevenLabs' wire (/elevenlabs/v1/...): the same areas.
    "el-tts": "speech:write",
    "el-voices": "voices:read",
    "el-voice": "voices:read",
    "el-models": None,
    "el-user": "billing:read",
    "el-subscription": "billing:read",
}
WEBSOCKET = "speech:write"  # speaking over /v1/audio/speech/stream, at connection and each utterance


def needed(route: str | None, method: str) -> str | None:
    """The scope a call to this route needs; `admin`'s keys alone reach an unlisted route."""
    if route not in ROUTES:
        return "keys:write"  # unlisted: treated as management
    area = ROUTES[route]
    if area is None or ":" in area:
        return area
    if area in READ_ONLY:  # its routes only read; another method is the view's 405, not a scope's 403
        return f"{area}:read"
    return f"{area}:{'read' if method.upper() in READ_METHODS else 'write'}"


def allows(granted: Iterable[str], scope: str) -> bool:
    area, _, level = scope.partition(":")
    granted = set(granted)
    return scope in granted or (level == "read" and f"{area}:write" in granted)


def parse(values: object) -> frozenset[str]:
    """A request's `scopes`: a list of `area:level` strings or preset names; ValueError says
    which value is wrong and what is allowed."""
    if not isinstance(values, list) or not values:
        raise ValueError("scopes must be a non-empty list of 'area:level' strings or preset names.")
    if len(values) > MAX_LISTED:
        raise ValueError(f"scopes holds at most {MAX_LISTED} entries.")
    scopes: set[str] = set()
    for value in values:
        if not isinstance(value, str):
            raise ValueError("Each scope is a string such as 'speech:write'.")
        if value in PRESETS:
            scopes |= PRESETS[value]
            continue
        area, colon, level = value.partition(":")
        if area not in AREAS or not colon or level not in LEVELS:
            areas, presets = ", ".join(AREAS), ", ".join(PRESETS)
            raise ValueError(
                f"Unknown scope '{value}': use 'area:read' or 'area:write' with an area of {areas}, "
                f"or a preset ({presets})."
            )
        scopes.add(top(area) if area in READ_ONLY else value)  # `usage:write`: what it allows, `usage:read`
    return normalized(scopes)


def for_role(role: str | None) -> frozenset[str]:
    """What a member of this role may do; nothing for no role (not a member)."""
    return ROLES.get(role or "", frozenset())


def bounded(granted: Iterable[str], ceiling: Iterable[str]) -> frozenset[str]:
    """The scopes of `granted` that `ceiling` allows (write narrowed to read where only read is)."""
    ceiling = frozenset(ceiling)
    kept = {s for s in granted if allows(ceiling, s)}
    kept |= {s.replace(":write", ":read") for s in granted if s.endswith(":write") and s not in kept}
    return normalized(s for s in kept if allows(ceiling, s))


def normalized(scopes: Iterable[str]) -> frozenset[str]:
    """`area:read` dropped where `area:write` is there (write includes read)."""
    scopes = set(scopes)
    return frozenset(s for s in scopes if not (s.endswith(":read") and s.replace(":read", ":write") in scopes))


def preset_of(scopes: Iterable[str]) -> str:
    """The preset these scopes are, or "restricted"."""
    scopes = frozenset(scopes)
    return next((name for name, preset in PRESETS.items() if preset == scopes), "restricted")
