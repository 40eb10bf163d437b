"""Cross-request batches on the full-size random checkpoint, fixed-length generation (every row runs
to its token budget, so runs compare equal work). All ratios come from this one run:

- throughput (audio seconds per wall second): rows one at a time vs `generate_batch` at 1, 2, 4, 8;
- a row streamed in chunks of 24 tokens vs the same row in one call decoded whole (cost ratio and
  the largest sample difference), and the first chunk's time against the previous engine's stream
  (ChatTTS's `infer(stream=True)`, re-decoding the prefix at every chunk);
- each precision (bf16, int8) against fp32 on the same rows and seeds: speed ratio, token agreement
  (fraction of equal tokens, and the first step that differs) and the log-mel L1 distance of the
  audio, beside the distance between two fp32 rows that only differ in seed (unrelated audio).

With `--kv`, only the KV caches instead: the static cache (`inference.chattts.kvcache`) against
the cache that grows by concatenation (`growing`, the loop before it), in turns on the same rows:
batches of 1, 4 and 8 rows, and 4 rows joined by 4 more at their 16th step (continuous batching);
wall time ratio and whether every row's tokens are the same.

    nice -n 10 .venv/bin/python bench/engine_batch.py [--tokens 32] [--runs 3] [--threads N] [--size full] [--kv]
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np
from common import checkpoint

TEXTS = [
    "Hello there, my old friend. It has been a long time.",
    "The weather today is cloudy with a chance of rain in the evening.",
    "Please remember to bring your ticket and an identity card.",
    "Our meeting has moved to Thursday afternoon at three.",
    "The library closes early on public holidays.",
    "Thank you for calling, your call is important to us.",
    "Turn left at the second light and the shop is on your right.",
    "A quick brown fox jumps over the lazy dog near the river.",
]


def rows_for(n: int, tokens: int, seed_offset: int = 0):
    from inference.batch import BatchRow
    from inference.chattts.params import ChatTTSParams
    from inference.chattts.voices import VOICES

    voices = [v.seed for v in VOICES.values()]
    params = [ChatTTSParams(voice_seed=voices[i], seed=100 + i + seed_offset) for i in range(n)]
    return [BatchRow(f"r{i}", TEXTS[i % len(TEXTS)], params[i], tokens) for i in range(n)]


def run(engine, rows, chunk_tokens: int, more=None):
    """(wall seconds, audio per row, token ids per row, seconds to each row's first chunk)."""
    from inference.batch import Audio

    audio: dict[str, list[np.ndarray]] = {}
    first: dict[str, float] = {}
    ids = {}
    started = time.perf_counter()
    for event in engine.run_rows(rows, lambda key: False, chunk_tokens, more):
        if isinstance(event, Audio):
            first.setdefault(event.key, time.perf_counter() - started)
            audio.setdefault(event.key, []).append(event.samples)
        else:
            ids[event.key] = event.ids
    wall = time.perf_counter() - started
    return wall, {k: np.concatenate(v) for k, v in audio.items()}, ids, first


def log_mel_l1(a: np.ndarray, b: np.ndarray) -> float:
    import torch
    import torchaudio

    mel = torchaudio.transforms.MelSpectrogram(sample_rate=24000, n_fft=1024, hop_length=256, n_mels=100)
    n = min(len(a), len(b))
    x, y = (torch.log(mel(torch.from_numpy(v[:n].copy())).clamp(min=1e-5)) for v in (a, b))
    return float((x - y).abs().mean())


def agreement(ids_a: dict, ids_b: dict) -> tuple[float, int]:
    equal = total = 0
    first_diff = 10**9
    for key, a in ids_a.items():
        b = ids_b[key]
        n = min(len(a), len(b))
        same = (a[:n] == b[:n]).all(axis=1)
        equal += int(same.sum())
        total += max(len(a), len(b))
        if not same.all():
            first_diff = min(first_diff, int(np.argmin(same)))
    return equal / total, first_diff


def old_stream_first_chunk(engine, row) -> float:
    """The previous engine's stream: ChatTTS's infer(stream=True), chunks of 24 tokens, no skip."""
    from inference.chattts.params import SAMPLES_PER_TOKEN

    code, refine = engine.chattts_params(row.params, row.max_tokens)
    code.stream_batch, code.stream_speed, code.pass_first_n_batches = 24, 24 * SAMPLES_PER_TOKEN, 0
    started = time.perf_counter()
    gen = engine.chat.infer(
        [row.text],
        stream=True,
        split_text=False,
        skip_refine_text=True,
        params_infer_code=code,
        params_refine_text=refine,
    )
    for wavs in gen:
        if np.asarray(wavs).size:
            break
    elapsed = time.perf_counter() - started
    gen.close()
    return elapsed


def forced_run(engine, rows, ids: dict[str, np.ndarray]):
    """Teacher forcing: the engine fed `ids` (another model's tokens) step by step: the tokens it
    samples on that prefix, and the audio decoded (Decoder) from its own hidden states."""
    import torch

    from inference.chattts import generation
    from inference.chattts.generation import RowPlan

    emb, mask = engine._prompts(rows)
    plans = [
        RowPlan(r.key, r.params.seed, r.params.temperature, r.params.top_p, r.params.top_k, r.max_tokens, r.max_tokens)
        for r in rows
    ]
    forced = {k: torch.from_numpy(v) for k, v in ids.items()}
    sampled: dict[str, list] = {r.key: [] for r in rows}
    hiddens: dict[str, list] = {r.key: [] for r in rows}
    for step in generation.generate(engine._gpt_parts(), emb, mask, plans, lambda key: False, forced):
        for i, key in enumerate(step.keys):
            sampled[key].append(step.tokens[i].numpy())
            hiddens[key].append(step.hiddens[i])
    with torch.inference_mode():
        audio = {k: engine._decode(torch.stack(h).T.unsqueeze(0).contiguous(), True)[0] for k, h in hiddens.items()}
    return {k: np.stack(v) for k, v in sampled.items()}, audio


def compare_caches(engine, tokens: int, runs: int) -> None:
    """The static KV cache against the growing one, in turns (a busy spell on a shared machine hits
    both): fastest wall time of each, and every row's tokens compared."""
    from dataclasses import replace

    parts = engine._gpt_parts()
    caches = {"static": parts, "growing": replace(parts, static_cache=False)}

    def joining(rows):
        asked = [0]

        def more(live: int):
            asked[0] += 1
            return rows[4:] if asked[0] == 16 else []

        return rows[:4], more

    setups = {f"{n} rows": (lambda n=n: (rows_for(n, tokens), None)) for n in (1, 4, 8)}
    setups["4 rows + 4 joining"] = lambda: joining(rows_for(8, tokens))
    print(f"KV cache: static vs growing, {tokens} tokens a row, fastest of {runs} runs")
    for name, setup in setups.items():
        walls: dict[str, list[float]] = {c: [] for c in caches}
        ids: dict[str, dict] = {}
        for _ in range(runs):
            for cache, cache_parts in caches.items():
                engine._parts = cache_parts
                rows, more = setup()
                wall, _, ids[cache], _ = run(engine, rows, tokens, more)
                walls[cache].append(wall)
        same = ids["static"].keys() == ids["growing"].keys() and all(
            np.array_equal(ids["static"][k], ids["growing"][k]) for k in ids["growing"]
        )
        static, growing = min(walls["static"]), min(walls["growing"])
        print(
            f"{name:20s} growing {growing:7.2f} s   static {static:7.2f} s   static/growing ×{static / growing:.3f}"
            f"   tokens {'the same' if same else 'DIFFER'}",
            flush=True,
        )
    engine._parts = parts


def best(engine, rows, chunk_tokens: int, runs: int):
    """`run` repeated: the fastest wall time (the machine may be shared), the first run's outputs."""
    results = [run(engine, rows, chunk_tokens) for _ in range(runs)]
    return (min(r[0] for r in results), *results[0][1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=32, help="tokens per row (46.875 a second)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement; the fastest counts")
    parser.add_argument("--size", default="full", choices=["tiny", "full"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's choice)")
    parser.add_argument("--kv", action="store_true", help="only the static KV cache against the growing one")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from inference.chattts.engine import ChatTTSEngine
    from inference.chattts.params import SAMPLES_PER_TOKEN
    from inference.engine import SynthesisRequest
    from inference.spec import SAMPLE_RATE

    model_dir = checkpoint(args.size)
    tokens, runs = args.tokens, args.runs
    engine = ChatTTSEngine.load(model_dir, device="cpu", fixed_length=True)
    engine.warm_up()
    run(engine, rows_for(8, 2), 2)  # the voices' speaker embeddings, the texts' first normalisation
    threads = torch.get_num_threads()
    if args.kv:
        print(f"{args.size} checkpoint, {threads} torch threads, fp32\n")
        compare_caches(engine, tokens, runs)
        return
    print(f"{args.size} checkpoint, {tokens} tokens a row, fastest of {runs} runs, {threads} torch threads, fp32\n")

    # Throughput; configurations take turns, so that a busy spell on a shared machine hits all.
    sizes = (1, 2, 4, 8)
    walls: dict[str, list[float]] = {"alone": [], **{f"b{n}": [] for n in sizes}}
    fp32: dict[int, tuple] = {}
    for _ in range(runs):
        walls["alone"].append(sum(run(engine, [row], tokens)[0] for row in rows_for(2, tokens)))
        for n in sizes:
            fp32[n] = run(engine, rows_for(n, tokens), tokens)
            walls[f"b{n}"].append(fp32[n][0])
    row_seconds = tokens * SAMPLES_PER_TOKEN / SAMPLE_RATE
    base = 2 * row_seconds / min(walls["alone"])
    print(f"one at a time      {base:6.3f} audio s / wall s")
    for n in sizes:
        rate = n * row_seconds / min(walls[f"b{n}"])
        print(f"generate_batch {n}   {rate:6.3f} audio s / wall s   ×{rate / base:.2f}")
    fp32[4] = (min(walls["b4"]), *fp32[4][1:])

    # Streamed vs one call (alternating, so both see the same machine), and the first chunk.
    row = rows_for(1, 3 * tokens)[0]
    whole_walls, stream_walls, stream_first = [], [], []
    for _ in range(runs):
        whole_wall, whole, _, _ = run(engine, [row], row.max_tokens)
        stream_wall, streamed, _, first = run(engine, [row], 24)
        whole_walls.append(whole_wall)
        stream_walls.append(stream_wall)
        stream_first.append(first[row.key])
    diff = float(np.abs(streamed[row.key] - whole[row.key]).max())
    print(
        f"\nstreamed (chunk 24) vs one call, {row.max_tokens} tokens: cost ×{min(stream_walls) / min(whole_walls):.3f}"
        f"; largest sample difference {diff:.2e} (peak {np.abs(whole[row.key]).max():.3f})"
    )
    request = SynthesisRequest([row.text], row.params, [row.max_tokens])
    new_first, old_first = [], []
    for _ in range(runs):
        started = time.perf_counter()
        pieces = engine.stream(request, chunk_tokens=24)
        next(pieces)
        new_first.append(time.perf_counter() - started)
        pieces.close()
        old_first.append(old_stream_first_chunk(engine, row))
    print(
        f"first chunk: stream() {min(new_first):.2f} s (in the streamed runs {min(stream_first):.2f} s); "
        f"previous engine (ChatTTS stream) {min(old_first):.2f} s"
    )

    # Precisions, on the 4-row batch.
    wall32, audio32, ids32, _ = fp32[4]
    _, other_seed, _, _ = run(engine, rows_for(4, tokens, seed_offset=50), tokens)
    unrelated = np.mean([log_mel_l1(audio32[k], other_seed[k]) for k in audio32])
    forced_ids32, forced_audio32 = forced_run(engine, rows_for(4, tokens), ids32)
    assert all(np.array_equal(forced_ids32[k], ids32[k]) for k in ids32)  # fp32 fed its own tokens
    print(f"\nprecision vs fp32, batch of 4 (fp32 vs fp32 with other seeds: log-mel L1 {unrelated:.3f})")
    print("free: each model samples its own prefix; forced: both are fed fp32's tokens (teacher forcing)")
    del engine
    for precision in ("bf16", "int8"):
        gc.collect()
        other = ChatTTSEngine.load(model_dir, device="cpu", fixed_length=True, precision=precision)
        other.warm_up()
        run(other, rows_for(4, 2), 2)
        wall, audio, ids, _ = best(other, rows_for(4, tokens), tokens, runs)
        share, first_diff = agreement(ids32, ids)
        l1 = np.mean([log_mel_l1(audio32[k], audio[k]) for k in audio32])
        where = "none" if first_diff == 10**9 else f"step {first_diff}"
        forced_ids, forced_audio = forced_run(other, rows_for(4, tokens), ids32)
        forced_share, _ = agreement(ids32, forced_ids)
        forced_l1 = np.mean([log_mel_l1(forced_audio32[k], forced_audio[k]) for k in audio32])
        print(
            f"{precision:5s} speed ×{wall32 / wall:.2f}   free: tokens equal {share:.1%} (first difference: {where}), "
            f"log-mel L1 {l1:.3f}   forced: tokens equal {forced_share:.1%}, log-mel L1 {forced_l1:.3f}"
        )
        del other


if __name__ == "__main__":
    main()
