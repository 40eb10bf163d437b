"""Throttles on the ways into the dashboard: repeated sign-in, sign-up, password-reset and
invitation POSTs get 429 with Retry-After (counted in Redis per address, account, e-mail or user),
while other addresses and accounts go on as before."""

from __future__ import annotations

import pytest
from django.core import mail
from django.test import Client

from accounts import actions

pytestmark = pytest.mark.django_db


def from_address(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def log_in(client: Client, username: str, password: str = "wrong password"):
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_sign_in_is_throttled_per_address_after_ten_attempts(settings):
    # Ten a minute in production; an hour's window here, so that the attempts cannot straddle the
    # start of a new window (django-ratelimit's windows are fixed, not sliding).
    settings.TTS_LOGIN_RATE = "10/h"
    actions.sign_up("ada@example.com", "correct horse battery", "Analytical Engines")
    guesser = from_address("203.0.113.7")
    for _ in range(10):
        assert log_in(guesser, "ada@example.com").status_code == 200  # the form again, with its error
    throttled = log_in(guesser, "ada@example.com", "correct horse battery")
    assert throttled.status_code == 429
    assert throttled["Retry-After"] == "60"
    assert b"Too many attempts" in throttled.content
    # Someone else, from elsewhere, signs in as usual.
    other = from_address("198.51.100.1")
    assert log_in(other, "ada@example.com", "correct horse battery").status_code == 302


def test_sign_in_is_throttled_per_account_across_addresses(settings):
    settings.TTS_LOGIN_ACCOUNT_RATE = "3/h"
    for n in range(3):
        assert log_in(from_address(f"203.0.113.{n}"), "Ada@Example.com").status_code == 200
    assert log_in(from_address("203.0.113.99"), "ada@example.com").status_code == 429  # any case
    assert log_in(from_address("203.0.113.99"), "bob@example.com").status_code == 200


def test_sign_up_is_throttled_per_address():
    client = from_address("203.0.113.20")
    for n in range(10):
        form = {"email": f"user{n}@example.com", "password": "correct horse battery", "organization": f"Org {n}"}
        assert client.post("/dashboard/signup", form).status_code == 302
        client.logout()
    form = {"email": "user10@example.com", "password": "correct horse battery", "organization": "Org 10"}
    assert client.post("/dashboard/signup", form).status_code == 429
    assert client.get("/dashboard/signup").status_code == 200  # the page itself is not counted


def test_password_reset_is_throttled_per_address_and_per_email():
    actions.sign_up("ada@example.com", "correct horse battery", "Analytical Engines")
    for n in range(5):
        response = from_address(f"203.0.113.{n}").post("/accounts/password_reset/", {"email": "ada@example.com"})
        assert response.status_code == 302
    assert len(mail.outbox) == 5
    blocked = from_address("203.0.113.50").post("/accounts/password_reset/", {"email": "ADA@example.com"})
    assert blocked.status_code == 429
    assert len(mail.outbox) == 5  # no sixth mail to the same inbox


def test_invitations_are_throttled_per_inviting_user(client, settings):
    settings.TTS_INVITE_RATE = "2/h"
    actions.sign_up("ada@example.com", "correct horse battery", "Analytical Engines")
    assert client.login(username="ada@example.com", password="correct horse battery")
    for n in range(2):
        response = client.post("/dashboard/members", {"email": f"new{n}@example.com", "role": "member"})
        assert response.status_code == 302
    response = client.post("/dashboard/members", {"email": "new2@example.com", "role": "member"})
    assert response.status_code == 429
    assert len(mail.outbox) == 2


def test_the_admin_console_signs_staff_in_through_the_dashboards_sign_in():
    """The admin console's own form would log staff in without their second factor (and unthrottled
    apart): it sends them to the dashboard's sign-in, and back."""
    guesser = from_address("203.0.113.66")
    answer = guesser.post("/admin/login/", {"username": "ops", "password": "guess"})
    assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/?next=")
