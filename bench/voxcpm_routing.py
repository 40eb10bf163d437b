"""Speaker-sharded routing against random placement: two VoxCPM2 workers, six cloned voices, 120
requests (four clients at a time, the voices in turn, each request its own text and seed), each
worker keeping the prompts of about half the voices (TTS_VOICE_PROMPT_MB, measured from one
prompt's size). Once with routing (each voice's jobs to its owner), once without (TTS_VOICE_ROUTING
off: whichever worker is free takes a job from the shared queue), on fresh stacks.

    .venv/bin/python bench/voxcpm_routing.py [--size tiny|full] [--requests 120] [--voices 6] [--clients 4]

Prints, for each: the prompts the workers built (target with routing: at most 12), the requests'
latency (p50, p90) and errors. Random weights: noise, not speech. Asserts nothing.
"""

from __future__ import annotations

import gc
import io
import statistics
import threading
import time
import wave

import numpy as np
from common import Stack, checkpoint, setup


def recording(seconds: float, pitch: float) -> bytes:
    """A 24 kHz WAV 'speaker': a tone and a little noise."""
    t = np.arange(int(seconds * 24000)) / 24000
    noise = 0.02 * np.random.default_rng(int(pitch)).standard_normal(len(t))
    samples = ((0.3 * np.sin(2 * np.pi * pitch * t) + noise) * 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(24000)
        w.writeframes(samples.tobytes())
    return out.getvalue()


def clone_voices(stack: Stack, count: int, seconds: float) -> list[str]:
    import httpx

    headers = {"Authorization": f"Bearer {stack.key}"}
    ids = []
    with httpx.Client(base_url=f"{stack.base_url}/v1", headers=headers, timeout=600) as client:
        for i in range(count):
            files = {"audio": (f"v{i}.wav", recording(seconds, 120.0 + 37 * i), "audio/wav")}
            data = {"name": f"Speaker {i}", "model": "voxcpm", "consent": "true"}
            made = client.post("/audio/voices", data=data, files=files)
            assert made.status_code == 201, made.text
            ids.append(made.json()["id"])
        for voice_id in ids:
            while client.get(f"/audio/voices/{voice_id}").json()["status"] == "processing":
                time.sleep(0.5)
    return ids


def load(stack: Stack, voices: list[str], requests: int, clients: int) -> tuple[list[float], int]:
    import httpx

    headers = {"Authorization": f"Bearer {stack.key}"}
    latencies: list[float] = []
    errors = [0]
    taken = [0]
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(base_url=f"{stack.base_url}/v1", headers=headers, timeout=3600) as http:
            while True:
                with lock:
                    if taken[0] >= requests:
                        return
                    i = taken[0]
                    taken[0] += 1
                body = {"model": "voxcpm", "voice": voices[i % len(voices)], "input": f"Request {i:04d}.", "seed": i}
                began = time.perf_counter()
                response = http.post("/audio/speech", json=body | {"response_format": "pcm"})
                with lock:
                    latencies.append(time.perf_counter() - began)
                    errors[0] += response.status_code != 200

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors[0]


def measure(model_dir: str, routing: bool, prompt_mb: float, args) -> None:
    env = {
        "TTS_VOICE_ROUTING": "1" if routing else "0",
        "TTS_VOICE_PROMPT_MB": str(prompt_mb),
        "TTS_MAX_BATCH": str(args.clients),
        "TTS_MAX_QUEUE_WAIT": "3600",
        "TTS_QUEUE_TIMEOUT": "3600",
    }
    with Stack(model_dir, engine="voxcpm", workers=2, **env) as stack:
        voices = clone_voices(stack, args.voices, args.seconds)
        began = time.perf_counter()
        latencies, errors = load(stack, voices, args.requests, args.clients)
        wall = time.perf_counter() - began
        built = stack.worker_metric("tts_worker_voice_prompts_built")
        kept = stack.worker_metric("tts_worker_voice_prompt_bytes")
    q = statistics.quantiles(latencies, n=10)
    print(
        f"   {'routed by voice ' if routing else 'random placement'}: prompts built {sum(built):.0f} "
        f"(per worker {', '.join(f'{b:.0f}' for b in built)}; kept {', '.join(f'{k / 2**20:.2f}' for k in kept)} MB), "
        f"latency p50 {statistics.median(latencies):.3f} s, p90 {q[-1]:.3f} s, {args.requests} requests in "
        f"{wall:.1f} s, errors {errors}",
        flush=True,
    )


def prompt_size_mb(model_dir: str, seconds: float) -> float:
    """The memory of one voice's prompt (its reference and prefix) on this checkpoint."""
    from inference.batch import BatchRow
    from inference.voxcpm.engine import VoxCPMEngine
    from inference.voxcpm.params import VoxCPMParams

    engine = VoxCPMEngine.load(model_dir, device="cpu", fixed_length=True)
    pcm = np.frombuffer(recording(seconds, 120.0)[44:], dtype="<i2").astype(np.float32) / 32767
    voice = engine.voice_from_recording(pcm, "")
    list(engine.run_rows([BatchRow("a", "Hi.", VoxCPMParams.from_request({}, voice, seed=1), 1)], lambda k: False))
    return engine.prompts.bytes / 2**20


def main() -> None:
    def extra(parser):
        parser.add_argument("--requests", type=int, default=120)
        parser.add_argument("--voices", type=int, default=6)
        parser.add_argument("--clients", type=int, default=4)
        parser.add_argument("--seconds", type=float, default=5.0, help="each voice's recording")
        parser.set_defaults(size="tiny")

    args = setup(__doc__, runs=1, extra=extra)
    model_dir = checkpoint(args.size, "voxcpm")
    one = prompt_size_mb(model_dir, args.seconds)
    gc.collect()  # that engine's memory back before the workers load theirs
    prompt_mb = one * (args.voices / 2 + 0.5)  # about half the voices' prompts a worker
    print(
        f"{args.size} checkpoint, 2 workers, {args.voices} voices of {args.seconds:g} s, {args.requests} requests by "
        f"{args.clients} clients; a prompt {one:.3f} MB, a worker keeps {prompt_mb:.3f} MB"
    )
    for routing in (True, False):
        measure(model_dir, routing, prompt_mb, args)


if __name__ == "__main__":
    main()
