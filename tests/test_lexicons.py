"""Pronunciation lexicons through the live stack: managed over /v1/lexicons (tenant-scoped, plan
limits, validation), applied before normalisation to requests that name them and, when default, to
every request; part of the cache key (the key hashes the text as spoken); captions keep the text as
sent. Checked with a brand name and a number-like token."""

from __future__ import annotations

import pytest

from tests.factories import own_plan
from tests.test_jobs import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Nginx serves 3M requests a day."
SPOKEN = "engine x serves three million requests a day."
ENTRIES = [{"text": "nginx", "alias": "engine x"}, {"text": "3M", "alias": "three million", "case_sensitive": True}]


def speak(client, **body):
    response = client.post("/audio/speech", json={"response_format": "pcm", "seed": 5, **body})
    assert response.status_code == 200, response.text
    return response


def test_a_lexicon_changes_what_is_spoken_and_the_cache_key_follows_the_spoken_text(live_stack, owner):
    with live_stack.client(owner.key) as client:
        created = client.post("/lexicons", json={"name": "brands", "entries": ENTRIES})
        assert created.status_code == 201, created.text
        lexicon = created.json()
        assert lexicon["id"].startswith("lex_") and lexicon["object"] == "lexicon" and lexicon["is_default"] is False
        applied = speak(client, input=TEXT, lexicons=[lexicon["id"]])
        assert applied.headers["x-cache"] == "miss"
        # The alias is what the model read: the same audio as the alias typed in (a cache hit).
        typed = speak(client, input=SPOKEN)
        assert typed.headers["x-cache"] == "hit" and typed.content == applied.content
        plain = speak(client, input=TEXT)
        assert plain.headers["x-cache"] == "miss" and plain.content != applied.content
        # Made the default: every request of the organization reads the alias.
        assert client.patch(f"/lexicons/{lexicon['id']}", json={"is_default": True}).json()["is_default"] is True
        default = speak(client, input=TEXT)
        assert default.headers["x-cache"] == "hit" and default.content == applied.content
        # default_lexicons false: the text as written, the defaults left out (the first plain's audio).
        without = speak(client, input=TEXT, default_lexicons=False)
        assert without.headers["x-cache"] == "hit" and without.content == plain.content
        # Changed entries change the spoken text, hence the key: a new generation.
        changed = client.patch(f"/lexicons/{lexicon['id']}", json={"entries": [{"text": "nginx", "alias": "N G X"}]})
        assert changed.status_code == 200 and len(changed.json()["entries"]) == 1
        assert speak(client, input=TEXT).headers["x-cache"] == "miss"


def test_captions_show_the_text_as_sent(live_stack, owner):
    with live_stack.client(owner.key) as client:
        lexicon = client.post("/lexicons", json={"name": "brands", "entries": ENTRIES, "is_default": True}).json()
        job = client.post("/jobs", json={"input": TEXT, "seed": 6, "response_format": "pcm"}).json()
        wait_for(client, job["id"], {"succeeded"})
        captions = client.get(f"/jobs/{job['id']}/captions").json()["segments"]
    assert [c["text"] for c in captions] == [TEXT]
    assert lexicon["is_default"] is True


def test_lexicons_are_validated_scoped_to_their_organization_and_limited_by_the_plan(live_stack, owner, outsider):
    own_plan(owner.org, "three-entries", max_lexicon_entries=3)
    with live_stack.client(owner.key) as client, live_stack.client(outsider.key) as other:
        mine = client.post("/lexicons", json={"name": "a", "entries": ENTRIES}).json()
        for body, code, param in (
            (
                {"name": "b", "entries": [{"text": "x", "alias": "y", "lang": "en"}]},
                "unknown_parameter",
                "entries[0].lang",
            ),
            ({"name": "b", "entries": [{"text": " x", "alias": "y"}]}, "invalid_value", "entries[0]"),
            (
                {"name": "b", "entries": [{"text": "X", "alias": "y"}, {"text": "x", "alias": "z"}]},
                "invalid_value",
                "entries",
            ),
            ({"entries": []}, "required", "name"),
        ):
            refused = client.post("/lexicons", json=body)
            assert refused.status_code == 400 and refused.json()["error"]["code"] == code, (body, refused.text)
            assert refused.json()["error"]["param"] == param
        over = client.post(
            "/lexicons", json={"name": "b", "entries": [{"text": "a", "alias": "b"}, {"text": "c", "alias": "d"}]}
        )
        assert over.status_code == 403 and over.json()["error"]["code"] == "plan_limit_reached"
        assert "3 lexicon entries" in over.json()["error"]["message"]
        taken = client.post("/lexicons", json={"name": "a"})
        assert taken.status_code == 409 and taken.json()["error"]["code"] == "name_taken"
        # Another organization's lexicon does not exist for this one, by any route.
        url = f"/lexicons/{mine['id']}"
        assert other.get(url).status_code == 404
        assert other.patch(url, json={"name": "stolen"}).status_code == 404
        assert other.delete(url).status_code == 404
        assert other.get("/lexicons").json()["data"] == []
        used = other.post("/audio/speech", json={"input": "x", "lexicons": [mine["id"]]})
        assert used.status_code == 400 and used.json()["error"]["param"] == "lexicons"
        assert client.get("/lexicons/lex_nope").status_code == 404
        half = client.patch(f"/lexicons/{mine['id']}", json={"entries": [{"text": "x"}]})
        assert half.status_code == 400 and half.json()["error"]["param"] == "entries[0].alias"
        blown = client.post("/lexicons", json={"name": "blow-up", "entries": [{"text": "a", "alias": "y" * 200}]})
        assert blown.status_code == 201
        refused = client.post("/audio/speech", json={"input": "a " * 60, "lexicons": [blown.json()["id"]]})
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "lexicons"
        assert client.delete(url).json() == {"id": mine["id"], "object": "lexicon", "deleted": True}
        assert client.get(url).status_code == 404
