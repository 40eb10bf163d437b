"""Rejected speech requests: the right status, OpenAI's error body, and nothing enqueued."""

from __future__ import annotations

import httpx
import pytest
from django.utils import timezone

from inference.registry import SPECS
from synthesis.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def post(live_stack, key, body=None, raw: bytes | None = None):
    with live_stack.client(key) as client:
        if raw is not None:
            return client.post("/audio/speech", content=raw, headers={"Content-Type": "application/json"})
        return client.post("/audio/speech", json=body)


def assert_error(response, status: int, param: str | None = None, code: str | None = None) -> dict:
    assert response.status_code == status, response.text[:300]
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    if param is not None:
        assert error["param"] == param
    if code is not None:
        assert error["code"] == code
    assert response.headers["x-request-id"]
    return error


QUEUES = [spec.queue_name for spec in SPECS.values()]


@pytest.fixture
def nothing_enqueued(redis_client):
    """Asserts, after the test, that no job row was written and nothing reached an engine's queue."""
    before = [redis_client.llen(queue) for queue in QUEUES]
    yield
    assert Job.objects.count() == 0
    assert [redis_client.llen(queue) for queue in QUEUES] == before


def test_missing_key_is_401(live_stack, nothing_enqueued):
    error = assert_error(post(live_stack, None, {"input": "hi"}), 401, code="missing_api_key")
    assert error["type"] == "authentication_error"


def test_wrong_key_is_401(live_stack, owner, nothing_enqueued):
    forged = owner.key[:-4] + "abcd"
    assert_error(post(live_stack, forged, {"input": "hi"}), 401, code="invalid_api_key")
    assert_error(post(live_stack, "sk-not-ours", {"input": "hi"}), 401, code="invalid_api_key")


def test_revoked_key_is_refused_at_once(live_stack, owner, nothing_enqueued):
    owner.org.api_keys.get().revoke()
    assert_error(post(live_stack, owner.key, {"input": "hi"}), 401, code="invalid_api_key")


def test_expired_key_is_refused(live_stack, owner, nothing_enqueued):
    owner.org.api_keys.update(expires_at=timezone.now())
    assert_error(post(live_stack, owner.key, {"input": "hi"}), 401)


def test_suspended_organization_gets_403_with_the_reason(live_stack, owner, nothing_enqueued):
    type(owner.org).objects.filter(pk=owner.org.pk).update(suspended_at=timezone.now(), suspension_reason="abuse")
    error = assert_error(post(live_stack, owner.key, {"input": "hi"}), 403, code="organization_suspended")
    assert "abuse" in error["message"]


@pytest.mark.parametrize(
    ("body", "param", "needle"),
    [
        ({"input": "hi", "voice": "bob"}, "voice", "alloy"),
        ({"input": "hi", "response_format": "ogg"}, "response_format", "wav"),
        ({"input": "hi", "speed": 0.1}, "speed", "0.25"),
        ({"input": "hi", "speed": 4.5}, "speed", "4.0"),
        ({"input": "hi", "speed": "fast"}, "speed", "number"),
        ({"input": ""}, "input", "empty"),
        ({"input": "   "}, "input", "empty"),
        ({"voice": "alloy"}, "input", "required"),
        ({"input": 42}, "input", "string"),
        ({"input": "hi", "seed": -1}, "seed", ""),
        ({"input": "hi", "temperature": 9}, "temperature", ""),
        ({"input": "hi", "refine_prompt": "[shout]"}, "refine_prompt", "oral"),
        ({"input": "hi [shout]"}, "input", "[shout]"),
    ],
)
def test_bad_fields_are_400_naming_the_field(live_stack, owner, nothing_enqueued, body, param, needle):
    error = assert_error(post(live_stack, owner.key, body), 400, param=param)
    assert needle in error["message"]
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("model", ["whisper-1", "chattts-v9", "kokoro-2025-13-01"])
def test_a_model_that_is_not_served_is_404_naming_those_that_are(live_stack, owner, nothing_enqueued, model):
    error = assert_error(post(live_stack, owner.key, {"input": "hi", "model": model}), 404, code="model_not_found")
    assert error["param"] == "model" and model in error["message"]
    assert "chattts" in error["message"] and "kokoro" in error["message"]


def test_oversize_input_is_400_with_the_limit(live_stack, owner, nothing_enqueued, settings):
    error = assert_error(post(live_stack, owner.key, {"input": "a" * 4097}), 400, param="input")
    assert "4096" in error["message"]


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
def test_non_json_body_is_400(live_stack, owner, nothing_enqueued, raw):
    assert_error(post(live_stack, owner.key, raw=raw), 400, code="invalid_json")


def test_get_on_the_speech_endpoint_is_405(live_stack, owner, nothing_enqueued):
    with live_stack.client(owner.key) as client:
        assert client.get("/audio/speech").status_code == 405


def test_voices_lists_the_builtin_voices(live_stack, owner):
    with live_stack.client(owner.key) as client:
        response = client.get("/voices")
    assert response.status_code == 200
    names = [v["voice_id"] for v in response.json()["data"]]
    assert {"alloy", "nova", "onyx"} <= set(names)


def test_voices_needs_a_key(live_stack):
    with live_stack.client(None) as client:
        assert_error(client.get("/voices"), 401)


def test_unknown_api_path_is_404_in_the_error_shape(live_stack, owner):
    with live_stack.client(owner.key) as client:
        assert_error(client.get("/nothing-here"), 404)


def test_the_openapi_schema_is_public_and_describes_the_speech_endpoint(live_stack):
    with live_stack.client(None) as client:
        response = client.get("/openapi.json")
    assert response.status_code == 200
    schema = response.json()
    assert {"/v1/audio/speech", "/v1/keys", "/v1/usage", "/v1/voices"} <= set(schema["paths"])
    assert schema["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"


def test_metrics_report_requests_cache_queue_and_workers(live_stack, owner):
    with live_stack.client(owner.key) as client:
        client.post("/audio/speech", json={"input": "Metric me.", "seed": 1, "response_format": "pcm"})
        client.post("/audio/speech", json={"input": "Metric me.", "seed": 1, "response_format": "pcm"})
        client.post("/audio/speech", json={"input": "", "seed": 1})
    text = httpx.get(f"{live_stack.base_url}/metrics").text
    assert 'tts_http_requests_total{endpoint="speech",status="200"}' in text
    assert 'tts_http_requests_total{endpoint="speech",status="400"}' in text
    assert 'tts_cache_requests_total{result="hit"}' in text
    assert 'tts_workers{engine="chattts",status="ready"} 1.0' in text
    assert 'tts_queue_depth{queue="tts-chattts"}' in text and 'tts_queue_depth{queue="tts-kokoro"}' in text
    assert 'tts_jobs_waiting{engine="chattts"}' in text
