"""Identity services for tests: a real OpenID Connect provider and a small DNS server, both on 127.0.0.1.

`oidc_provider()` runs the `oidc_provider_mock` package's provider (Flask + Authlib) in a thread on a free
port. It is a real provider: discovery at `{issuer}/.well-known/openid-configuration`, RS256-signed id_tokens
checkable against `{issuer}/jwks`, the authorization-code grant, a token endpoint that takes
client_secret_post or client_secret_basic, and userinfo. Relying-party settings are lax by default: any
client_id with any non-empty secret, any redirect_uri, nonce optional, PKCE parameters ignored. Discovery
lists no `token_endpoint_auth_methods_supported`, so allauth posts the secret (client_secret_post). The
id_token's header has no `kid` (the JWKS holds one RSA key, with a kid)::

    with oidc_provider() as idp:
        idp.set_user("alice", email="alice@example.com", email_verified=True, groups=["admins"])
        # relying party: server_url=idp.issuer, any client_id/secret
        callback_url = authorize(session, authorization_url, "alice")  # ...?code=...&state=...

Claims set with `set_user` replace the user's claims. Standard claims (email, email_verified, name, ...) are
given only for the matching scope (`email`, `profile`, ...); other claims (`groups`) always, in both the
id_token and userinfo. A sub never set gets `{"email": sub}` when it signs in.

The provider's authorization page is a form with one text input `sub` and an "Authorize" button that POSTs
back to the same URL (query string included); no cookie, CSRF token or password. The answer is a 302 to
the redirect_uri with `code` and `state` (or `error`). Its HTML links a stylesheet on a CDN: in a browser,
call `stub_provider_stylesheet` first, or the failed load is a console error.

`dns_server()` answers TXT queries from a dict that a test may change while it runs.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import dns.resolver
import httpx
import oidc_provider_mock
import werkzeug.serving
from dnslib import QTYPE, RCODE, RR, TXT, DNSRecord
from dnslib.server import BaseResolver, DNSHandler, DNSLogger, DNSServer

if TYPE_CHECKING:
    import requests
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
    from playwright.sync_api import BrowserContext, Page

HOST = "127.0.0.1"


def _wait_port_closed(port: int, *, kind: int = socket.SOCK_STREAM, timeout: float = 5.0) -> None:
    """Until nothing listens on 127.0.0.1:`port` (TCP: connecting is refused; UDP: the port can be bound)."""
    deadline = time.monotonic() + timeout
    while True:
        with socket.socket(socket.AF_INET, kind) as probe:
            try:
                if kind == socket.SOCK_STREAM:
                    probe.settimeout(0.2)
                    probe.connect((HOST, port))
                else:
                    probe.bind((HOST, port))
                    return
            except ConnectionRefusedError:
                return
            except OSError:
                pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"127.0.0.1:{port} still in use {timeout}s after shutdown")
        time.sleep(0.05)


# --- OpenID Connect provider ----------------------------------------------------------------------------------


class _QuietRequestHandler(werkzeug.serving.WSGIRequestHandler):
    """Logs only server errors, not every request."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if isinstance(code, int) and code >= 500:
            super().log_request(code, size)


def _no_favicon(app: WSGIApplication) -> WSGIApplication:
    """Answer /favicon.ico with 204: the provider has none, and a browser's 404 for it is a console error."""

    def wsgi(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == "/favicon.ico":
            start_response("204 No Content", [])
            return []
        return app(environ, start_response)

    return wsgi


class OidcProvider:
    """The `oidc_provider_mock` provider, serving on 127.0.0.1 (a free port) from a thread until `close()`.

    `issuer` is `http://127.0.0.1:{port}`, the value to give a relying party as its server URL (allauth's
    `server_url`). The provider derives the issuer from the Host header of each request, so every party
    must reach it by this same address (not `localhost`), or the id_token's `iss` will not match.

    With `require_client_registration=True`, only clients from `register_client` are accepted, with their
    secret, redirect URIs and token endpoint auth method. With `require_nonce=True`, an authorization request
    without `nonce` fails.
    """

    def __init__(self, *, require_client_registration: bool = False, require_nonce: bool = False) -> None:
        app = oidc_provider_mock.app(
            require_client_registration=require_client_registration, require_nonce=require_nonce
        )
        self._server = werkzeug.serving.make_server(
            HOST, 0, _no_favicon(app), threaded=True, request_handler=_QuietRequestHandler
        )
        self.port: int = self._server.server_port
        self.issuer: str = f"http://{HOST}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="oidc-provider", daemon=True
        )
        self._thread.start()
        self._http = httpx.Client(base_url=self.issuer, timeout=10)
        try:
            self.configuration: dict[str, Any] = self._get_json("/.well-known/openid-configuration")
            if self.configuration["issuer"] != self.issuer:
                raise RuntimeError(f"provider announces issuer {self.configuration['issuer']!r}, not {self.issuer!r}")
        except BaseException:
            self.close()
            raise

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    @property
    def authorization_endpoint(self) -> str:
        return f"{self.issuer}/oauth2/authorize"

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/oauth2/token"

    @property
    def userinfo_endpoint(self) -> str:
        return f"{self.issuer}/userinfo"

    @property
    def jwks_uri(self) -> str:
        return f"{self.issuer}/jwks"

    def _get_json(self, path: str) -> dict[str, Any]:
        response = self._http.get(path)
        response.raise_for_status()
        return response.json()

    def set_user(self, sub: str, **claims: object) -> None:
        """Set (replace) the claims the provider gives for `sub` in the id_token and userinfo."""
        response = self._http.put(f"/users/{quote(sub, safe='')}", json=claims)
        if response.status_code != 204:
            raise RuntimeError(f"setting user {sub!r} failed: {response.status_code} {response.text}")

    def revoke_tokens(self, sub: str) -> None:
        """Revoke every access and refresh token issued for `sub` (userinfo then answers 400 access_denied)."""
        self._http.post(f"/users/{quote(sub, safe='')}/revoke-tokens").raise_for_status()

    def register_client(
        self, redirect_uris: list[str], token_endpoint_auth_method: str = "client_secret_post"
    ) -> tuple[str, str]:
        """Register a client (RFC 7591); returns its `(client_id, client_secret)`."""
        response = self._http.post(
            "/oauth2/clients",
            json={"redirect_uris": redirect_uris, "token_endpoint_auth_method": token_endpoint_auth_method},
        )
        response.raise_for_status()
        body = response.json()
        return body["client_id"], body["client_secret"]

    def close(self) -> None:
        """Stop serving, close the listening socket and wait until the port is closed."""
        self._http.close()
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5)
        self._server.server_close()
        _wait_port_closed(self.port)

    def __enter__(self) -> OidcProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@contextlib.contextmanager
def oidc_provider(*, require_client_registration: bool = False, require_nonce: bool = False) -> Iterator[OidcProvider]:
    """An `OidcProvider` for the duration of the block."""
    with OidcProvider(require_client_registration=require_client_registration, require_nonce=require_nonce) as idp:
        yield idp


def authorize(client: requests.Session | httpx.Client, authorize_url: str, sub: str) -> str:
    """Sign in as `sub` at the provider's authorization page, as a browser would, and return where the provider
    redirects (the relying party's callback with `code` and `state`, or with `error`) without following it.

    `authorize_url` is the provider's authorization endpoint with its query string (client_id, redirect_uri,
    response_type=code, scope, state, nonce...). An invalid client or redirect_uri gets an error page, not a
    redirect: that raises RuntimeError with the page.
    """

    def request(method: str, data: dict[str, str] | None = None) -> tuple[int, str, str]:
        answer: httpx.Response | requests.Response
        if isinstance(client, httpx.Client):
            answer = client.request(method, authorize_url, data=data, follow_redirects=False)
        else:
            answer = client.request(method, authorize_url, data=data, allow_redirects=False)
        return answer.status_code, answer.headers.get("location", ""), answer.text

    status, location, text = request("GET")
    if status in (302, 303) and location:
        return location
    if status != 200 or 'name="sub"' not in text:
        raise RuntimeError(f"authorization page answered {status}: {text[:2000]}")
    status, location, text = request("POST", {"sub": sub})
    if status not in (302, 303) or not location:
        raise RuntimeError(f"authorizing {sub!r} answered {status}: {text[:2000]}")
    return location


def stub_provider_stylesheet(target: Page | BrowserContext) -> None:
    """Answer the provider pages' CDN stylesheet with an empty one (no network here; a failed load would be a
    console error). Call it before the browser reaches the provider."""
    target.route(
        "https://cdn.jsdelivr.net/**",
        lambda route: route.fulfill(status=200, content_type="text/css", body=""),
    )


def sign_in_at_provider(page: Page, sub: str) -> None:
    """On the provider's authorization page: type `sub` and press Authorize. The provider then redirects the
    page to the relying party's callback; wait for that with `page.wait_for_url`."""
    page.locator('input[name="sub"]').fill(sub)
    page.get_by_role("button", name="Authorize", exact=True).click()


# --- DNS ------------------------------------------------------------------------------------------------------


def _dns_name(name: str) -> str:
    return name.rstrip(".").lower()


def _character_strings(value: str) -> list[bytes]:
    """A TXT value as DNS character-strings (at most 255 bytes each; resolvers join them back)."""
    data = value.encode()
    return [data[i : i + 255] for i in range(0, len(data), 255)] or [b""]


class _TxtResolver(BaseResolver):
    def __init__(self, records: dict[str, list[str]]) -> None:
        self.records = records

    def resolve(self, request: DNSRecord, handler: DNSHandler) -> DNSRecord:
        reply = request.reply()
        qname = request.q.qname
        wanted = _dns_name(str(qname))
        values = next((v for k, v in list(self.records.items()) if _dns_name(k) == wanted), None)
        if values is None:
            reply.header.rcode = RCODE.NXDOMAIN
        elif request.q.qtype in (QTYPE.TXT, QTYPE.ANY):
            for value in list(values):
                reply.add_answer(RR(qname, QTYPE.TXT, rdata=TXT(_character_strings(value)), ttl=0))
        return reply


class DnsServer:
    """A UDP DNS server on 127.0.0.1:`port` answering TXT queries from `records` (name -> TXT strings).

    Names match case-insensitively, with or without the trailing dot. A name in `records` answers its TXT
    strings (each one record; NOERROR with no answer for other query types); any other name NXDOMAIN.
    `records` is read on every query, so a test may add or change entries while the server runs.
    """

    def __init__(self, records: dict[str, list[str]] | None = None) -> None:
        self.records: dict[str, list[str]] = records if records is not None else {}
        self._dns = DNSServer(
            _TxtResolver(self.records), address=HOST, port=0, logger=DNSLogger("-request,-reply,-truncated")
        )
        self.address: str = HOST
        self.port: int = self._dns.server.server_address[1]
        self._thread = threading.Thread(
            target=self._dns.server.serve_forever, kwargs={"poll_interval": 0.05}, name="dns-server", daemon=True
        )
        self._thread.start()

    def resolver(self) -> dns.resolver.Resolver:
        """A dnspython resolver that asks only this server."""
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = [self.address]
        resolver.port = self.port
        resolver.lifetime = 5
        return resolver

    def close(self) -> None:
        """Stop serving, close the socket and wait until the port is free."""
        if self._thread.is_alive():
            self._dns.server.shutdown()
            self._thread.join(5)
        self._dns.server.server_close()
        _wait_port_closed(self.port, kind=socket.SOCK_DGRAM)

    def __enter__(self) -> DnsServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@contextlib.contextmanager
def dns_server(records: dict[str, list[str]] | None = None) -> Iterator[DnsServer]:
    """A `DnsServer` for the duration of the block; `records` is used as is (not copied)."""
    with DnsServer(records) as server:
        yield server
