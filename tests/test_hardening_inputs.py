"""Query values and path ids that used to reach the database or date arithmetic unchecked and
answer 500: each is now a 400 naming the parameter (or the 404 any unknown id gets), in the
documented error shape, through the real stack on PostgreSQL."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def assert_error(response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    if param:
        assert param in error["message"]
    return error


@pytest.mark.parametrize("offset", ["100000000000000000000", "9223372036854775808", "1000001"])
def test_a_job_list_offset_beyond_the_cap_is_400_naming_offset(live_stack, owner, offset):
    with live_stack.client(owner.key) as client:
        assert_error(client.get("/jobs", params={"offset": offset}), 400, "offset")


def test_a_job_list_offset_up_to_the_cap_is_answered(live_stack, owner):
    with live_stack.client(owner.key) as client:
        response = client.get("/jobs", params={"offset": 1_000_000})
    assert response.status_code == 200
    assert response.json()["data"] == [] and response.json()["has_more"] is False


@pytest.mark.parametrize(
    "params, param",
    [
        ({"end": "9999-12-31"}, "end"),
        ({"start": "9999-12-31", "end": "9999-12-31"}, "end"),
        ({"start": "9999-12-30", "end": "9999-12-31", "group_by": "key"}, "end"),
        ({"start": "9999-12-31"}, "end"),  # end (today) before start
    ],
)
def test_a_usage_date_at_the_end_of_the_calendar_is_400_naming_it(live_stack, owner, params, param):
    with live_stack.client(owner.key) as client:
        assert_error(client.get("/usage", params=params), 400, param)


def test_the_last_usable_usage_dates_are_answered(live_stack, owner):
    with live_stack.client(owner.key) as client:
        response = client.get("/usage", params={"start": "9999-12-01", "end": "9999-12-30"})
        assert response.status_code == 200, response.text
        assert response.json()["end"] == "9999-12-30"
        early = client.get("/usage", params={"start": "0001-01-01", "end": "0001-01-31"})
        assert early.status_code == 200, early.text


@pytest.mark.parametrize("key_id", ["ab%00cd", "abcdefghijk%00", "%00", "ab%00cd%00ef%00g", "x" * 300])
def test_a_malformed_key_id_is_the_same_404_as_an_unknown_one(live_stack, owner, key_id):
    with live_stack.client(owner.key) as client:
        unknown = client.get("/keys/doesnotexist0")
        for response in (client.get(f"/keys/{key_id}"), client.delete(f"/keys/{key_id}")):
            error = assert_error(response, 404, None)
            assert error == unknown.json()["error"]
    assert owner.org.api_keys.filter(revoked_at__isnull=True).count() == 1


def test_a_key_id_of_the_right_form_still_finds_the_key(live_stack, owner):
    prefix = owner.org.api_keys.get().prefix
    with live_stack.client(owner.key) as client:
        assert client.get(f"/keys/{prefix}").json()["id"] == prefix


@pytest.mark.parametrize("path", ["/jobs/ab%00cd", "/jobs/00000000-0000-0000-0000-00000000%00000/audio"])
def test_a_nul_byte_in_a_job_id_is_404(live_stack, owner, path):
    with live_stack.client(owner.key) as client:
        assert_error(client.get(path), 404, None)
