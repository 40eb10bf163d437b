"""What clients built for OpenAI's speech API send and read, through the live server and, where it
applies, the official `openai` SDK: OpenAI's newer voices and the voice object, dated model
snapshots, unknown fields refused by name, the instructions cap, `insufficient_quota`,
`x-should-retry: false` on 409, the `-tokens` rate-limit headers, and the discovery endpoints
(`/v1/models` for LiteLLM and the SDK, `/v1/audio/voices` and `/v1/audio/models` in the shapes
Open WebUI reads)."""

from __future__ import annotations

import httpx
import openai
import pytest

from billing.models import QuotaPeriod
from billing.quota import period_start
from tests.conftest import make_persona
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def sdk(live_stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=f"{live_stack.base_url}/v1", max_retries=0)


def test_openais_newer_voices_the_voice_object_and_dated_models_are_accepted(live_stack, owner):
    client = sdk(live_stack, owner.key)
    for voice in ("marin", "cedar"):
        # A seed: random-weight ChatTTS without one may end a row at once (seen: 512 bytes), which says
        # nothing about the voice being accepted.
        audio = client.audio.speech.create(
            model="tts-1", voice=voice, input="New voice.", response_format="pcm", extra_body={"seed": 7}
        )
        assert len(audio.content) > 1000
    by_object = client.audio.speech.create(
        model="gpt-4o-mini-tts-2025-12-15",
        voice={"id": "cedar"},  # type: ignore[arg-type]  # OpenAI's object form (newer SDKs type it)
        input="New voice.",
        response_format="pcm",
        extra_body={"seed": 7},
    )
    by_name = client.audio.speech.create(
        model="gpt-4o-mini-tts", voice="cedar", input="New voice.", response_format="pcm", extra_body={"seed": 7}
    )
    assert by_object.content == by_name.content  # the same fixed speaker, the same model
    with live_stack.client(owner.key) as http:
        for body, status in (
            ({"input": "x", "voice": {"id": "nobody"}}, 400),
            ({"input": "x", "voice": {"id": "alloy", "name": "x"}}, 400),
            ({"input": "x", "model": "tts-1-2025-13"}, 404),  # OpenAI: model_not_found
            ({"input": "x", "model": "whisper-1-2025-01-01"}, 404),
            ({"input": "x", "model": "tts-1-2025-13-99"}, 404),  # not a date
        ):
            refused = http.post("/audio/speech", json=body)
            param = "voice" if "voice" in body else "model"
            assert refused.status_code == status and refused.json()["error"]["param"] == param, body


def test_an_unknown_field_is_refused_by_name_and_instructions_are_capped(live_stack, owner):
    client = sdk(live_stack, owner.key)
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="tts-1", voice="alloy", input="x", extra_body={"format": "wav"})
    error = info.value.body
    assert isinstance(error, dict) and error["param"] == "format" and error["code"] == "unknown_parameter"
    assert error["message"] == "Unknown parameter: 'format'."
    with pytest.raises(openai.BadRequestError) as capped:
        client.audio.speech.create(model="tts-1", voice="alloy", input="x", instructions="calm " * 1000)
    assert isinstance(capped.value.body, dict) and capped.value.body["param"] == "instructions"
    assert capped.value.body["code"] == "string_above_max_length"
    with live_stack.client(owner.key) as http:
        job = http.post("/jobs", json={"input": "x", "voice": "alloy", "colour": "blue"})
        assert job.status_code == 400 and job.json()["error"]["param"] == "colour"
    fine = client.audio.speech.create(
        model="tts-1",
        voice="alloy",
        input="Instructions are accepted.",
        instructions="x" * 4096,  # the most OpenAI takes
        response_format="pcm",
        extra_body={"seed": 7},  # random-weight ChatTTS without one may end the row at once (seen: 512 bytes)
    )
    assert len(fine.content) > 1000


def test_a_used_up_quota_is_openais_insufficient_quota_and_the_token_headers_count_characters(live_stack):
    org = make_persona("Quota Headers", monthly_characters=100)
    with live_stack.client(org.key) as http:
        fresh = http.get("/voices")
    assert fresh.headers["x-ratelimit-limit-tokens"] == "100"
    assert fresh.headers["x-ratelimit-remaining-tokens"] == "100"
    assert fresh.headers["x-ratelimit-reset-tokens"].endswith("s")
    QuotaPeriod.objects.update_or_create(organization=org.org, period_start=period_start(), defaults={"used": 95})
    with pytest.raises(openai.RateLimitError) as info:
        sdk(live_stack, org.key).audio.speech.create(model="tts-1", voice="alloy", input="Too long for what is left.")
    assert isinstance(info.value.body, dict) and info.value.body["code"] == "insufficient_quota"
    assert info.value.response.headers["x-ratelimit-remaining-tokens"] == "5"


def test_a_conflict_tells_the_sdks_not_to_retry(live_stack, owner):
    with live_stack.client(owner.key) as http:
        job = http.post(
            "/jobs", json={"input": "A job that is cancelled at once. " * 25, "voice": {"id": "alloy"}}
        ).json()
        assert job["voice"] == "alloy"  # the voice object on jobs too
        assert http.post(f"/jobs/{job['id']}/cancel").status_code == 202
        wait_until(  # the free plan runs one job at a time
            lambda: http.get(f"/jobs/{job['id']}").json()["status"] not in ("queued", "running"), 120, "job unfinished"
        )
        early = http.get(f"/jobs/{job['id']}/audio")  # a cancelled job has no audio: 409, for good
        assert early.status_code == 409 and early.headers["x-should-retry"] == "false"
    assert httpx.post(  # the 409 of an idempotency key reused with another body
        f"{live_stack.base_url}/v1/audio/speech",
        json={"input": "one body", "response_format": "pcm"},
        headers={"Authorization": f"Bearer {owner.key}", "Idempotency-Key": "conformance-409"},
        timeout=120,
    ).status_code in (200, 202)
    reused = httpx.post(
        f"{live_stack.base_url}/v1/audio/speech",
        json={"input": "another body", "response_format": "pcm"},
        headers={"Authorization": f"Bearer {owner.key}", "Idempotency-Key": "conformance-409"},
        timeout=120,
    )
    assert reused.status_code == 409 and reused.headers["x-should-retry"] == "false"


def test_models_are_listed_in_openais_shape_for_the_sdk(live_stack, owner):
    client = sdk(live_stack, owner.key)
    ids = [m.id for m in client.models.list()]
    assert {"chattts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"} <= set(ids)
    one = client.models.retrieve("gpt-4o-mini-tts-2025-12-15")
    assert (one.id, one.object, one.owned_by) == ("gpt-4o-mini-tts-2025-12-15", "model", "tts_saas")
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("dall-e-3")
    assert httpx.get(f"{live_stack.base_url}/v1/models").status_code == 401  # a key is needed, as at OpenAI


def test_open_webui_reads_voices_and_models_with_or_without_a_key(live_stack, owner):
    base = f"{live_stack.base_url}/v1"
    anonymous = httpx.get(f"{base}/audio/voices")
    assert anonymous.status_code == 200
    voices = {v["id"]: v["name"] for v in anonymous.json()["voices"]}  # what Open WebUI does with them
    assert {"alloy", "marin", "cedar"} <= set(voices) and voices["alloy"] == "alloy"
    keyed = httpx.get(f"{base}/audio/voices", headers={"Authorization": f"Bearer {owner.key}"})
    assert keyed.status_code == 200 and keyed.json() == anonymous.json()
    assert httpx.get(f"{base}/audio/voices", headers={"Authorization": "Bearer tts_nope_nope"}).status_code == 401
    models = httpx.get(f"{base}/audio/models").json()["models"]
    assert {"tts-1", "gpt-4o-mini-tts"} <= {m["id"] for m in models}
