"""The one guard for every URL the server fetches (tts_saas.outbound): which addresses are public
(IPv6 forms that reach an IPv4 address judged by it, or refused), the organization's event endpoint
refused with a message naming the field the caller sent, and the provider session of single sign-on
(accounts.sso.ProviderSession): the name resolved and checked when connecting, the connection made
to the checked address with the name kept for the Host header and TLS, and redirects refused."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest
import requests
from django.test import Client
from rest_framework import serializers

from accounts.sso import ProviderSession
from synthesis.api.serializers import JobRequestSerializer
from tests.conftest import make_persona
from tts_saas.outbound import is_public

PUBLIC_IP = "93.184.216.34"  # never actually connected to: the tests refuse that connection


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254 (the cloud metadata service)
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b:1::a9fe:a9fe",  # NAT64's local-use prefix
        "2002:a9fe:a9fe::",  # 6to4 of 169.254.169.254
        "::ffff:169.254.169.254",  # IPv4-mapped
        "::ffff:0:a9fe:a9fe",  # IPv4-translated (SIIT)
        "::127.0.0.1",  # IPv4-compatible (deprecated ::/96)
        "::a9fe:a9fe",  # IPv4-compatible 169.254.169.254
        "::8.8.8.8",  # IPv4-compatible, even of a public address: the form is refused
        "2001:0:4136:e378:8000:63bf:5601:5601",  # Teredo: client 169.254.169.254 (inverted)
        "2001:0:4136:e378:8000:63bf:f7f7:f7f7",  # Teredo: client 8.8.8.8, still refused
        "fe80::1",  # link-local
        "fe80::1%lo",
        "fd00::1",  # unique local (ULA)
        "::1",
        "::",
        "ff0e::1",  # global-scope multicast
        "169.254.169.254",
        "127.0.0.1",
        "0.0.0.0",
        "10.0.0.1",
        "100.100.100.200",  # carrier-grade NAT: a cloud metadata service
        "233.1.1.1",  # multicast
    ],
)
def test_non_public_addresses_and_every_form_that_reaches_one_are_refused(address):
    assert is_public(address) is False


@pytest.mark.parametrize(
    "address",
    [
        PUBLIC_IP,
        "8.8.8.8",
        "2606:4700:4700::1111",
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8: what DNS64 answers on an IPv6-only network
        "2002:808:808::",  # 6to4 of 8.8.8.8
        "::ffff:8.8.8.8",  # IPv4-mapped 8.8.8.8
    ],
)
def test_public_addresses_pass(address):
    assert is_public(address) is True


# The organization's event endpoint and a job's callback_url: the field named as the caller sent it --


@pytest.mark.parametrize("url", ["http://[::127.0.0.1]/", "http://[64:ff9b::a9fe:a9fe]/", "http://[2002:a9fe:a9fe::]/"])
def test_the_event_endpoint_refuses_an_address_reaching_a_private_one_naming_the_url_field(settings, db, url):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    acme = make_persona("Endpoint Guard")
    answer = Client().put(
        "/v1/webhooks/endpoint", {"url": url}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {acme.key}"
    )
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["param"] == "url"
    assert "url must point at a public address" in error["message"], error
    assert "callback_url" not in error["message"]
    assert not acme.org.webhook_endpoints.exists()


def test_the_event_endpoint_names_the_url_field_for_a_url_that_is_not_http(settings, db):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    acme = make_persona("Endpoint Form")
    answer = Client().put(
        "/v1/webhooks/endpoint",
        {"url": "ftp://example.com/x"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {acme.key}",
    )
    error = answer.json()["error"]
    assert answer.status_code == 400 and error["param"] == "url"
    assert "url must be an http(s) URL." in error["message"] and "callback_url" not in error["message"]


def test_a_jobs_callback_url_is_still_named_callback_url(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    with pytest.raises(serializers.ValidationError) as refused:
        JobRequestSerializer().validate_callback_url("http://[::127.0.0.1]/hook")
    assert str(refused.value.detail[0]).startswith("callback_url must point at a public address")


# The provider session of single sign-on -----------------------------------------------------------


@pytest.fixture
def resolver(monkeypatch) -> Callable[..., list[int]]:
    """`resolver(host, *answers)`: `host` resolves to answers[0] on the first lookup, answers[1] on
    the second and so on (the last one after that); the lookups made are returned. Other names,
    and IP literals, resolve as usual."""
    real = socket.getaddrinfo

    def install(host: str, *answers: str) -> list[int]:
        lookups: list[int] = []

        def fake(name, port, *args, **kwargs):
            if name != host:
                return real(name, port, *args, **kwargs)
            lookups.append(port)
            ip = answers[min(len(lookups), len(answers)) - 1]
            family = socket.AF_INET6 if ":" in ip else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (ip, int(port or 0)))]

        monkeypatch.setattr(socket, "getaddrinfo", fake)
        return lookups

    return install


class Provider:
    """A TCP server on 127.0.0.1 that answers each request with `answer` (raw bytes, or None to
    read the first bytes only and hang up); what it received is kept."""

    def __init__(self, answer: bytes | None):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.answer = answer
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    data = conn.recv(65536)
                    while self.answer is not None and b"\r\n\r\n" not in data:
                        data += conn.recv(65536)
                    self.received.append(data)
                    if self.answer is not None:
                        conn.sendall(self.answer)
                except OSError:
                    pass

    def headers(self, index: int = 0) -> dict[str, str]:
        head = self.received[index].partition(b"\r\n\r\n")[0].decode().split("\r\n")[1:]
        return {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in head)}


@pytest.fixture
def provider() -> Iterator[Callable[[bytes | None], Provider]]:
    started: list[Provider] = []

    def start(answer: bytes | None) -> Provider:
        started.append(Provider(answer))
        return started[-1]

    yield start
    for each in started:
        each.sock.close()


JSON_OK = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"ok": true}'


@pytest.mark.parametrize("answer", ["127.0.0.1", "::127.0.0.1", "64:ff9b::7f00:1"])
def test_a_name_that_resolves_to_a_private_address_is_refused_when_connecting(settings, resolver, provider, answer):
    settings.TTS_SSO_ALLOW_PRIVATE = False
    idp = provider(JSON_OK)
    lookups = resolver("idp.example.com", answer)
    with pytest.raises(requests.exceptions.InvalidURL, match="private or reserved"):
        ProviderSession().get(f"https://idp.example.com:{idp.port}/.well-known/openid-configuration")
    assert idp.received == [], "the provider session connected to a private address"
    assert lookups == [idp.port]  # looked up once: by the connection


def test_a_name_that_rebinds_is_connected_to_at_the_address_checked_not_a_second_lookup(
    settings, resolver, provider, monkeypatch
):
    """DNS rebinding: the name answers a public address first, then the loopback address where
    the server (standing in for an internal service) listens. The session connects to the address
    it checked (refused below, so nothing leaves the machine) and never reaches loopback."""
    settings.TTS_SSO_ALLOW_PRIVATE = False
    idp = provider(JSON_OK)
    lookups = resolver("idp.example.com", PUBLIC_IP, "127.0.0.1")
    connected: list[tuple] = []
    real_connect = socket.create_connection

    def connect(address, *args, **kwargs):
        connected.append(tuple(address))
        if address[0] == PUBLIC_IP:
            raise ConnectionRefusedError(111, "Connection refused")
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", connect)
    with pytest.raises(requests.exceptions.ConnectionError):
        ProviderSession().get(f"https://idp.example.com:{idp.port}/jwks")
    assert idp.received == [] and connected == [(PUBLIC_IP, idp.port)]
    assert len(lookups) == 1


def test_the_session_connects_to_the_checked_address_and_names_the_host(settings, resolver, provider):
    settings.TTS_SSO_ALLOW_PRIVATE = True  # the provider listens on loopback
    idp = provider(JSON_OK)
    lookups = resolver("idp.test", "127.0.0.1")
    answer = ProviderSession().get(f"http://idp.test:{idp.port}/userinfo")
    assert answer.status_code == 200 and answer.json() == {"ok": True}
    assert idp.received[0].startswith(b"GET /userinfo HTTP/1.1\r\n")
    assert idp.headers()["host"] == f"idp.test:{idp.port}"
    assert len(lookups) == 1


def test_an_https_fetch_names_the_host_for_tls(settings, resolver, provider):
    settings.TTS_SSO_ALLOW_PRIVATE = True
    idp = provider(None)  # reads the ClientHello and hangs up
    resolver("idp.test", "127.0.0.1")
    with pytest.raises(requests.exceptions.ConnectionError):
        ProviderSession().get(f"https://idp.test:{idp.port}/.well-known/openid-configuration")
    assert idp.received and b"idp.test" in idp.received[0]  # the SNI extension: the name, not the address


def test_a_redirect_from_a_provider_is_a_failure_not_followed(settings, provider):
    settings.TTS_SSO_ALLOW_PRIVATE = True
    elsewhere = provider(JSON_OK)
    redirect = f"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{elsewhere.port}/\r\nContent-Length: 0\r\n\r\n"
    idp = provider(redirect.encode())
    with pytest.raises(requests.exceptions.HTTPError, match="302"):
        ProviderSession().get(f"http://127.0.0.1:{idp.port}/token")
    assert len(idp.received) == 1 and elsewhere.received == []
