"""API keys: shown once, stored only as a hash, created with the management command."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import call_command

from accounts.auth import authenticate_key
from accounts.models import ApiKey, Organization, hash_key
from tts_saas.errors import ApiError

pytestmark = pytest.mark.django_db


def test_the_secret_is_nowhere_in_the_database():
    org = Organization.objects.create(name="Acme", slug="acme")
    key, raw = org.create_api_key("ci")
    secret = raw.rsplit("_", 1)[1]
    assert len(secret) >= 32
    row = ApiKey.objects.filter(pk=key.pk).values().get()
    assert not any(secret in str(value) for value in row.values())
    assert row["hashed_key"] == hash_key(raw)


def test_a_key_authenticates_and_records_use_coarsely():
    org = Organization.objects.create(name="Acme", slug="acme")
    key, raw = org.create_api_key("ci")
    principal = authenticate_key(f"Bearer {raw}")
    assert principal.organization == org and principal.api_key == key
    first_use = ApiKey.objects.get(pk=key.pk).last_used_at
    assert first_use is not None
    authenticate_key(f"Bearer {raw}")
    assert ApiKey.objects.get(pk=key.pk).last_used_at == first_use  # no write per request


@pytest.mark.parametrize("header", [None, "", "Bearer", "Basic abc", "Bearer tts_", "Bearer tts_x_y"])
def test_malformed_or_unknown_keys_are_401(header):
    with pytest.raises(ApiError) as info:
        authenticate_key(header)
    assert info.value.status == 401


def test_create_org_prints_a_working_key():
    out = io.StringIO()
    call_command("create_org", "Demo Co", "--quiet", stdout=out)
    raw = out.getvalue().strip()
    assert authenticate_key(f"Bearer {raw}").organization.slug == "demo-co"


def test_the_first_runs_demo_has_an_owner_who_signs_in_and_a_standard_key(tmp_path, client):
    """Before: ./scripts/run printed an admin key of an organization no one could sign in to, so its
    calls showed on no dashboard."""
    password_file = tmp_path / "var" / "demo_password"
    args = ["create_org", "Demo", "--kind", "standard", "--owner", "demo@example.com"]
    first, second = io.StringIO(), io.StringIO()
    call_command(*args, "--owner-password-file", str(password_file), stdout=first)
    call_command(*args, "--owner-password-file", str(password_file), stdout=second)  # the next run
    raw = re.search(r"API key \(standard, shown once\): (\S+)", first.getvalue()).group(1)
    principal = authenticate_key(f"Bearer {raw}")
    assert principal.organization.name == "Demo" and not principal.is_admin
    password = password_file.read_text().strip()
    assert f"Dashboard sign-in (owner of Demo): demo@example.com / {password}" in first.getvalue()
    assert f"demo@example.com / {password}" in second.getvalue()  # the same, every run
    assert oct(password_file.stat().st_mode & 0o777) == "0o600"
    assert client.post("/accounts/login/", {"username": "demo@example.com", "password": password}).status_code == 302
    assert client.get("/dashboard/").context["current_org"].name == "Demo"


def test_a_restart_reuses_the_demo_key_and_keeps_the_owner_signed_in(tmp_path, client):
    """Before: each start of ./scripts/run added another active demo key of the same name and set
    the owner's password again, which signed them out."""
    var = tmp_path / "var"
    args = ["create_org", "Demo", "--kind", "standard", "--owner", "demo@example.com", "--key-name", "demo"]
    files = ["--owner-password-file", str(var / "demo_password"), "--key-file", str(var / "demo_key")]
    first = io.StringIO()
    call_command(*args, *files, stdout=first)
    raw = re.search(r"API key \(standard, new, kept in \S+\): (\S+)", first.getvalue()).group(1)
    password = (var / "demo_password").read_text().strip()
    assert client.post("/accounts/login/", {"username": "demo@example.com", "password": password}).status_code == 302
    again = io.StringIO()
    call_command(*args, *files, stdout=again)  # the next start
    assert f"API key (standard, the one kept in {var / 'demo_key'}): {raw}" in again.getvalue()
    assert ApiKey.objects.filter(name="demo", revoked_at__isnull=True).count() == 1
    assert oct((var / "demo_key").stat().st_mode & 0o777) == "0o600"
    assert client.get("/dashboard/").status_code == 200  # still signed in, not sent to the sign-in page
    ApiKey.objects.get(name="demo").revoke()  # a key revoked on the dashboard: the next start makes one
    third = io.StringIO()
    call_command(*args, *files, stdout=third)
    renewed = re.search(r"API key \(standard, new, kept in \S+\): (\S+)", third.getvalue()).group(1)
    assert renewed != raw and authenticate_key(f"Bearer {renewed}").organization.name == "Demo"
