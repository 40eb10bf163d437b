"""The address a key's last use is recorded with goes into PostgreSQL's inet column: what a proxy
passes that is not an IP address (a host name) is recorded as unknown, an IPv6 zone id dropped, never an
error in the request's authentication."""

from __future__ import annotations

import pytest

from accounts.models import valid_address


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8::1", "2001:db8::1"),
        ("fe80::1%eth0", "fe80::1"),
        ("proxy.internal", None),
        ("", None),
        (None, None),
    ],
)
def test_only_an_ip_address_is_kept(given, kept):
    assert valid_address(given) == kept
