"""Job callback signatures: `X-TTS-Signature: t=<unix time>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`,
checked by `verify` against the secret, the exact body and the timestamp's age."""

from __future__ import annotations

import hashlib
import hmac
import time

import pytest

from synthesis.callbacks import sign, verify

SECRET = "whsec_test_secret"
BODY = b'{"type":"job.succeeded","job":{"id":"j1","status":"succeeded"}}'


def test_the_signature_is_the_documented_hmac_of_timestamp_and_body():
    header = sign(SECRET, BODY, timestamp=1_700_000_000)
    expected = hmac.new(SECRET.encode(), b"1700000000." + BODY, hashlib.sha256).hexdigest()
    assert header == f"t=1700000000,v1={expected}"


def test_a_fresh_signature_with_the_right_secret_passes():
    assert verify(SECRET, sign(SECRET, BODY), BODY)


def test_a_signature_made_with_another_secret_fails():
    assert not verify(SECRET, sign("whsec_someone_else", BODY), BODY)


@pytest.mark.parametrize("tampered", [BODY + b" ", BODY.replace(b"succeeded", b"failed", 1), b""])
def test_a_tampered_body_fails(tampered):
    assert not verify(SECRET, sign(SECRET, BODY), tampered)


def test_a_changed_mac_fails():
    header = sign(SECRET, BODY)
    last = header[-1]
    assert not verify(SECRET, header[:-1] + ("0" if last != "0" else "1"), BODY)


def test_a_timestamp_within_the_tolerance_passes_and_beyond_it_fails():
    now = int(time.time())
    assert verify(SECRET, sign(SECRET, BODY, timestamp=now - 200), BODY, tolerance=300)
    assert not verify(SECRET, sign(SECRET, BODY, timestamp=now - 400), BODY, tolerance=300)
    assert not verify(SECRET, sign(SECRET, BODY, timestamp=now + 400), BODY, tolerance=300)  # from the future
    assert not verify(SECRET, sign(SECRET, BODY, timestamp=now - 60), BODY, tolerance=10)


def test_a_replayed_body_with_a_new_timestamp_but_the_old_mac_fails():
    old = sign(SECRET, BODY, timestamp=int(time.time()) - 1000)
    mac = old.split(",v1=", 1)[1]
    assert not verify(SECRET, f"t={int(time.time())},v1={mac}", BODY)


@pytest.mark.parametrize(
    "header",
    [
        "",
        "garbage",
        ",,,",
        "t=,v1={mac}",
        "t=soon,v1={mac}",
        "v1={mac}",
        "t={now}",
        "t={now};v1={mac}",
        "t={now},v1=",
        "t={now},v1={mac},extra",
    ],
)
def test_a_malformed_header_fails_without_raising(header):
    now = int(time.time())
    mac = sign(SECRET, BODY, timestamp=now).split(",v1=", 1)[1]
    assert verify(SECRET, header.format(now=now, mac=mac), BODY) is False


def test_a_header_with_non_ascii_characters_fails_without_raising():
    assert verify(SECRET, f"t={int(time.time())},v1=caf\u00e9", BODY) is False
