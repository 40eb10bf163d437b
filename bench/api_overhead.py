"""How much the API, queue and worker add to a synthesis.

With the FULL-size random checkpoint (official shapes, real compute cost), time one request
through uvicorn → Celery/Redis → worker → Redis Stream → response, against a direct engine call
(the same streaming generation the worker runs) in this process on the same text, same seed,
same token budget. Runs alternate (direct, API,
direct, …) so that drift on this noisy machine hits both alike. Prints medians and the ratio.

    .venv/bin/python bench/api_overhead.py [--runs 5] [--size full]
"""

from __future__ import annotations

import statistics
import time

from common import Stack, checkpoint, setup

# ~200 audio tokens: token_budget() of this text is 214; random weights rarely stop early.
TEXT = "Hello there, my old friend."


def main() -> None:
    args = setup(__doc__)
    import httpx
    import numpy as np
    from django.conf import settings

    from inference.chattts.engine import ChatTTSEngine
    from inference.chattts.params import TOKENS_PER_SECOND, ChatTTSParams, token_budget
    from inference.chattts.spec import SPEC as CHATTTS
    from inference.chattts.voices import VOICES
    from inference.engine import SynthesisRequest
    from inference.spec import SAMPLE_RATE

    model_dir = checkpoint(args.size)
    prepared = CHATTTS.prepare(TEXT)
    budget = [token_budget(s) for s in prepared.segments]
    print(f"checkpoint: {args.size} (random weights: noise), text: {TEXT!r}, token budget: {budget}")

    engine = ChatTTSEngine.load(model_dir, device="cpu", fixed_length=True)
    engine.warm_up()

    chunk_tokens = round(settings.TTS_STREAM_CHUNK_SECONDS * TOKENS_PER_SECOND)

    def direct(seed: int) -> tuple[float, float]:
        # The same work the worker does for a speech request: ChatTTS's streaming generation.
        params = ChatTTSParams(voice_seed=VOICES["alloy"].seed, seed=seed)
        started = time.perf_counter()
        pieces = list(engine.stream(SynthesisRequest(prepared.segments, params, budget), chunk_tokens=chunk_tokens))
        elapsed = time.perf_counter() - started
        return elapsed, sum(len(p) for p in pieces) / SAMPLE_RATE

    worker_times: list[float] = []
    with Stack(model_dir, TTS_BENCH_FIXED_LENGTH="1") as stack, httpx.Client(timeout=600) as client:

        def api(seed: int) -> tuple[float, float]:
            started = time.perf_counter()
            r = client.post(
                f"{stack.base_url}/v1/audio/speech",
                headers={"Authorization": f"Bearer {stack.key}"},
                json={"input": TEXT, "voice": "alloy", "seed": seed, "response_format": "pcm"},
            )
            elapsed = time.perf_counter() - started
            r.raise_for_status()
            assert r.headers["x-cache"] == "miss"
            worker_times.append(stack.job_run_seconds(r.headers["x-job-id"]))
            return elapsed, len(r.content) / 2 / SAMPLE_RATE

        api(10_000)  # warm the web process (normalisers, connections)
        direct_times, api_times = [], []
        for run in range(args.runs):
            d, d_audio = direct(run)
            a, a_audio = api(run)
            direct_times.append(d)
            api_times.append(a)
            same = "same audio length" if np.isclose(d_audio, a_audio, atol=0.15) else "DIFFERENT audio length"
            print(
                f"run {run}: direct {d:.3f} s, api {a:.3f} s (worker's own run {worker_times[-1]:.3f} s; "
                f"{d_audio:.2f} s / {a_audio:.2f} s of audio, {same})"
            )
    d_med, a_med = statistics.median(direct_times), statistics.median(api_times)
    print(f"direct engine median: {d_med:.3f} s")
    print(f"through API median:   {a_med:.3f} s")
    print(f"worker's own median:  {statistics.median(worker_times[1:]):.3f} s (job started → finished)")
    transport = [a - w for a, w in zip(api_times, worker_times[1:], strict=True)]
    print(
        f"service overhead:     {1000 * statistics.median(transport):.0f} ms median per request "
        "(API time minus the worker's own run: auth, queue, stream, encoding)"
    )
    print(f"ratio api/direct:     {a_med / d_med:.3f}  (target <= 1.05)")
    print(f"added per request:    {1000 * (a_med - d_med):.0f} ms")


if __name__ == "__main__":
    main()
