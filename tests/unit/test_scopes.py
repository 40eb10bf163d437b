"""Scopes and IP allowlists as values: parsing what a request gives, what a scope allows, which
scope every /v1 route needs (the table must name every route: an unlisted one would be refused to
all but admin keys)."""

from __future__ import annotations

import pytest

from accounts import scopes
from accounts.network import parse_networks, permits
from tts_saas.urls import eleven, v1


def test_every_v1_route_names_its_scope():
    names = {pattern.name for pattern in v1 + eleven if pattern.name not in ("openapi", "api-docs", None)}
    assert names - scopes.ROUTES.keys() == set()
    assert scopes.ROUTES.keys() == names


@pytest.mark.parametrize(
    ("route", "method", "scope"),
    [
        ("speech", "POST", "speech:write"),
        ("jobs", "GET", "jobs:read"),
        ("jobs", "POST", "jobs:write"),
        ("job-cancel", "POST", "jobs:write"),
        ("key", "DELETE", "keys:write"),
        ("webhook-secret", "GET", "webhooks:read"),
        ("stream-ticket", "POST", "speech:write"),
        ("models", "GET", None),
        ("usage", "GET", "usage:read"),
        ("usage", "POST", "usage:read"),  # it only reads: another method is the view's 405
        ("subscription", "GET", "billing:read"),
        ("audit-logs", "GET", "audit:read"),
        ("no-such-route", "GET", "keys:write"),
    ],
)
def test_the_scope_a_route_needs(route, method, scope):
    assert scopes.needed(route, method) == scope


def test_write_includes_read_and_nothing_else():
    assert scopes.allows({"jobs:write"}, "jobs:read")
    assert not scopes.allows({"jobs:read"}, "jobs:write")
    assert not scopes.allows({"jobs:write"}, "speech:read")


def test_parsing_presets_and_scopes():
    assert scopes.parse(["speech:write", "jobs:read", "jobs:write"]) == {"speech:write", "jobs:write"}
    # An area whose routes only read has no write level: named by what it allows.
    assert scopes.parse(["usage:write", "billing:read"]) == {"usage:read", "billing:read"}
    assert "usage:read" in scopes.STANDARD and "billing:read" in scopes.STANDARD
    assert not any(scope.split(":")[0] in scopes.READ_ONLY and scope.endswith(":write") for scope in scopes.ALL)
    assert scopes.parse(["admin"]) == scopes.ALL
    assert scopes.preset_of(scopes.parse(["standard"])) == "standard"
    assert scopes.preset_of({"speech:write", "usage:read"}) == "restricted"
    for bad in (["voice"], ["speech:delete"], ["billing:"], [7], [], "speech:write"):
        with pytest.raises(ValueError):
            scopes.parse(bad)


def test_networks_are_canonical_and_checked():
    assert parse_networks(["10.1.2.3/8", " 203.0.113.7 ", "2001:DB8::/32", "10.0.0.0/8"]) == [
        "10.0.0.0/8",
        "203.0.113.7/32",
        "2001:db8::/32",
    ]
    for bad in (["10.0.0.300"], ["example.com"], "10.0.0.0/8", [None], ["::/129"]):
        with pytest.raises(ValueError):
            parse_networks(bad)
    assert permits([], "198.51.100.1") and permits([], None)
    assert permits(["203.0.113.0/24"], "203.0.113.9") and permits(["203.0.113.0/24"], "::ffff:203.0.113.9")
    assert not permits(["203.0.113.0/24"], "203.0.114.1")
    assert not permits(["203.0.113.0/24"], None) and not permits(["203.0.113.0/24"], "unix-socket")
    assert permits(["2001:db8::/32"], "2001:db8::1") and not permits(["2001:db8::/32"], "2001:db9::1")
