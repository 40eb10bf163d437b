"""Kokoro against ChatTTS on their full-size random checkpoints (the official shapes, so the real
compute), in this process, same text; and Kokoro's cross-request batches. All figures from one run:

- first audio: `engine.stream`'s first chunk, Kokoro vs ChatTTS (both the request's first segment),
  and Kokoro's when each sentence is a segment;
- one request's total time (`engine.synthesize` to its end), Kokoro vs ChatTTS (target: Kokoro
  ≥10× faster). Random weights decide lengths: Kokoro's durations come from its (random) duration
  head; ChatTTS runs fixed-length, each segment to as many tokens as Kokoro's audio of it lasts,
  so both make the same seconds of audio;
- Kokoro's throughput (audio seconds per wall second) with rows one at a time vs `run_rows` at
  1, 4 and 8 rows (different texts, voices, a mix, speeds), the decoder taking one row at a time
  (the engine's choice on a CPU) or padded groups (its choice on a GPU), and the largest difference
  between a row batched and the same row alone (relative to its peak);
- peak RSS after Kokoro alone, then with ChatTTS loaded too.

    .venv/bin/python bench/kokoro_engine.py [--runs 3] [--threads N]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from pathlib import Path

import numpy as np
from common import ROOT, checkpoint

TEXT = (
    "The morning train was late again, so we walked along the river instead. "
    "Small boats drifted past the old stone bridge while the city slowly woke up. "
    "By the time we reached the market, the bakers had already sold their bread."
)
ROWS = [
    ("Hello there, my old friend. It has been a long time.", "af_heart", 1.0),
    ("The weather today is cloudy with a chance of rain in the evening.", "bm_george", 1.0),
    ("Please remember to bring your ticket and an identity card.", "af_bella+am_adam", 1.0),
    ("Our meeting has moved to Thursday afternoon at three.", "am_michael", 1.2),
    ("The library closes early on public holidays.", "bf_emma", 0.9),
    ("Thank you for calling, your call is important to us.", "af_nova", 1.0),
    ("Turn left at the second light and the shop is on your right.", "am_echo", 1.1),
    ("A quick brown fox jumps over the lazy dog near the river.", "bm_lewis", 0.8),
]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def kokoro_checkpoint() -> str:
    path = ROOT / "var" / "checkpoints" / "kokoro-full"
    if not (path / "checkpoint.json").exists():
        print(f"making the full random Kokoro checkpoint in {path} …", flush=True)
        from inference.kokoro.checkpoint import make_checkpoint

        make_checkpoint("full", path)
    return str(path)


def timed_request(engine, request) -> tuple[float, float, float]:
    """(seconds to the first chunk of `stream`, seconds to the end of `synthesize`, audio seconds)."""
    started = time.perf_counter()
    chunks = engine.stream(request)
    next(chunks)
    first = time.perf_counter() - started
    chunks.close()
    started = time.perf_counter()
    samples = sum(len(piece) for piece in engine.synthesize(request))
    return first, time.perf_counter() - started, samples / 24000


def kokoro_rows(engine):
    from inference.batch import BatchRow
    from inference.kokoro.params import KokoroParams, accent

    rows = []
    for i, (text, voices, speed) in enumerate(ROWS):
        names = voices.split("+")
        mix = tuple((v, round(1 / len(names), 6)) for v in names)
        rows.append(BatchRow(f"r{i}", engine.read(text), KokoroParams(mix, speed, accent(mix)), 0))
    return rows


def run(engine, rows) -> tuple[float, dict[str, np.ndarray]]:
    from inference.batch import Audio

    audio: dict[str, np.ndarray] = {}
    started = time.perf_counter()
    for event in engine.run_rows(rows, lambda key: False):
        if isinstance(event, Audio):
            audio[event.key] = event.samples
    return time.perf_counter() - started, audio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement; the fastest counts")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--request-only", action="store_true", help="skip the batches: one request of each model")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from inference.chattts.engine import ChatTTSEngine
    from inference.chattts.params import TOKENS_PER_SECOND, ChatTTSParams
    from inference.chattts.spec import SPEC as CHATTTS
    from inference.chattts.voices import VOICES
    from inference.engine import SynthesisRequest
    from inference.kokoro import g2p
    from inference.kokoro.engine import KokoroEngine
    from inference.kokoro.params import KokoroParams
    from inference.kokoro.spec import SPEC as KOKORO
    from inference.text.preparation import SENTENCE_END, estimate_seconds

    kokoro_dir, chattts_dir = kokoro_checkpoint(), checkpoint("full")
    started = time.perf_counter()
    kokoro = KokoroEngine.load(kokoro_dir, device="cpu")
    kokoro.warm_up()
    print(
        f"Kokoro full random checkpoint ({Path(kokoro_dir).name}), loaded and warmed in "
        f"{time.perf_counter() - started:.1f} s; {torch.get_num_threads()} torch threads; English G2P: "
        f"{g2p.english_pipeline()}; fastest of {args.runs} runs\n"
    )

    # Batches: the decoder one row at a time (the engine's choice on a CPU), then in padded groups
    # (its choice on a GPU), each against rows one at a time; within a phase the configurations take
    # turns, so that a busy spell hits all. Peak RSS after each phase.
    rows = kokoro_rows(kokoro)
    run(kokoro, rows[:2])  # voice packs, G2P of the texts
    phases = () if args.request_only else ((1, "row by row"), (0, "padded"))
    alone_audio: dict[str, np.ndarray] = {}
    for decoder_rows, how in phases:
        alone_walls, walls = [], {n: [] for n in (1, 4, 8)}
        for _ in range(args.runs):
            kokoro.decoder_rows = decoder_rows
            wall = 0.0
            for row in rows:
                seconds, audio = run(kokoro, [row])
                wall += seconds
                alone_audio |= audio
            alone_walls.append(wall)
            for n in walls:
                seconds, batched = run(kokoro, rows[:n])
                walls[n].append(seconds)
        audio_seconds = {k: len(v) / 24000 for k, v in alone_audio.items()}
        total = sum(audio_seconds.values())
        base = total / min(alone_walls)
        print(
            f"decoder {how}: rows one at a time ({len(rows)} rows, {total:.1f} s audio): {base:5.2f} audio s / wall s"
        )
        for n, times in walls.items():
            rate = sum(audio_seconds[r.key] for r in rows[:n]) / min(times)
            print(f"  run_rows, batch of {n}: {rate:5.2f} audio s / wall s   ×{rate / base:.2f}")
        diff = max(float(np.abs(batched[k] - alone_audio[k]).max() / np.abs(alone_audio[k]).max()) for k in batched)
        print(f"  largest difference, a row in the batch of 8 vs alone: {diff:.2e} of its peak")
        print(f"  peak RSS so far: {peak_rss_mb():.0f} MB")
    kokoro.decoder_rows = 1
    print()

    # One request, both engines.
    segments = list(KOKORO.prepare(TEXT).segments)
    k_request = SynthesisRequest([kokoro.read(s) for s in segments], KokoroParams((("af_heart", 1.0),)))
    k_results = [timed_request(kokoro, k_request) for _ in range(args.runs)]
    k_seconds = [
        len(next(iter(kokoro.synthesize(SynthesisRequest([s], k_request.params))))) / 24000 for s in k_request.segments
    ]
    chattts = ChatTTSEngine.load(chattts_dir, device="cpu", fixed_length=True)
    chattts.warm_up()
    # Each model splits the text its own way (Kokoro a sentence a segment, the first cut short;
    # ChatTTS packs sentences): ChatTTS's segments share Kokoro's audio length by their text's length.
    c_segments = [chattts.read(s) for s in CHATTTS.prepare(TEXT).segments]
    weights = [estimate_seconds(s) for s in c_segments]
    c_request = SynthesisRequest(
        c_segments,
        ChatTTSParams(voice_seed=VOICES["alloy"].seed, seed=1),
        [max(1, round(sum(k_seconds) * w / sum(weights) * TOKENS_PER_SECOND)) for w in weights],
    )
    c_results = [timed_request(chattts, c_request) for _ in range(args.runs)]
    k_first, k_total = min(r[0] for r in k_results), min(r[1] for r in k_results)
    c_first, c_total = min(r[0] for r in c_results), min(r[1] for r in c_results)
    print(
        f"one request: {TEXT.count(' ') + 1} words; Kokoro {len(segments)} segments (first: {segments[0]!r}), "
        f"ChatTTS {len(c_segments)}"
    )
    print(f"  audio: Kokoro {k_results[0][2]:.1f} s, ChatTTS {c_results[0][2]:.1f} s (fixed to Kokoro's lengths)")
    ratio = c_first / k_first
    print(f"  first audio (stream): Kokoro {k_first * 1000:.0f} ms, ChatTTS {c_first * 1000:.0f} ms (×{ratio:.1f})")
    ratio = c_total / k_total
    print(f"  whole request:        Kokoro {k_total:.2f} s, ChatTTS {c_total:.2f} s (×{ratio:.1f}; target ×10)")
    median_first = statistics.median(r[0] for r in k_results)
    print(f"  Kokoro real-time factor {k_total / k_results[0][2]:.3f}; median first audio {median_first * 1000:.0f} ms")
    # Kokoro's first audio is its first segment whole: with each sentence whole and uncut, as a
    # comparison with the first sentence cut short (KOKORO.segmenting).
    sentences = [kokoro.read(s.strip()) for s in SENTENCE_END.split(TEXT) if s.strip()]
    one = SynthesisRequest(sentences, k_request.params)
    first_one = min(timed_request(kokoro, one)[0] for _ in range(args.runs))
    print(f"  Kokoro first audio with its first sentence whole: {first_one * 1000:.0f} ms")
    print(f"peak RSS, both engines loaded: {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
