"""SSML through the whole service: a Twilio-style document on Kokoro with its marks at the times its
predicted durations give, breaks as silences of their length in the audio, ChatTTS's spans said
another way, every way captions and marks come back (job captions, SSE segment events, the
WebSocket end), billing by the characters spoken, and the refusals (bad XML, bombs, a voice beyond a
client token's). The live stack's workers run tiny random checkpoints: noise, not speech, but every
length, timing and byte count is real."""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
import websockets

from inference.spec import SAMPLE_RATE
from tests.test_jobs import wait_for
from tests.test_kokoro_service import sse_events
from tests.test_websocket import collect

pytestmark = pytest.mark.django_db(transaction=True)

TWILIO = (
    '<speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis" xml:lang="en-US">'
    '<p>Thanks for calling.<break time="800ms"/><mark name="number"/>Our number is '
    '<say-as interpret-as="telephone">555-0100</say-as>.</p>'
    '<p><mark name="date"/>We open on <say-as interpret-as="date" format="mdy">12/24/2026</say-as>. '
    'Say <phoneme alphabet="ipa" ph="kˈOkəɹO">Kokoro</phoneme> <mark name="twice"/>twice.</p>'
    '<break time="1s"/><mark name="end"/></speak>'
)
# The same speech as plain text: what SSML bills (its markup and breaks cost nothing).
SPOKEN = "Thanks for calling. Our number is 555-0100. We open on 12/24/2026. Say Kokoro twice."


def samples(seconds: float) -> int:
    return round(seconds * SAMPLE_RATE)


def job_result(client, body: dict) -> tuple[dict, np.ndarray, list[dict]]:
    job = client.post("/jobs", json={"response_format": "pcm", **body})
    assert job.status_code == 202, job.text
    done = wait_for(client, job.json()["id"], {"succeeded", "failed"}, timeout=240)
    assert done["status"] == "succeeded", done
    pcm = np.frombuffer(client.get(f"/jobs/{done['id']}/audio").content, dtype="<i2")
    return done, pcm, client.get(f"/jobs/{done['id']}/captions").json()["segments"]


def marks_of(segments: list[dict]) -> dict[str, dict]:
    return {m["name"]: m for s in segments for m in s.get("marks", ())}


def test_a_twilio_document_speaks_on_kokoro_with_its_marks_and_breaks_where_the_audio_has_them(live_stack, owner):
    with live_stack.client(owner.key) as client:
        done, pcm, captions = job_result(client, {"model": "kokoro", "voice": "af_heart", "input": TWILIO})
        plain = client.post("/jobs", json={"model": "kokoro", "voice": "af_heart", "input": SPOKEN}).json()
    texts = [c["text"] for c in captions]
    assert texts == [
        "Thanks for calling.",
        "Our number is 555-0100.",  # captions show the text as written...
        "We open on 12/24/2026.",
        "Say Kokoro twice.",
    ]
    spoken = [w["text"] for w in captions[1]["words"]]
    assert spoken[3:] == ["five", "five", "five", "zero", "one", "zero", "zero"]  # ...the words are what was said
    assert "December" in [w["text"] for w in captions[2]["words"]]
    marks = marks_of(captions)
    # A mark at a segment's start is its first sample, after the 800 ms break: the pause between the
    # words, counted from the end of the last word before it (the model's own trailing silence is part
    # of the break, not added to it); silence, exactly, after the segment's audio.
    assert captions[1]["start"] - captions[0]["words"][-1]["end"] == pytest.approx(0.8, abs=1e-3)
    assert captions[1]["start"] - captions[0]["end"] < 0.8
    assert not pcm[samples(captions[0]["end"]) + 24 : samples(captions[1]["start"]) - 24].any()
    assert marks["number"]["time"] == captions[1]["start"]
    assert marks["date"]["time"] == captions[2]["start"]
    # Inside a sentence: where the next word starts, from Kokoro's predicted durations.
    twice = next(w for w in captions[3]["words"] if w["text"] == "twice")
    assert marks["twice"]["time"] == twice["start"] and "approximate" not in marks["twice"]
    assert captions[3]["words"][1]["text"] == "Kokoro"  # the phoneme link spoken as its word
    # After the closing 1 s break, counted from the last word's end as every break: the end of the
    # audio, silent from the segment's end on.
    assert marks["end"]["time"] == pytest.approx(len(pcm) / SAMPLE_RATE, abs=1e-3)
    assert marks["end"]["time"] - captions[-1]["words"][-1]["end"] == pytest.approx(1.0, abs=1e-3)
    assert marks["end"]["time"] - captions[-1]["end"] < 1.0
    assert not pcm[samples(captions[-1]["end"]) + 24 :].any() and np.abs(pcm).max() > 100
    # Billed as the same speech in plain text: the markup and the breaks cost nothing.
    assert done["characters"] == plain["characters"] > 0


def test_sse_segment_events_and_the_websocket_end_carry_the_marks(live_stack, owner):
    ssml = '<speak>One <mark name="a"/>two three.<break time="300ms"/><mark name="b"/>Four.</speak>'
    with live_stack.client(owner.key) as client:
        streamed = client.post(
            "/audio/speech", json={"model": "kokoro", "voice": "am_adam", "input": ssml, "stream_format": "sse"}
        )
    assert streamed.status_code == 200, streamed.text
    segments = [e for e in sse_events(streamed) if e["type"] == "speech.audio.segment"]
    assert [s["text"] for s in segments] == ["One two three.", "Four."]
    assert [m["name"] for s in segments for m in s.get("marks", ())] == ["a", "b"]
    assert segments[1]["start"] - segments[0]["words"][-1]["end"] == pytest.approx(0.3, abs=1e-3)

    async def over_the_websocket():
        url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {owner.key}"}) as ws:
            await ws.recv()
            body = {"type": "synthesize", "model": "chattts", "text": ssml, "seed": 5, "input_format": "ssml"}
            await ws.send(json.dumps(body))
            first = await collect(ws)
            await ws.send(json.dumps({**body, "text": "<speak><b>x</b></speak>", "id": "bad"}))
            return first, await collect(ws)

    (start, audio, end), (_, _, refused) = asyncio.run(over_the_websocket())
    assert end["type"] == "end" and len(audio) > 0
    assert [m["name"] for m in end["marks"]] == ["a", "b"]
    a, b = end["marks"]
    assert a["approximate"] is True and end["segments"][0]["start"] < a["time"] < end["segments"][0]["end"]
    assert b["time"] == end["segments"][1]["start"] and "approximate" not in b  # ChatTTS: exact at an edge
    assert refused["type"] == "error" and refused["code"] == "invalid_ssml" and "<b>" in refused["message"]


def test_chattts_says_spans_another_way_each_as_its_own_segment(live_stack, owner):
    ssml = (
        "<speak>Normal words here. "
        '<prosody volume="silent">Not heard at all.</prosody> '
        '<prosody rate="x-slow" pitch="+3st">Slow and high.</prosody> '
        '<voice name="nova">Another voice.</voice> <emphasis>Stressed.</emphasis></speak>'
    )
    with live_stack.client(owner.key) as client:
        done, pcm, captions = job_result(client, {"model": "chattts", "input": ssml, "seed": 11})
        jobs = [client.get(f"/jobs/{done['id']}").json()]
    assert [c["text"] for c in captions] == [
        "Normal words here.",
        "Not heard at all.",
        "Slow and high.",
        "Another voice.",
        "Stressed.",
    ]
    silent = pcm[samples(captions[1]["start"]) : samples(captions[1]["end"])]
    assert len(silent) > 0 and not silent.any()  # volume="silent": generated, then muted
    loud = pcm[samples(captions[0]["start"]) : samples(captions[0]["end"])]
    assert np.abs(loud).max() > 100
    assert jobs[0]["status"] == "succeeded"


def test_bad_ssml_and_xml_bombs_are_400s_naming_where_and_what(live_stack, owner):
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(
            f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10)
        )
        + "]><speak>&lol9;</speak>"
    )
    xxe = '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>'
    body = {"model": "kokoro", "voice": "af_heart", "response_format": "wav"}
    with live_stack.client(owner.key) as client:
        started = time.monotonic()
        refused = {
            "bomb": client.post("/audio/speech", json={**body, "input": bomb, "input_format": "ssml"}),
            "xxe": client.post("/audio/speech", json={**body, "input": xxe, "input_format": "ssml"}),
        }
        elapsed = time.monotonic() - started
        malformed = client.post("/audio/speech", json={**body, "input": "<speak>Hi\n<break time='1s'></speak>"})
        unknown = client.post("/jobs", json={**body, "input": "<speak>Hi <audio src='x.mp3'/></speak>"})
        other_voice = client.post(
            "/audio/speech", json={**body, "input": '<speak><voice name="nobody">x</voice></speak>'}
        )
        as_text = client.post("/audio/speech", json={**body, "input": "<speak>Hi</speak>", "input_format": "text"})
        kokoro, chattts = client.get("/models/kokoro").json(), client.get("/models/chattts").json()
    for response in refused.values():
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_ssml", response.text
        assert "no DTD, entity or external reference" in response.json()["error"]["message"]
    assert elapsed < 5
    error = malformed.json()["error"]
    assert malformed.status_code == 400 and error["code"] == "invalid_ssml" and error["param"] == "input"
    assert "line 2, column" in error["message"] and "mismatched tag" in error["message"]
    assert (
        unknown.status_code == 400
        and "<audio> is not supported by model 'kokoro'" in unknown.json()["error"]["message"]
    )
    assert other_voice.status_code == 400 and "nobody" in other_voice.json()["error"]["message"]
    assert "phonemes are read as given" in kokoro["ssml"]["phoneme"] and "next word" in kokoro["ssml"]["mark"]
    assert "reads text, not phonemes" in chattts["ssml"]["phoneme"] and "approximate" in chattts["ssml"]["mark"]
    assert set(kokoro["ssml"]) == {
        "speak",
        "p",
        "s",
        "break",
        "say-as",
        "sub",
        "phoneme",
        "prosody",
        "emphasis",
        "lang",
        "voice",
        "mark",
    }
    assert as_text.status_code == 200  # said to be text: read as text, markup and all (Kokoro drops the symbols)


def test_a_client_tokens_voice_binds_ssml_voices_too_and_its_budget_counts_the_spoken_characters(live_stack, owner):
    with live_stack.client(owner.key) as client:
        token = client.post("/tokens", json={"expires_in": 120, "voice": "af_heart", "max_characters": 30}).json()
    body = {"model": "kokoro", "voice": "af_heart", "response_format": "wav"}
    with live_stack.client(token["token"]) as client:
        other = client.post("/audio/speech", json={**body, "input": '<speak><voice name="am_adam">Hi</voice></speak>'})
        # 18 characters spoken in 100 of SSML: within a budget of 30, and 13 more are not.
        ssml = (
            '<speak><p>Hello <break time="2s"/><mark name="m"/>there.</p><prosody rate="fast">Fine.</prosody></speak>'
        )
        said = client.post("/audio/speech", json={**body, "input": ssml})
        over = client.post("/audio/speech", json={**body, "input": "<speak>Thirteen more.</speak>"})
    assert other.status_code == 403 and other.json()["error"]["code"] == "voice_not_allowed"
    assert said.status_code == 200, said.text
    assert over.status_code == 403 and over.json()["error"]["code"] == "token_budget_exceeded"
    assert "needs 14 characters" in over.json()["error"]["message"] and "12 left" in over.json()["error"]["message"]


def test_lang_switches_kokoros_reading_and_numbers_for_its_span(live_stack, owner):
    ssml = '<speak>I have 3 cats. <lang xml:lang="es-ES">Tengo 3 gatos.</lang> <lang xml:lang="en">Bye.</lang></speak>'
    with live_stack.client(owner.key) as client:
        _, _, captions = job_result(client, {"model": "kokoro", "voice": "af_heart", "input": ssml})
    words = [[w["text"] for w in c["words"]] for c in captions]
    assert [c["text"] for c in captions] == ["I have 3 cats.", "Tengo 3 gatos.", "Bye."]
    assert "three" in words[0] and "tres" in words[1] and "three" not in words[1]


def test_a_spanish_or_japanese_voice_is_previewed_in_its_own_language(live_stack, owner):
    with live_stack.client(owner.key) as client:
        previews = {
            v: client.get(f"/audio/voices/{v}/preview", params={"model": "kokoro", "format": "pcm"})
            for v in ("ef_dora", "jf_alpha")
        }
        said = {
            "ef_dora": client.post(
                "/audio/speech",
                json={
                    "model": "kokoro",
                    "voice": "ef_dora",
                    "response_format": "pcm",
                    "input": "¡Hola! Así es como sueno.",
                },
            ),
            "jf_alpha": client.post(
                "/audio/speech",
                json={
                    "model": "kokoro",
                    "voice": "jf_alpha",
                    "response_format": "pcm",
                    "input": "こんにちは。これが私の声です。",
                },
            ),
        }
    for voice, preview in previews.items():
        assert preview.status_code == 200 and said[voice].status_code == 200
        assert preview.content == said[voice].content  # Kokoro is deterministic: the same text, the same audio


def test_ssml_audio_is_cached_under_its_styles_and_never_served_for_the_plain_text(live_stack, owner):
    ssml = '<speak><prosody volume="silent">Hello cache world.</prosody><break time="2s"/></speak>'
    body = {"model": "kokoro", "voice": "am_echo", "response_format": "pcm"}
    with live_stack.client(owner.key) as client:
        first = client.post("/audio/speech", json={**body, "input": ssml})
        again = client.post("/audio/speech", json={**body, "input": ssml.replace("<speak>", "<speak> ")})
        plain = client.post("/audio/speech", json={**body, "input": "Hello cache world."})
    assert first.status_code == again.status_code == plain.status_code == 200
    assert again.headers["x-cache"] == "hit" and again.content == first.content  # the same speech: cached
    silent = np.frombuffer(first.content, dtype="<i2")
    assert not silent.any() and len(silent) > samples(2.0)
    assert plain.headers["x-cache"] == "miss" and np.abs(np.frombuffer(plain.content, dtype="<i2")).max() > 100


def test_a_streamed_text_piece_that_starts_with_speak_is_read_as_text(live_stack, owner):
    async def stream():
        url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
        headers = {"Authorization": f"Bearer {owner.key}"}
        async with websockets.connect(url, additional_headers=headers, subprotocols=["tts.v2"]) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "begin", "id": "t", "model": "kokoro", "voice": "af_sky"}))
            await ws.send(json.dumps({"type": "text", "id": "t", "text": "<speak>Plain words here.</speak> "}))
            await ws.send(json.dumps({"type": "close", "id": "t"}))
            return await collect(ws)

    _, audio, end = asyncio.run(stream())
    assert end["type"] == "end" and len(audio) > 0 and "marks" not in end
    assert end["characters"] > 0


def test_ssml_behind_an_xml_declaration_is_ssml_on_every_path_and_a_doctype_is_refused(live_stack, owner):
    # Several SSML producers write `<?xml …?>` first: it was read aloud as text, markup and all, and
    # billed for it. Now it is SSML (its markup free), and a DOCTYPE is refused as it is after <speak.
    declared = '<?xml version="1.0" encoding="UTF-8"?>\n<speak>Hello <break time="500ms"/>there.</speak>'
    doctype = '<!DOCTYPE speak [<!ENTITY x "y">]><speak>Hi &x;</speak>'
    body = {"model": "kokoro", "voice": "af_heart"}
    with live_stack.client(owner.key) as client:
        done, pcm, captions = job_result(client, {**body, "input": declared})
        plain, _, _ = job_result(client, {**body, "input": "Hello there."})
        spoken = client.post("/audio/speech", json={**body, "input": declared, "response_format": "pcm"})
        refused = [
            client.post("/audio/speech", json={**body, "input": doctype}),
            client.post("/jobs", json={**body, "input": doctype}),
        ]
    assert done["characters"] == plain["characters"] > 0  # the declaration and the markup cost nothing
    (caption,) = captions  # one sentence, the break inside it: not "<speak>" read out
    hello, there = caption["words"]
    assert (hello["text"], there["text"]) == ("Hello", "there") and there["start"] - hello["end"] >= 0.5
    assert spoken.status_code == 200 and np.abs(np.frombuffer(spoken.content, dtype="<i2")).max() > 100
    for response in refused:
        assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_ssml", response.text

    async def over_the_websocket():
        url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {owner.key}"}) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "synthesize", **body, "text": declared}))
            first = await collect(ws)
            await ws.send(json.dumps({"type": "synthesize", **body, "text": doctype, "id": "bad"}))
            return first, await collect(ws)

    (_, audio, end), (_, _, bad) = asyncio.run(over_the_websocket())
    assert end["type"] == "end" and len(audio) > 0 and end["characters"] == plain["characters"]
    assert bad["type"] == "error" and bad["code"] == "invalid_ssml"
