"""Kokoro-82M through the whole service, beside ChatTTS: the model picked per request, its licence
in the listings, its voices (OpenAI's names, its own, organizations' mixes), what it refuses and
why, its determinism (the seed changes nothing; every request is cached), word timings in every
way captions are given, formats, jobs, lexicons with phonemes, speed, plan limits and billing.

The live stack runs a Kokoro worker on the tiny random checkpoint: noise, not speech, but every
length, timing and byte count here is real."""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest
import websockets

from billing.models import UsageEvent
from inference.spec import SAMPLE_RATE
from synthesis.models import Job
from tests.conftest import make_persona
from tests.factories import own_plan
from tests.test_concurrent_load import speak_all
from tests.test_websocket import collect
from voices.models import Voice

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "The quick brown fox jumps over the lazy dog. It costs $5 today."


def speak(client, **body) -> httpx.Response:
    body = {"model": "kokoro", "voice": "af_heart", "response_format": "pcm", **body}
    response = client.post("/audio/speech", json=body)
    assert response.status_code == 200, response.text
    return response


def sse_events(response: httpx.Response) -> list[dict]:
    return [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]


def assert_words_fit(segment: dict) -> None:
    words = segment["words"]
    assert words, segment
    assert all(w["text"].strip() for w in words)
    starts = [w["start"] for w in words]
    assert starts == sorted(starts)
    assert all(w["start"] <= w["end"] for w in words)
    assert segment["start"] - 0.01 <= words[0]["start"] and words[-1]["end"] <= segment["end"] + 0.05


def test_the_models_are_listed_with_their_licences_languages_and_features(live_stack, owner):
    with live_stack.client(owner.key) as client:
        listed = {m["id"]: m for m in client.get("/models").json()["data"]}
        kokoro = client.get("/models/kokoro").json()
        versioned = client.get("/models/kokoro-v1.0")
    assert {"kokoro", "chattts", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"} <= set(listed)
    assert listed["kokoro"]["license"]["weights"]["spdx"] == "Apache-2.0"
    assert listed["kokoro"]["license"]["commercial_use"] is True
    assert listed["chattts"]["license"]["weights"]["spdx"] == "CC-BY-NC-4.0"
    assert listed["chattts"]["license"]["commercial_use"] is False
    assert listed["kokoro"]["languages"] == ["en", "zh", "es", "fr", "hi", "it", "ja", "pt"]
    assert listed["kokoro"]["features"]["word_timings"] is True
    assert listed["chattts"]["features"]["word_timings"] is False and "temperature" in listed["chattts"]["options"]
    assert listed["tts-1"]["engine"] == "chattts"  # OpenAI's names: the deployment's default model
    assert kokoro == listed["kokoro"] and versioned.json()["engine"] == "kokoro"
    # The tests' tiny checkpoints: random weights, and the listing says so.
    assert listed["kokoro"]["random_weights"] is True and listed["chattts"]["random_weights"] is True
    # Open WebUI's listing, without a key: every model with its weights' licence.
    open_webui = httpx.get(f"{live_stack.base_url}/v1/audio/models").json()["models"]
    licences = {m["id"]: (m["license"], m["commercial_use"]) for m in open_webui}
    assert licences["kokoro"] == ("Apache-2.0", True) and licences["chattts"] == ("CC-BY-NC-4.0", False)


def test_each_model_has_its_voices_and_openais_names_on_both(live_stack, owner):
    with live_stack.client(owner.key) as client:
        kokoro = {v["id"]: v for v in client.get("/audio/voices?model=kokoro").json()["voices"]}
        chattts = {v["id"] for v in client.get("/audio/voices?model=chattts").json()["voices"]}
        listed = client.get("/voices?model=kokoro").json()
        alloy = speak(client, input="Hello there.", voice="alloy")
        af_alloy = speak(client, input="Hello there.", voice="af_alloy")
        onyx = speak(client, input="Hello there.", voice="onyx")
        wrong = client.post("/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": "bob"})
        chattts_only = client.post("/audio/speech", json={"model": "chattts", "input": "Hi.", "voice": "af_heart"})
        missing = client.get("/audio/voices?model=whisper-1")
    assert {"alloy", "nova", "cedar", "af_heart", "bm_george", "zf_xiaobei"} <= set(kokoro)
    assert kokoro["zf_xiaobei"]["language"] == "zh" and kokoro["bm_george"]["language"] == "en-gb"
    assert kokoro["ef_dora"]["language"] == "es" and kokoro["jf_alpha"]["language"] == "ja" and len(kokoro) == 13 + 54
    assert "af_alloy" in kokoro["alloy"]["description"]  # which of its voices OpenAI's name is
    assert "af_heart" not in chattts and "alloy" in chattts
    assert listed["model"] == "kokoro" and {"af_heart", "alloy"} <= {v["voice_id"] for v in listed["data"]}
    assert alloy.content == af_alloy.content  # the same voice under OpenAI's name (deterministic)
    assert alloy.content != onyx.content
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "voice"
    assert "'kokoro'" in wrong.json()["error"]["message"] and "af_heart" in wrong.json()["error"]["message"]
    assert chattts_only.status_code == 400 and "'chattts'" in chattts_only.json()["error"]["message"]
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


@pytest.mark.parametrize(
    ("body", "param", "needle"),
    [
        ({"temperature": 0.5}, "temperature", "'temperature' is not supported with the model 'kokoro'"),
        ({"top_p": 0.5}, "top_p", "'top_p'"),
        ({"top_k": 5}, "top_k", "'top_k'"),
        ({"refine_text": True}, "refine_text", "'refine_text'"),
        ({"refine_prompt": "[oral_2]"}, "refine_prompt", "'refine_prompt'"),
        ({"input": "Hello [laugh] there."}, "input", "[laugh]"),
        ({"input": "Hello, Привет."}, "input", "Russian"),
        ({"input": "안녕하세요"}, "input", "Korean"),
    ],
)
def test_what_kokoro_cannot_take_is_refused_naming_it_and_the_model(live_stack, owner, body, param, needle):
    with live_stack.client(owner.key) as client:
        refused = client.post("/audio/speech", json={"model": "kokoro", "input": "Hello.", **body})
    error = refused.json()["error"]
    assert refused.status_code == 400 and error["param"] == param, refused.text
    assert needle in error["message"] and "kokoro" in error["message"]
    assert not Job.objects.exists()  # refused before anything was queued or billed


def test_kokoro_is_deterministic_the_seed_changes_nothing_and_every_request_is_cached(
    live_stack, owner, empty_audio_cache
):
    with live_stack.client(owner.key) as client:
        first = speak(client, input=TEXT, seed=1)
        other_seed = speak(client, input=TEXT, seed=2)
        unseeded = speak(client, input=TEXT)
    assert first.headers["x-cache"] == "miss" and first.headers["x-model"] == "kokoro"
    assert other_seed.headers["x-cache"] == "hit" and unseeded.headers["x-cache"] == "hit"
    assert first.content == other_seed.content == unseeded.content


def test_every_format_and_rate_on_kokoro(live_stack, owner):
    with live_stack.client(owner.key) as client:
        pcm = speak(client, input=TEXT)
        seconds = len(pcm.content) / 2 / SAMPLE_RATE
        ulaw = speak(client, input=TEXT, response_format="ulaw_8000")
        pcm16k = speak(client, input=TEXT, response_format="pcm_16000")
        mp3 = speak(client, input=TEXT, response_format="mp3")
    assert seconds > 0.5
    assert ulaw.headers["content-type"] == "audio/basic" and abs(len(ulaw.content) - 8000 * seconds) <= 8
    assert abs(len(pcm16k.content) / 2 - 16000 * seconds) <= 16
    assert mp3.headers["content-type"] == "audio/mpeg" and mp3.content[:3] in (b"ID3", b"\xff\xfb", b"\xff\xf3")


def test_word_timings_come_with_every_kind_of_caption(live_stack, owner):
    with live_stack.client(owner.key) as client:
        streamed = client.post(
            "/audio/speech",
            json={"model": "kokoro", "voice": "af_heart", "input": TEXT, "stream_format": "sse", "seed": 3},
        )
        job = client.post("/jobs", json={"model": "kokoro", "voice": "bm_george", "input": " ".join([TEXT] * 3)}).json()
        for _ in range(600):
            done = client.get(f"/jobs/{job['id']}").json()
            if done["status"] in ("succeeded", "failed"):
                break
            asyncio.run(asyncio.sleep(0.1))
        captions = client.get(f"/jobs/{job['id']}/captions").json()["segments"]
        srt = client.get(f"/jobs/{job['id']}/captions?format=srt").text
        chattts = client.post(
            "/audio/speech", json={"model": "chattts", "input": TEXT, "stream_format": "sse", "seed": 3}
        )
    segments = [e for e in sse_events(streamed) if e["type"] == "speech.audio.segment"]
    assert [s["text"] for s in segments] == ["The quick brown fox jumps over the lazy dog.", "It costs $5 today."]
    for segment in segments + captions:
        assert_words_fit(segment)
    assert [w["text"] for w in segments[0]["words"]][:4] == ["The", "quick", "brown", "fox"]
    assert segments[1]["words"][0]["start"] >= segments[0]["end"]  # on the audio as sent, after the pause
    assert done["status"] == "succeeded" and len(captions) == 6
    assert srt.count(" --> ") == 6  # SRT stays one cue per sentence
    # ChatTTS claims nothing finer than a sentence.
    assert all("words" not in e for e in sse_events(chattts) if e["type"] == "speech.audio.segment")


def test_kokoros_spanish_and_japanese_voices_speak_their_language_word_by_word(live_stack, owner):
    with live_stack.client(owner.key) as client:
        spanish = client.post(
            "/audio/speech",
            json={"model": "kokoro", "voice": "ef_dora", "input": "Tengo 3 gatos.", "stream_format": "sse"},
        )
        japanese = client.post(
            "/audio/speech",
            json={"model": "kokoro", "voice": "jf_alpha", "input": "猫が3匹います。", "stream_format": "sse"},
        )
    words = {}
    for name, response in (("es", spanish), ("ja", japanese)):
        assert response.status_code == 200, response.text
        (segment,) = [e for e in sse_events(response) if e["type"] == "speech.audio.segment"]
        assert_words_fit(segment)
        words[name] = [w["text"] for w in segment["words"]]
    assert words["es"] == ["Tengo", "tres", "gatos"]  # the number in Spanish: the voice's language
    assert words["ja"] == ["猫", "が", "三", "匹", "います"]


def test_the_websocket_speaks_kokoro_with_word_timings_in_both_protocols(live_stack, owner):
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
    headers = {"Authorization": f"Bearer {owner.key}"}

    async def v1():
        async with websockets.connect(url, additional_headers=headers) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "synthesize", "model": "kokoro", "voice": "af_sky", "text": TEXT}))
            return await collect(ws)

    async def v2():
        async with websockets.connect(url, additional_headers=headers, subprotocols=["tts.v2"]) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "begin", "id": "u", "model": "kokoro", "voice": "af_sky"}))
            for word in "One sentence here. And another one.".split(" "):
                await ws.send(json.dumps({"type": "text", "id": "u", "text": word + " "}))
            await ws.send(json.dumps({"type": "close", "id": "u"}))
            return await collect(ws)

    start, audio, end = asyncio.run(v1())
    assert start["type"] == "start" and len(audio) > 0
    for segment in end["segments"]:
        assert_words_fit(segment)
    _, streamed, finished = asyncio.run(v2())
    assert len(streamed) > 0 and [s["text"] for s in finished["segments"]] == ["One sentence here.", "And another one."]
    for segment in finished["segments"]:
        assert_words_fit(segment)


def test_kokoro_is_billed_at_its_plans_weight_and_the_ledger_names_it(live_stack, owner):
    text = "Billing at a weight, please."
    with live_stack.client(owner.key) as client:
        speak(client, input=text, voice="am_adam")
        speak(client, input=text, model="chattts", voice="alloy", seed=4)
    rows = {row.model: row for row in UsageEvent.objects.filter(organization=owner.org)}
    assert rows["kokoro"].characters == math.ceil(len(text) * 0.5)  # the seeded plans' Kokoro weight
    assert rows["chattts"].characters == len(text)


def test_a_plan_without_kokoro_refuses_it_and_says_so_in_the_listing(live_stack, owner):
    own_plan(owner.org, "chattts-only", allowed_models=["chattts"])
    with live_stack.client(owner.key) as client:
        refused = client.post("/audio/speech", json={"model": "kokoro", "input": "Hi."})
        listed = {m["id"]: m["available"] for m in client.get("/models").json()["data"]}
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "model_not_in_plan"
    assert "'kokoro'" in refused.json()["error"]["message"]
    assert listed["kokoro"] is False and listed["chattts"] is True


def test_an_organizations_kokoro_voice_is_a_mix_and_what_kokoro_cannot_make_is_refused(live_stack, owner, outsider):
    mix = [{"voice": "af_heart", "weight": 3}, {"voice": "bm_george", "weight": 1}]
    with live_stack.client(owner.key) as client, live_stack.client(outsider.key) as other:
        created = client.post("/audio/voices", json={"model": "kokoro", "name": "Blend", "mix": mix})
        assert created.status_code == 201, created.text
        voice = created.json()
        blended = speak(client, input="Mixing voices.", voice=voice["id"])
        heart = speak(client, input="Mixing voices.", voice="af_heart")
        george = speak(client, input="Mixing voices.", voice="bm_george")
        by_seed = client.post("/audio/voices", json={"model": "kokoro", "name": "Seeded", "seed": 5})
        recording = client.post(
            "/audio/voices",
            data={"model": "kokoro", "name": "Cloned", "transcript": "Hello there."},
            files={"audio": ("me.wav", b"RIFF", "audio/wav")},
        )
        mixed_chattts = client.post("/audio/voices", json={"model": "chattts", "name": "Nope", "mix": mix})
        unknown = client.post(
            "/audio/voices", json={"model": "kokoro", "name": "Bad", "mix": [{"voice": "x", "weight": 1}]}
        )
        stolen = other.post("/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": voice["id"]})
    assert voice["model"] == "kokoro" and voice["source"] == "mix"
    assert voice["mix"] == [["af_heart", 0.75], ["bm_george", 0.25]]
    assert Voice.objects.get(pk=voice["id"]).model == "kokoro"
    assert blended.content not in (heart.content, george.content)
    assert by_seed.status_code == 400 and "'kokoro'" in by_seed.json()["error"]["message"]
    assert recording.status_code == 400 and "recording" in recording.json()["error"]["message"]
    assert "mix" in recording.json()["error"]["message"]  # what to do instead
    assert mixed_chattts.status_code == 400 and "'chattts'" in mixed_chattts.json()["error"]["message"]
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "mix"
    assert stolen.status_code == 400 and stolen.json()["error"]["param"] == "voice"


def test_lexicon_phonemes_are_read_by_kokoro_and_chattts_reads_the_alias(live_stack, owner, empty_audio_cache):
    with live_stack.client(owner.key) as client:
        lexicon = client.post(
            "/lexicons",
            json={
                "name": "names",
                "entries": [{"text": "Kokoro", "phonemes": "kˈOkəɹO"}, {"text": "SQL", "alias": "sequel"}],
            },
        ).json()
        plain = speak(client, input="Kokoro speaks.")
        read = speak(client, input="Kokoro speaks.", lexicons=[lexicon["id"]])
        again = speak(client, input="Kokoro speaks.", lexicons=[lexicon["id"]])
        chattts_plain = speak(client, model="chattts", voice="alloy", input="Kokoro speaks.", seed=8)
        chattts_read = speak(
            client, model="chattts", voice="alloy", input="Kokoro speaks.", seed=8, lexicons=[lexicon["id"]]
        )
        aliased = speak(client, input="Use SQL.", lexicons=[lexicon["id"]])
        typed = speak(client, input="Use sequel.")
    assert read.content != plain.content and again.headers["x-cache"] == "hit"
    assert chattts_read.content == chattts_plain.content  # phonemes only: ChatTTS reads the text as it is
    assert chattts_read.headers["x-cache"] == "hit"
    assert aliased.content == typed.content  # an alias works on Kokoro as on ChatTTS


def test_speed_changes_kokoros_durations(live_stack, owner):
    with live_stack.client(owner.key) as client:
        normal = speak(client, input=TEXT)
        fast = speak(client, input=TEXT, speed=2.0)
        slow = speak(client, input=TEXT, speed=0.5)
    assert len(fast.content) < len(normal.content) < len(slow.content)


def test_openais_sdk_speaks_with_kokoro(live_stack, owner):
    import openai  # noqa: PLC0415  (the client a user would run)

    client = openai.OpenAI(base_url=f"{live_stack.base_url}/v1", api_key=owner.key, max_retries=0)
    audio = client.audio.speech.create(model="kokoro", voice="nova", input="Hello from Kokoro.", response_format="wav")
    assert audio.content[:4] == b"RIFF" and len(audio.content) > 44 + 2 * SAMPLE_RATE // 4
    assert Job.objects.filter(model="kokoro", voice="nova").exists()


def test_identical_kokoro_requests_share_one_generation_seeded_or_not(live_stack):
    org = make_persona("Echo Kokoro", concurrent_jobs=8, requests_per_minute=1000)
    body = {"model": "kokoro", "voice": "af_heart", "input": "Welcome aboard, everybody, at the same time."}
    responses = speak_all(live_stack.base_url, org.key, [body, body, {**body, "seed": 3}, body])
    assert [r.status_code for r in responses] == [200] * 4
    assert len({r.content for r in responses}) == 1 and responses[0].content
    assert Job.objects.filter(organization=org.org).count() == 1  # one generation for four requests
    assert sorted(r.headers["x-cache"] for r in responses).count("miss") == 1
    assert UsageEvent.objects.filter(organization=org.org, cached=True).count() == 3


def test_a_long_form_kokoro_job_beyond_the_request_limit_is_captioned_word_by_word(live_stack, owner):
    own_plan(owner.org, "short-requests", max_input_chars=100, max_job_chars=2000)
    article = " ".join(f"Paragraph {n} starts here, and it goes on for a little while." for n in range(6))
    assert 100 < len(article) <= 2000
    with live_stack.client(owner.key) as client:
        refused = client.post("/audio/speech", json={"model": "kokoro", "input": article})
        job = client.post("/jobs", json={"model": "kokoro", "voice": "am_adam", "input": article}).json()
        for _ in range(900):
            done = client.get(f"/jobs/{job['id']}").json()
            if done["status"] in ("succeeded", "failed"):
                break
            asyncio.run(asyncio.sleep(0.1))
        captions = client.get(f"/jobs/{job['id']}/captions").json()["segments"]
        audio = client.get(f"/jobs/{job['id']}/audio")
    assert refused.status_code == 400 and "/v1/jobs" in refused.json()["error"]["message"]
    assert done["status"] == "succeeded" and done["model"] == "kokoro", done
    assert (
        len(captions) == 6
        and [c["text"] for c in captions][0] == "Paragraph 0 starts here, and it goes on for a little while."
    )
    for segment in captions:
        assert_words_fit(segment)
    assert audio.status_code == 200 and audio.headers["content-type"] == "audio/mpeg"
    row = UsageEvent.objects.get(job_id=job["id"])
    assert row.model == "kokoro" and row.characters == math.ceil(len(article) * 0.5)
