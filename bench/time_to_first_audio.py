"""Time to the first audio byte: over HTTP streaming and over the WebSocket, against the engine's
own time to its first chunk in this process, same text, same run (full-size random checkpoint).
Also the engine's first chunk with ChatTTS's stream defaults (skip 2 yields, stream_speed 12000)
against our tuning (no skipped yields, chunks that keep up with generation): before/after.

    .venv/bin/python bench/time_to_first_audio.py [--runs 5]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

from common import Stack, checkpoint, setup

TEXT = "Hello there, my old friend. It has been a long time."


def main() -> None:
    args = setup(__doc__)
    import ChatTTS
    import httpx
    import websockets

    from inference.chattts.engine import ChatTTSEngine
    from inference.chattts.params import ChatTTSParams
    from inference.chattts.spec import SPEC as CHATTTS
    from inference.chattts.voices import VOICES
    from inference.engine import SynthesisRequest

    model_dir = checkpoint(args.size)
    segments = CHATTTS.prepare(TEXT).segments
    engine = ChatTTSEngine.load(model_dir, device="cpu", fixed_length=True)
    engine.warm_up()
    voice = VOICES["alloy"].seed

    def engine_first(seed: int) -> float:
        started = time.perf_counter()
        chunks = engine.stream(SynthesisRequest(segments, ChatTTSParams(voice_seed=voice, seed=seed)))
        next(chunks)
        elapsed = time.perf_counter() - started
        chunks.close()
        return elapsed

    def chattts_defaults_first(seed: int) -> float:
        code, refine = engine.chattts_params(ChatTTSParams(voice_seed=voice, seed=seed), 400)
        code.stream_batch, code.stream_speed, code.pass_first_n_batches = 24, 12000, 2  # ChatTTS's defaults
        started = time.perf_counter()
        gen = engine.chat.infer(
            [segments[0]],
            stream=True,
            split_text=False,
            skip_refine_text=True,
            params_infer_code=code,
            params_refine_text=refine,
        )
        for wavs in gen:
            if wavs.size:
                break
        elapsed = time.perf_counter() - started
        gen.close()
        return elapsed

    assert isinstance(ChatTTS.Chat, type)
    results: dict[str, list[float]] = {"engine": [], "engine_defaults": [], "http": [], "websocket": []}
    with Stack(model_dir, TTS_BENCH_FIXED_LENGTH="1") as stack, httpx.Client(timeout=600) as client:
        headers = {"Authorization": f"Bearer {stack.key}"}

        def http_first(seed: int) -> float:
            body = {"input": TEXT, "voice": "alloy", "seed": seed, "response_format": "pcm"}
            started = time.perf_counter()
            with client.stream("POST", f"{stack.base_url}/v1/audio/speech", json=body, headers=headers) as r:
                r.raise_for_status()
                next(r.iter_raw())
                return time.perf_counter() - started

        async def ws_first(seed: int) -> float:
            url = stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
            async with websockets.connect(url, additional_headers=headers, max_size=None) as ws:
                await ws.recv()  # ready
                started = time.perf_counter()
                await ws.send(json.dumps({"type": "synthesize", "id": "b", "text": TEXT, "seed": seed}))
                while not isinstance(await ws.recv(), bytes):
                    pass
                elapsed = time.perf_counter() - started
                await ws.send(json.dumps({"type": "cancel", "id": "b"}))
                return elapsed

        http_first(99_999)  # warm the web process and the worker
        stack.wait_idle()
        engine_first(99_999)  # and this process's engine
        for run in range(args.runs):
            # Each measurement starts with the CPU to itself: the worker stops a cancelled job at its
            # next chunk, so wait until it is idle.
            results["engine"].append(engine_first(run))
            results["http"].append(http_first(1000 + run))
            stack.wait_idle()
            results["websocket"].append(asyncio.run(ws_first(2000 + run)))
            stack.wait_idle()
            results["engine_defaults"].append(chattts_defaults_first(run))
            print(f"run {run}: " + ", ".join(f"{k} {v[-1] * 1000:.0f} ms" for k, v in results.items()), flush=True)
    med = {k: statistics.median(v) * 1000 for k, v in results.items()}
    added = {k: med[k] - med["engine"] for k in ("http", "websocket")}
    print(f"engine first chunk, ChatTTS defaults: {med['engine_defaults']:.0f} ms")
    print(f"engine first chunk, tuned:            {med['engine']:.0f} ms")
    print(f"HTTP first byte:       {med['http']:.0f} ms (+{added['http']:.0f} ms)")
    print(f"WebSocket first frame: {med['websocket']:.0f} ms (+{added['websocket']:.0f} ms)")
    print("target: the service adds <= 50 ms")


if __name__ == "__main__":
    main()
