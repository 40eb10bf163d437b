"""An organization's voice aliases: OpenAI's voice names mapped to voices of its own choosing, on
any model it may use, so that clients that send only those names (Pipecat's OpenAI service, the
`openai` SDK's typed voices) speak in its voices. Set over /v1/organization/voice_aliases (checked:
OpenAI's names only, a served model in the plan, a voice of that model; the organization scope),
applied to REST (through the `openai` SDK), jobs and the WebSocket protocol, shown on /v1/voices
and /v1/audio/voices; a request naming another model explicitly keeps that model's own voice; a
deleted voice takes its alias with it; an alias to a model no longer served refuses with 409, naming
the alias; other organizations unaffected."""

from __future__ import annotations

import json

import openai
import pytest

from accounts.models import AuditEvent, Organization
from billing.models import Subscription, UsageEvent
from synthesis.api import aliases, protocol
from synthesis.models import Job
from tests.factories import own_plan
from voices.catalog import with_aliases
from voices.models import Voice

pytestmark = pytest.mark.django_db(transaction=True)


def last_spoken(org) -> tuple[str, str]:
    event = UsageEvent.objects.filter(organization=org).order_by("-id").first()
    return event.model, event.voice


def sdk(live_stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=f"{live_stack.base_url}/v1", max_retries=0)


def test_aliases_are_checked_then_speak_through_the_openai_sdk_jobs_and_listings(live_stack, owner, member, outsider):
    Subscription.objects.filter(organization=owner.org).update(concurrent_jobs=4)  # its job runs on beside it
    mine = Voice.objects.create(organization=owner.org, name="Narrator", model="chattts", source="seed", seed=3)
    theirs = Voice.objects.create(organization=outsider.org, name="Theirs", model="chattts", source="seed", seed=4)
    with live_stack.client(owner.key) as client:
        assert client.get("/organization/voice_aliases").json() == {"aliases": {}}
        for aliases, status, param in (
            ({"bob": {"model": "kokoro", "voice": "af_heart"}}, 400, "aliases"),  # not one of OpenAI's names
            ({"alloy": {"model": "nope", "voice": "af_heart"}}, 404, "model"),
            ({"alloy": {"model": "chattts", "voice": "af_heart"}}, 400, "aliases.alloy"),  # a Kokoro voice
            ({"alloy": {"model": "chattts", "voice": theirs.id}}, 400, "aliases.alloy"),  # another organization's
            ({"alloy": {"model": "kokoro"}}, 400, "voice"),
        ):
            refused = client.put("/organization/voice_aliases", json={"aliases": aliases})
            assert refused.status_code == status, refused.text
            assert refused.json()["error"]["param"].endswith(param), refused.text
        with live_stack.client(member.key) as standard:  # the organization scope
            assert standard.put("/organization/voice_aliases", json={"aliases": {}}).status_code == 403
        wanted = {"nova": {"model": "kokoro", "voice": "af_bella"}, "alloy": {"model": "chattts", "voice": mine.id}}
        saved = client.put("/organization/voice_aliases", json={"aliases": wanted})
        assert saved.status_code == 200, saved.text
        assert list(saved.json()["aliases"]) == ["alloy", "nova"]  # OpenAI's order
        assert client.get("/organization/voice_aliases").json()["aliases"] == wanted
        assert AuditEvent.objects.filter(organization=owner.org, action="settings.voice_aliases").exists()

        speaker = sdk(live_stack, owner.key)
        for model, voice, spoken in (
            ("tts-1", "nova", ("kokoro", "af_bella")),  # OpenAI's model name: the alias's model and voice
            ("gpt-4o-mini-tts", "alloy", ("chattts", mine.id)),  # the organization's own voice
            ("kokoro", "nova", ("kokoro", "af_bella")),  # the alias's own model named
            ("chattts", "nova", ("chattts", "nova")),  # another model named explicitly: its own voice
            ("tts-1", "echo", ("chattts", "echo")),  # a name without an alias speaks as built in
        ):
            audio = speaker.audio.speech.create(model=model, voice=voice, input="Aliased.", response_format="pcm")
            assert len(audio.content) > 0
            assert last_spoken(owner.org) == spoken, (model, voice)
        job = client.post("/jobs", json={"input": "An aliased job.", "voice": "nova"})
        assert job.status_code == 202 and Job.objects.get(pk=job.json()["id"]).model == "kokoro"

        listed = {v["voice_id"]: v for v in client.get("/voices", params={"model": "tts-1"}).json()["data"]}
        assert listed["nova"]["alias"] == {"model": "kokoro", "voice": "af_bella", "name": "af_bella"}
        assert listed["alloy"]["alias"] == {"model": "chattts", "voice": mine.id, "name": "Narrator"}
        kokoro = {v["voice_id"]: v for v in client.get("/voices", params={"model": "kokoro"}).json()["data"]}
        assert "alias" in kokoro["nova"] and "alias" not in kokoro["alloy"]  # as a request naming kokoro speaks
        assert "alias" not in listed["echo"]
        audio_voices = {v["id"]: v for v in client.get("/audio/voices", params={"model": "chattts"}).json()["voices"]}
        assert audio_voices["alloy"]["alias"]["name"] == "Narrator"
        assert "alias" not in audio_voices["nova"]  # a request naming chattts speaks its own nova
        default = {v["voice_id"]: v for v in client.get("/voices").json()["data"]}  # no model: every alias
        assert default["nova"]["alias"]["model"] == "kokoro" and default["alloy"]["alias"]["model"] == "chattts"

    with live_stack.client(outsider.key) as other:  # another organization: OpenAI's names as built in
        assert (
            other.post("/audio/speech", json={"input": "Mine.", "voice": "nova", "response_format": "pcm"}).status_code
            == 200
        )
        assert last_spoken(outsider.org) == ("chattts", "nova")
        assert "alias" not in {v["voice_id"]: v for v in other.get("/voices").json()["data"]}["nova"]

    mine.delete()  # its alias goes with it: "alloy" speaks as built in again, never a deleted voice
    with live_stack.client(owner.key) as client:
        assert client.get("/organization/voice_aliases").json()["aliases"] == {"nova": wanted["nova"]}
        gone = client.post("/audio/speech", json={"input": "Gone.", "voice": "alloy", "response_format": "pcm"})
        assert gone.status_code == 200, gone.text
        assert last_spoken(owner.org) == ("chattts", "alloy")
        assert client.put("/organization/voice_aliases", json={"aliases": {}}).json() == {"aliases": {}}


def test_an_alias_to_a_model_no_longer_served_refuses_naming_the_alias(live_stack, owner):
    Organization.objects.filter(pk=owner.org.pk).update(voice_aliases={"onyx": {"model": "gone", "voice": "x"}})
    with live_stack.client(owner.key) as client:
        refused = client.post("/audio/speech", json={"input": "Hi.", "voice": "onyx", "response_format": "pcm"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "invalid_organization_setting"
    assert "alias 'onyx'" in refused.json()["error"]["message"]


def test_an_alias_to_a_model_outside_the_plan_is_refused(live_stack, owner):
    own_plan(owner.org, "chattts-only", allowed_models=["chattts"])
    with live_stack.client(owner.key) as client:
        refused = client.put(
            "/organization/voice_aliases", json={"aliases": {"alloy": {"model": "kokoro", "voice": "af_heart"}}}
        )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_in_plan"


def test_the_websocket_protocol_applies_the_aliases(settings):
    settings.TTS_ENGINES = ["chattts", "kokoro"]
    org = Organization(name="Unsaved", voice_aliases={"shimmer": {"model": "kokoro", "voice": "af_sky"}})
    assert not Organization.objects.filter(name="Unsaved").exists()  # applied without the database
    message = protocol.parse(json.dumps({"type": "synthesize", "text": "Hi.", "voice": "shimmer"}), organization=org)
    assert (message.speech["model"], message.speech["voice"]) == ("kokoro", "af_sky")


def test_a_malformed_stored_alias_is_ignored_not_a_500(settings):
    # Aliases are stored only through `check` (the API, the dashboard; the admin shows them read-only),
    # but a row written otherwise must not break the requests and listings that read it.
    settings.TTS_ENGINES = ["chattts", "kokoro"]
    org = Organization.objects.create(
        name="Odd",
        voice_aliases={"alloy": "x", "nova": {"model": "kokoro"}, "echo": {"model": "kokoro", "voice": "af_sky"}},
    )
    for name in ("alloy", "nova"):
        assert aliases.apply({"input": "x", "voice": name}, org) == {"input": "x", "voice": name}
    assert aliases.apply({"input": "x", "voice": "echo"}, org) == {"input": "x", "voice": "af_sky", "model": "kokoro"}
    listed = with_aliases([{"id": "alloy"}, {"id": "nova"}, {"id": "echo"}], org)
    assert [("alias" in entry) for entry in listed] == [False, False, True]
