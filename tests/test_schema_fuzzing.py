"""Schema fuzzing: schemathesis reads the OpenAPI schema the live server serves, generates requests
for every operation from it (/v1 and ElevenLabs' wire) (valid ones, and invalid ones), sends them with an admin key and
holds every response to that same schema: no server error, a documented status code and content
type, a body that matches what is documented for them (each event of an event stream included)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.conftest import make_persona
from tests.waiting import wait_until

# One item runs all 71 operations: about four minutes on two cores at 20 examples each, past
# pytest's default 300 s when busy.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900), pytest.mark.long]

# What a response must be. schemathesis' other checks judge the API's behaviour beyond its schema
# (e.g. positive_data_acceptance would call the 400 for a /v1/usage range over 366 days, or the 429
# of a spent quota, failures): this test is about the schema.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Generated examples per operation, valid and invalid together; the schema's own examples and the
# coverage phase's boundary cases come on top. scripts/test's default run takes 5 (about a minute
# for the 71 operations on two cores); TTS_FUZZ_EXAMPLES=20 or more fuzzes in full (about four).
EXAMPLES = int(os.environ.get("TTS_FUZZ_EXAMPLES", "5"))


@pytest.fixture(autouse=True)
def node_id_attribute(request):
    """schemathesis (4.32) reads and sets `request.node._nodeid`, an attribute pytest 9.2 no longer
    has (a node's id is in `_id` now): without one its tests fail before any request is sent."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


@dataclass
class Fuzzing:
    key: str  # the admin key every request carries
    own_key_id: str
    victim_key_ids: list[str]
    job_ids: list[str]


@pytest.fixture
def fuzzing(live_stack) -> Fuzzing:
    """An organization for the fuzzer. Its limits let requests through to the work they ask for,
    except that its plan takes at most 64 characters of input, so that no generated text takes
    long to synthesise (longer ones are refused: a documented 400); a concurrency cap of 2 keeps
    the jobs it submits from piling up on the one worker. Keys made to be revoked, and finished
    jobs for the job operations to find."""
    persona = make_persona(
        "Fuzz", requests_per_minute=100_000, monthly_characters=10_000_000, concurrent_jobs=2, max_input_chars=64
    )
    own = persona.org.api_keys.get()
    victims = [persona.org.create_api_key(f"victim {i}")[0].prefix for i in range(3)]
    with live_stack.client(persona.key) as client:
        jobs = [
            client.post("/jobs", json={"input": f"Fuzz job {fmt}.", "response_format": fmt, "seed": 7}).json()["id"]
            for fmt in ("wav", "mp3")
        ]
        for job_id in jobs:
            wait_until(
                lambda job_id=job_id: client.get(f"/jobs/{job_id}").json()["status"] == "succeeded",
                120,
                f"job {job_id} did not succeed",
            )
    return Fuzzing(persona.key, own.prefix, victims, jobs)


@pytest.fixture
def api_schema(live_stack, fuzzing: Fuzzing):
    config = schemathesis.Config.from_dict(
        {
            "base-url": live_stack.base_url,
            "request-timeout": 60,  # a speech request waits for its audio
            # Requests carry the fuzzer's key (below), not generated credentials, which would only get 401s.
            "generation": {"with-security-parameters": False, "database": "none"},
        }
    )
    schema = schemathesis.openapi.from_url(f"{live_stack.base_url}/v1/openapi.json", config=config)

    def flatmap_path_parameters(ctx, path_parameters):
        """Mostly ids that exist (generated ones exist nowhere: always a 404), built-in voices too. The keys
        offered to DELETE /v1/keys/{key_id} are the victims, never the key the fuzzer uses: revoking
        it would leave every later request a 401, testing nothing."""
        known = {"job_id": fuzzing.job_ids, "key_id": fuzzing.victim_key_ids, "voice_id": ["alloy", "af_heart"]}
        if not path_parameters:
            return st.just(path_parameters)
        choices = {
            name: st.sampled_from([value if value != fuzzing.own_key_id else fuzzing.victim_key_ids[0], *known[name]])
            for name, value in path_parameters.items()
            if name in known
        }
        return st.fixed_dictionaries({**{k: st.just(v) for k, v in path_parameters.items()}, **choices})

    schema.hook(flatmap_path_parameters)
    return schema


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,  # a live server, synthesising: seconds, not milliseconds
    # The fixtures (an organization, its jobs) serve every example on purpose; bodies can be large.
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    database=None,  # nothing written to the working tree (a failure prints the request, as curl)
)
def test_every_operation_answers_as_its_schema_says(case, fuzzing: Fuzzing):
    case.call_and_validate(headers={"Authorization": f"Bearer {fuzzing.key}"}, checks=CHECKS)


def test_the_speech_operation_documents_instructions_stream_format_and_its_events(live_stack):
    document = httpx.get(f"{live_stack.base_url}/v1/openapi.json").json()
    components = document["components"]["schemas"]

    def resolve(schema: dict) -> dict:
        return components[schema["$ref"].rsplit("/", 1)[1]] if "$ref" in schema else schema

    speech = document["paths"]["/v1/audio/speech"]["post"]
    body = resolve(speech["requestBody"]["content"]["application/json"]["schema"])
    assert {"instructions", "stream_format"} <= set(body["properties"])
    assert resolve(body["properties"]["stream_format"]["allOf"][0])["enum"] == ["audio", "sse"]
    assert resolve(body["properties"]["input_format"]["allOf"][0])["enum"] == ["text", "ssml"]  # fuzzed with the rest
    content = speech["responses"]["200"]["content"]
    assert {"audio/mpeg", "audio/wav", "text/event-stream"} <= set(content)
    event = content["text/event-stream"]["schema"]["properties"]["data"]
    assert event["contentMediaType"] == "application/json"
    kinds = resolve(event["contentSchema"])["discriminator"]["mapping"]
    assert set(kinds) == {"speech.audio.delta", "speech.audio.segment", "speech.audio.done", "error"}
    segment = resolve({"$ref": kinds["speech.audio.segment"]})
    assert {"words", "marks"} <= set(segment["properties"])
    assert resolve(speech["responses"]["400"]["content"]["application/json"]["schema"])["required"] == ["error"]
