"""Zero retention: an organization may require it (or allow it per request); then no input text and
no audio is kept once a request is answered. Proved by a marker text sent through every kind of
request (REST, SSE, an asynchronous job, WebSocket tts.v1 and tts.v2), then looked for in every
text column of the database, every key of Redis and the log files of the web and worker processes;
the same search finds the marker of a request made without it (the search can fail)."""

from __future__ import annotations

import asyncio
import json
import secrets
import string

import pytest
import websockets
from django.apps import apps
from django.db import models
from django.db.models.functions import Cast

from accounts.models import Organization
from billing.models import UsageEvent
from synthesis.models import Job
from tests.conftest import PERSONA_RATE, make_persona
from tests.test_websocket import collect, ws_url
from tests.waiting import wait_until
from tts_saas.redis import get_redis

pytestmark = pytest.mark.django_db(transaction=True)


def new_marker() -> str:
    return "Marker" + "".join(secrets.choice(string.ascii_lowercase) for _ in range(10))


def in_database(marker: str) -> list[str]:
    found = []
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if isinstance(field, models.CharField | models.TextField):
                hit = model._default_manager.filter(**{f"{field.name}__contains": marker}).exists()
            elif isinstance(field, models.JSONField):
                cast = model._default_manager.annotate(_text=Cast(field.name, models.TextField()))
                hit = cast.filter(_text__contains=marker).exists()
            else:
                continue
            if hit:
                found.append(f"{model._meta.label}.{field.name}")
    return found


def in_redis(marker: str) -> list[str]:
    r, needle, found = get_redis(), marker.encode(), []
    for key in r.scan_iter(count=1000):
        kind = r.type(key)
        if kind == b"string":
            values = [r.get(key) or b""]
        elif kind == b"hash":
            values = [*r.hgetall(key).keys(), *r.hgetall(key).values()]
        elif kind == b"list":
            values = r.lrange(key, 0, -1)
        elif kind == b"set":
            values = list(r.smembers(key))
        elif kind == b"zset":
            values = r.zrange(key, 0, -1)
        elif kind == b"stream":
            values = [v for _, fields in r.xrange(key) for v in fields.values()]
        else:
            values = []
        if needle in key or any(needle in v for v in values):
            found.append(key.decode(errors="replace"))
    return found


def in_logs(live_stack, marker: str) -> list[str]:
    logs = live_stack.web.log_path.parent
    return [p.name for p in logs.iterdir() if p.is_file() and marker in p.read_text(errors="replace")]


def everywhere(live_stack, marker: str) -> list[str]:
    return in_database(marker) + in_redis(marker) + in_logs(live_stack, marker)


def speak_every_way(live_stack, key: str, marker: str, **flags) -> None:
    """The marker through REST, SSE, a job, WebSocket v1 and v2; every answer checked whole."""
    text = f"Please say {marker} now."
    body = {"model": "kokoro", "voice": "af_heart", "seed": 5, **flags}
    with live_stack.client(key) as client:
        rest = client.post("/audio/speech", json={**body, "input": text, "response_format": "wav"})
        assert rest.status_code == 200 and rest.content[:4] == b"RIFF", rest.text
        sse = client.post("/audio/speech", json={**body, "input": text + " Again.", "stream_format": "sse"})
        assert sse.status_code == 200 and "speech.audio.done" in sse.text
        job = client.post("/jobs", json={**body, "input": text + " Later."})
        assert job.status_code == 202, job.text
        job_id = job.json()["id"]
        wait_until(lambda: client.get(f"/jobs/{job_id}").json()["status"] == "succeeded", 120, "the job")
        audio = client.get(f"/jobs/{job_id}/audio")
        assert audio.status_code == 200 and len(audio.content) > 1000

    async def websocket():
        headers = {"Authorization": f"Bearer {key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "synthesize", "id": "v1", "text": text + " Live.", **body}))
            _, sound, end = await collect(ws)
            assert end["type"] == "end" and sound, end
        async with websockets.connect(ws_url(live_stack), additional_headers=headers, subprotocols=["tts.v2"]) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "begin", "id": "v2", **body}))
            await ws.send(json.dumps({"type": "text", "id": "v2", "text": text + " Streamed in."}))
            await ws.send(json.dumps({"type": "close", "id": "v2"}))
            _, sound, end = await collect(ws)
            assert end["type"] == "end" and sound, end

    asyncio.run(websocket())


def test_an_organization_that_requires_zero_retention_keeps_nothing_of_any_request(live_stack):
    zero = make_persona("Zeroco", requests_per_minute=PERSONA_RATE)
    Organization.objects.filter(pk=zero.org.pk).update(data_retention="zero")
    marker = new_marker()
    speak_every_way(live_stack, zero.key, marker)
    assert everywhere(live_stack, marker) == []
    # Billing records stay (without the text), and a job's audio was handed out once.
    assert UsageEvent.objects.filter(organization=zero.org).count() == 5
    job = Job.objects.get(organization=zero.org, interactive=False)
    assert job.zero_retention and job.input == "" and job.segments == [] and not job.result
    with live_stack.client(zero.key) as client:
        again = client.get(f"/jobs/{job.id}/audio")
        captions = client.get(f"/jobs/{job.id}/captions")
    assert again.status_code == 410 and again.json()["error"]["code"] == "audio_gone"
    assert captions.status_code == 404


def test_per_request_zero_retention_where_allowed_and_the_search_finds_what_is_kept(live_stack):
    persona = make_persona("Optco", requests_per_minute=PERSONA_RATE)
    with live_stack.client(persona.key) as client:
        refused = client.post("/audio/speech", json={"input": "Hello.", "zero_retention": True})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "zero_retention_not_allowed"
        allowed = client.put("/organization/data_retention", json={"data_retention": "optional"})
        assert allowed.status_code == 200 and allowed.json() == {"data_retention": "optional"}
        bad = client.put("/organization/data_retention", json={"data_retention": "forever"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "data_retention"
    marker = new_marker()
    speak_every_way(live_stack, persona.key, marker, zero_retention=True)
    assert everywhere(live_stack, marker) == []
    kept = new_marker()
    speak_every_way(live_stack, persona.key, kept)  # the same requests, kept as usual
    found = everywhere(live_stack, kept)
    assert "synthesis.Job.input" in found and any(key.startswith("tts:") for key in found), found
