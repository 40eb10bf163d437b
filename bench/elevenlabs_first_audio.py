"""First audio of text streamed in, word by word (an LLM's tokens, 50 ms apart): this service's own
`tts.v2` WebSocket against ElevenLabs' `stream-input` on the same service (the same text streaming
underneath: the target is the same first audio), through a private stack (Redis, uvicorn, one Kokoro
worker on the real weights, no cache). First audio: from the first word sent to the first audio
byte received. Also the alignment's end against the audio's length (they should agree).

    .venv/bin/python bench/elevenlabs_first_audio.py [--runs 5]
"""

from __future__ import annotations

import asyncio
import base64
import json
import statistics
import time

from common import ROOT, Stack, setup

REAL = ROOT / "var" / "checkpoints" / "kokoro-real"
WORD_GAP = 0.05
REPLIES = [
    "Thanks for calling the support line today. Your order left our warehouse this morning.",
    "I can help with that. The invoice was sent to your email address yesterday.",
    "Sure, let me check. Your appointment is confirmed for Tuesday at three.",
]


async def send_words(ws, text: str, wrap) -> None:
    for word in text.split():
        await ws.send(json.dumps(wrap(word + " ")))
        await asyncio.sleep(WORD_GAP)


async def tts_v2(base: str, key: str, text: str) -> float:
    import websockets

    url = base.replace("http://", "ws://") + "/v1/audio/stream"
    headers = {"Authorization": f"Bearer {key}"}
    async with websockets.connect(url, additional_headers=headers, subprotocols=["tts.v2"]) as ws:
        await ws.recv()  # ready
        begin = {"type": "begin", "id": "u1", "model": "kokoro", "voice": "jf_alpha", "format": "pcm"}
        await ws.send(json.dumps(begin))
        started = time.perf_counter()
        sender = asyncio.create_task(send_words(ws, text, lambda w: {"type": "text", "id": "u1", "text": w}))
        while not isinstance(await ws.recv(), bytes):
            pass
        first = time.perf_counter() - started
        await sender
        await ws.send(json.dumps({"type": "close", "id": "u1"}))
        while True:
            frame = await ws.recv()
            if isinstance(frame, str) and json.loads(frame).get("type") == "end":
                return first


async def eleven(base: str, key: str, text: str) -> tuple[float, float, float]:
    import websockets

    url = base.replace("http://", "ws://") + "/elevenlabs/v1/text-to-speech/jf_alpha/stream-input"
    url += "?model_id=eleven_flash_v2_5&output_format=pcm_24000"
    async with websockets.connect(url, additional_headers={"xi-api-key": key}) as ws:
        await ws.send(json.dumps({"text": " "}))
        started = time.perf_counter()
        sender = asyncio.create_task(send_words(ws, text, lambda w: {"text": w}))
        first, audio, aligned = None, 0, 0.0
        closer = asyncio.create_task(close_after(ws, sender))
        async for raw in ws:
            message = json.loads(raw)
            if message.get("audio"):
                audio += len(base64.b64decode(message["audio"]))
                first = first if first is not None else time.perf_counter() - started
            if message.get("alignment"):
                a = message["alignment"]
                aligned += (a["charStartTimesMs"][-1] + a["charDurationsMs"][-1]) / 1000
            if message.get("isFinal"):
                break
        await closer
        return first or float("nan"), audio / 2 / 24000, aligned


async def close_after(ws, sender) -> None:
    await sender
    await ws.send(json.dumps({"text": ""}))  # the end of the text


def main() -> None:
    args = setup(__doc__, runs=5)
    ours, theirs, gaps = [], [], []
    with Stack(str(REAL), engine="kokoro", TTS_CACHE_MAX_ENTRY_BYTES="1") as stack:
        asyncio.run(tts_v2(stack.base_url, stack.key, "Warm up."))
        for run in range(args.runs):
            text = REPLIES[run % len(REPLIES)]
            stack.wait_idle()
            ours.append(asyncio.run(tts_v2(stack.base_url, stack.key, text)))
            stack.wait_idle()
            first, seconds, aligned = asyncio.run(eleven(stack.base_url, stack.key, text))
            theirs.append(first)
            gaps.append(abs(seconds - aligned))
            print(
                f"run {run}: tts.v2 {ours[-1]:.3f} s, stream-input {first:.3f} s; audio {seconds:.2f} s, "
                f"alignment ends {aligned:.2f} s",
                flush=True,
            )
    print(
        f"\nfirst audio, median of {args.runs}: tts.v2 {statistics.median(ours):.3f} s, ElevenLabs stream-input "
        f"{statistics.median(theirs):.3f} s (x{statistics.median(theirs) / statistics.median(ours):.2f}); "
        f"alignment end vs audio: at most {max(gaps) * 1000:.0f} ms apart"
    )


if __name__ == "__main__":
    main()
