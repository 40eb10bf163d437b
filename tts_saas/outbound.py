"""The one guard for every URL the server fetches on a tenant's word: job callbacks, the
organization's event endpoint (usage alerts), test events and redeliveries (synthesis.service
.callbacks and .deliveries, over httpcore), the SSO issuer checked when it is saved
(accounts.sso_connections) and the provider's discovery, token, userinfo and JWKS URLs that
django-allauth fetches (accounts.sso.ProviderSession, over requests).

A tenant chooses these URLs, so the server must not become a way into the operator's network:
every address a name resolves to must be public (`is_public`: IPv6 forms that carry an IPv4
address are judged by it, or refused), unless the caller allows private targets (the settings
TTS_CALLBACK_ALLOW_PRIVATE and TTS_SSO_ALLOW_PRIVATE: tests, a receiver on the LAN). The check is
made when connecting, and the connection goes to the very address checked: a second DNS lookup
could answer differently (DNS rebinding). Neither client follows redirects (a redirect could lead
anywhere); the callers refuse them.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import time
import typing
from dataclasses import dataclass

import httpcore
import httpx
from requests.adapters import HTTPAdapter
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError

# The reasons a refusal records: generic on purpose (tenants see them in the delivery log).
REFUSED_TARGET = "refused target"
UNRESOLVED = "host did not resolve"

# IPv6 forms that reach an IPv4 address: judged by that address (NAT64's well-known prefix, which
# DNS64 answers with on IPv6-only networks, and the SIIT-translated form) ...
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
# ... or refused outright: the deprecated IPv4-compatible form, NAT64's local-use prefix (its
# embedding depends on the operator's prefix length) and Teredo (a client address, inverted).
_REFUSED = (
    ipaddress.ip_network("::/96"),
    ipaddress.ip_network("64:ff9b:1::/48"),
    ipaddress.ip_network("2001::/32"),
)


def is_public(address: str) -> bool:
    """Whether the server may connect to `address`: a global unicast address. An IPv6 address that
    carries an IPv4 one (IPv4-mapped or translated, 6to4, NAT64) is judged by the IPv4 address it
    reaches; IPv4-compatible, local-use NAT64 and Teredo addresses are refused."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        if any(ip in network for network in _REFUSED):
            return False
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and (ip in _NAT64 or ip in _TRANSLATED):
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            return is_public(str(inner))
    return ip.is_global and not ip.is_multicast


class RefusedTarget(Exception):
    """A URL the server may not fetch: `message` for whoever gave it, `reason` for a record."""

    def __init__(self, message: str, reason: str = REFUSED_TARGET):
        super().__init__(message)
        self.message = message
        self.reason = reason


CALLBACK_SWITCH = "TTS_CALLBACK_ALLOW_PRIVATE"


def addresses(
    host: str, port: int, allow_private: bool, field: str = "The URL", switch: str = CALLBACK_SWITCH
) -> tuple[str, ...]:
    """The addresses `host` resolves to, in the resolver's order, once each; RefusedTarget when
    there are none, or (unless `allow_private`) when any is not public: a name that answers with
    one public and one private address would otherwise pass on one and be used on the other. The
    refusal names the operator's `switch` that allows private targets (a receiver on the LAN)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        infos = []
    found = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if not found:
        raise RefusedTarget(f"{field} host {host} does not resolve.", UNRESOLVED)
    if not allow_private and not all(is_public(a) for a in found):
        raise RefusedTarget(
            f"{field} must point at a public address (not private, loopback or shared). "
            f"For a receiver on your own network or this machine, the service's operator can allow "
            f"private addresses with {switch}=1."
        )
    return found


@dataclass(frozen=True)
class Target:
    url: httpx.URL
    addresses: tuple[str, ...]  # the checked IP addresses, the only ones to connect to


def without_credentials(url: str) -> str:
    """A target URL as logs and pages show it: without the user and password it may carry."""
    try:
        return str(httpx.URL(url).copy_with(username=None, password=None))
    except (httpx.InvalidURL, ValueError, TypeError):
        return url[:200]


def parse(url: str, field: str = "The URL") -> httpx.URL:
    """An http(s) URL with a host, or RefusedTarget naming `field`."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise RefusedTarget(f"{field} must be an http(s) URL.")
    return parsed


def resolve(url: str, allow_private: bool, field: str = "The URL") -> Target:
    """The URL with the addresses to connect to (for PinnedBackend); RefusedTarget, its message
    naming `field` as the caller sent it, when there is none we may use."""
    parsed = parse(url, field)
    # The ASCII (IDNA) form: what DNS is asked. Numeric forms (2130706433, 0x7f.1) resolve here too.
    host = parsed.raw_host.decode("ascii")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return Target(parsed, addresses(host, port, allow_private, field))


# httpcore: a connection pinned to the checked addresses, within one deadline ----------------------


def _time_left(deadline: float, timeout: float | None, error: type[Exception]) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the attempt ran out of time")
    return left if timeout is None else min(left, timeout)


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the attempt's deadline, so a receiver that
    answers a byte at a time cannot hold a thread past it."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: float):
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(self._deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(self._deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: typing.Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        # The TLS handshake's timeout is one overall deadline in CPython's ssl module.
        left = _time_left(self._deadline, timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, left), self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses (the first that answers, in the resolver's order) whatever
    host the URL names: no second DNS lookup. The URL keeps its host, so the Host header, SNI and
    the certificate check are the receiver's name."""

    def __init__(self, addresses: tuple[str, ...], deadline: float):
        self._addresses = addresses
        self._deadline = deadline
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        failure: Exception = httpcore.ConnectError("no address to connect to")
        for address in self._addresses:
            left = _time_left(self._deadline, timeout, httpcore.ConnectTimeout)
            try:
                stream = self._backend.connect_tcp(address, port, left, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc  # e.g. an IPv6 address on a host without IPv6: try the next
                continue
            return DeadlineStream(stream, self._deadline)
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: typing.Iterable[typing.Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("outbound requests go over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


# requests (urllib3 2.x): connections that resolve, check and connect to the checked address -------


class GuardedHTTPConnection(HTTPConnection):
    """urllib3's connection, resolving its host itself: every address checked, the socket opened to
    one of them. `host` is untouched, so the Host header, SNI and the certificate are the name's.
    A refused target raises RefusedTarget, which neither urllib3 nor requests catches or retries."""

    def __init__(self, *args: typing.Any, allow_private: bool = False, **kwargs: typing.Any):
        super().__init__(*args, **kwargs)
        self.allow_private = allow_private

    def _new_conn(self) -> socket.socket:
        host = self._dns_host.strip("[]")
        try:
            checked = addresses(host, self.port, self.allow_private, switch="TTS_SSO_ALLOW_PRIVATE")
        except RefusedTarget as exc:
            if exc.reason != UNRESOLVED:
                raise
            raise NameResolutionError(self.host, self, socket.gaierror(socket.EAI_NONAME, exc.message)) from exc
        # urllib3's default timeout is a sentinel: the socket module's default then.
        timeout = self.timeout if isinstance(self.timeout, int | float) else socket.getdefaulttimeout()
        failure: OSError = OSError("no address to connect to")
        for address in checked:
            try:
                sock = socket.create_connection((address, self.port), timeout, self.source_address)
            except OSError as exc:
                failure = exc  # e.g. an IPv6 address on a host without IPv6: try the next
                continue
            for option in self.socket_options or ():
                sock.setsockopt(*option)
            sys.audit("http.client.connect", self, self.host, self.port)
            return sock
        if isinstance(failure, TimeoutError):
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out. (connect timeout={timeout})")
        raise NewConnectionError(self, f"Failed to establish a new connection: {failure}")


class GuardedHTTPSConnection(GuardedHTTPConnection, HTTPSConnection):
    """The same over TLS: HTTPSConnection.connect opens its socket with `_new_conn` above."""


class _GuardedHTTPPool(HTTPConnectionPool):
    ConnectionCls = GuardedHTTPConnection


class _GuardedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = GuardedHTTPSConnection


class _GuardedPoolManager(PoolManager):
    """Pools of guarded connections; each connection told whether private targets are allowed."""

    def __init__(self, allow_private: bool, **kwargs: typing.Any):
        super().__init__(**kwargs)
        self.allow_private = allow_private
        self.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}

    def _new_pool(
        self, scheme: str, host: str, port: int, request_context: dict[str, typing.Any] | None = None
    ) -> HTTPConnectionPool:
        # After the pool's key is made (which knows no such field): the pool passes it to each connection.
        context = dict(self.connection_pool_kw if request_context is None else request_context)
        context["allow_private"] = self.allow_private
        return super()._new_pool(scheme, host, port, context)


class GuardedAdapter(HTTPAdapter):
    """A requests adapter whose every connection goes through the guard (mount it for http:// and
    https://). Proxies are refused: a proxy would resolve the name itself."""

    __attrs__ = [*HTTPAdapter.__attrs__, "allow_private"]

    def __init__(self, allow_private: bool, **kwargs: typing.Any):
        self.allow_private = allow_private  # before HTTPAdapter's init: it makes the pool manager
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: typing.Any) -> None:
        self._pool_connections, self._pool_maxsize, self._pool_block = connections, maxsize, block
        self.poolmanager = _GuardedPoolManager(
            self.allow_private, num_pools=connections, maxsize=maxsize, block=block, **pool_kwargs
        )

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: typing.Any) -> typing.Any:
        raise RefusedTarget("Outbound requests do not go through a proxy.")
