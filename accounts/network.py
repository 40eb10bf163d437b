"""IP allowlists: CIDR networks, IPv4 and IPv6, per organization and per key. The client's address
is the socket's peer as the server saw it: uvicorn replaces it with the one in `X-Forwarded-For`
only when the peer is one of the trusted proxies named in `FORWARDED_ALLOW_IPS` (its
`--forwarded-allow-ips`; the deployment files and `scripts/run` trust none by default), so a client
cannot choose its own address with a header."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

MAX_NETWORKS = 100


def parse_networks(values: object) -> list[str]:
    """A request's allowlist as canonical networks (`10.0.0.0/8`, `2001:db8::/32`; a bare address
    is its /32 or /128); ValueError names the first entry that is not one."""
    if not isinstance(values, list):
        raise ValueError("allowed_ips must be a list of addresses or CIDR networks.")
    if len(values) > MAX_NETWORKS:
        raise ValueError(f"allowed_ips holds at most {MAX_NETWORKS} networks.")
    networks: list[str] = []
    for value in values:
        try:
            if not isinstance(value, str):
                raise ValueError
            network = ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise ValueError(f"'{value}' is not an IP address or CIDR network (e.g. 203.0.113.0/24).") from None
        if str(network) not in networks:
            networks.append(str(network))
    return networks


def permits(networks: Iterable[str], address: str | None) -> bool:
    """Whether `address` is in one of `networks`; an empty allowlist permits every address, an
    unknown address (no peer) none."""
    networks = list(networks)
    if not networks:
        return True
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:203.0.113.7 is 203.0.113.7
    return any(ip in ipaddress.ip_network(network) for network in networks)
