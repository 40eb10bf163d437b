"""VoxCPM2's rows across requests on the full-size random checkpoint (the official shapes: the real
compute; noise, not speech), in this process. All figures from one run:

- throughput, aggregate audio seconds per wall second: N requests one at a time (each a batch of
  one) against the same N rows in one batch, for N = 4 and 8 (target at 4: at least 2.5x), every
  row running to the same number of patches (`fixed_length`), each with its own voice (designs and
  a clone) and seed; and one row through the package's own generation (`_generate_with_prompt_cache`,
  the peer on a CPU: the GPU servers, Nano-vLLM-VoxCPM and vLLM-Omni, need CUDA) against ours;
- first audio: the time to a row's first chunk (the worker's chunk, TTS_STREAM_CHUNK_SECONDS) alone;
- where a step's time goes, at 1 and 4 rows: the diffusion decoder, the two LMs and the local
  encoder, AudioVAE's decode (one step timed by parts, synchronised);
- a clone's prompt: the time to build its key/value prefix (a 10 s reference) against a row
  starting from the kept one; peak RSS.

    .venv/bin/python bench/voxcpm_engine.py [--size full] [--patches 8] [--rows 4 8] [--runs 1] [--threads N]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import numpy as np
from common import checkpoint

TEXT = "The morning train was late again, so we walked along the river instead."
DESIGNS = ["A calm, low voice", "A bright young woman", "An old storyteller", "", "A fast, crisp voice"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="full", choices=["tiny", "full"])
    parser.add_argument("--patches", type=int, default=8, help="patches (160 ms each) every row makes")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: the worker's rule)")
    parser.add_argument("--chunk-seconds", type=float, default=0.5)
    parser.add_argument("--rows", type=int, nargs="+", default=[4, 8], help="requests at once")
    args = parser.parse_args()

    import torch

    from inference.batch import Audio, BatchRow
    from inference.voxcpm.engine import VoxCPMEngine
    from inference.voxcpm.params import VoxCPMParams
    from inference.voxcpm.spec import PATCHES_PER_SECOND

    started = time.perf_counter()
    engine = VoxCPMEngine.load(checkpoint(args.size, "voxcpm"), device="cpu", fixed_length=True, threads=args.threads)
    print(f"loaded {engine.model_version} in {time.perf_counter() - started:.1f} s, {torch.get_num_threads()} threads")
    rate = engine.sample_rate
    t = np.arange(int(10.0 * 24000)) / 24000
    clone = engine.voice_from_recording((0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), "")
    voices = [VoxCPMParams(design=d, seed=i) for i, d in enumerate(DESIGNS)]
    voices.append(VoxCPMParams.from_request({}, clone, seed=9))

    def rows(n: int, first: int = 0) -> list:
        return [BatchRow(f"r{first + i}", TEXT, voices[(first + i) % len(voices)], args.patches) for i in range(n)]

    def audio_rate(batches: list[list]) -> float:
        samples, began = 0, time.perf_counter()
        for batch in batches:
            for event in engine.run_rows(batch, lambda key: False, 10**6):
                if isinstance(event, Audio):
                    samples += len(event.samples)
        return samples / rate / (time.perf_counter() - began)

    audio_rate([rows(1)])  # first-use costs (allocator, kernels) out of the figures
    list(engine.run_rows([rows(1, 5)[0]], lambda key: False))  # the clone's prefix built once, kept

    print(
        f"1. throughput: audio s per wall s, every row {args.patches} patches "
        f"({args.patches / PATCHES_PER_SECOND:.2f} s)"
    )
    package = []
    for i in range(args.runs):  # the peer on a CPU: the package's own generation, one row, the same work
        began = time.perf_counter()
        samples = package_row(engine, voices[i % len(DESIGNS)], args.patches)
        package.append(samples / rate / (time.perf_counter() - began))
    ours = statistics.median(audio_rate([[r]]) for r in rows(args.runs))
    print(
        f"   one row: the package's own generation {statistics.median(package):.3f}, ours {ours:.3f}, "
        f"ratio {ours / statistics.median(package):.2f}"
    )
    for n in args.rows:
        alone, together = [], []
        for _ in range(args.runs):
            alone.append(audio_rate([[r] for r in rows(n)]))
            together.append(audio_rate([rows(n)]))
        a, b = statistics.median(alone), statistics.median(together)
        print(
            f"   {n} requests: one at a time {a:.3f}, one batch {b:.3f}, ratio {b / a:.2f}"
            + (" (target >= 2.5)" if n == 4 else "")
        )

    chunk = max(1, round(args.chunk_seconds * PATCHES_PER_SECOND))
    firsts = []
    for i in range(max(3, args.runs)):
        began = time.perf_counter()
        events = engine.run_rows(rows(1, i), lambda key: False, chunk)
        next(e for e in events if isinstance(e, Audio))
        firsts.append(time.perf_counter() - began)
        for _ in events:
            pass
    print(
        f"2. first audio ({chunk} patches a chunk), one row alone: median {statistics.median(firsts):.3f} s "
        f"(runs {', '.join(f'{x:.3f}' for x in firsts)})"
    )

    print("3. one step by parts (s), median of 3:")
    for n in (1, 4):
        print(f"   {n} row(s): " + ", ".join(f"{k} {v:.3f}" for k, v in step_parts(engine, rows(n)).items()))

    built = engine.prompts.built
    fresh = engine.voice_from_recording((0.3 * np.sin(2 * np.pi * 140 * t)).astype(np.float32), "")
    row = BatchRow("p", TEXT, VoxCPMParams.from_request({}, fresh, seed=1), 1)
    began = time.perf_counter()
    list(engine.run_rows([row], lambda key: False))
    cold = time.perf_counter() - began
    began = time.perf_counter()
    list(engine.run_rows([row], lambda key: False))
    warm = time.perf_counter() - began
    print(
        f"4. a clone of 10 s, a row of one patch: prompt built {cold:.2f} s, from the kept prompt {warm:.2f} s "
        f"(prefixes built {engine.prompts.built - built}, kept {engine.prompts.bytes / 2**20:.1f} MB)"
    )
    print(f"peak RSS {peak_rss_mb():.0f} MB")


def package_row(engine, params, patches: int) -> int:
    """A designed row through the package's own `_generate_with_prompt_cache` (its one-row static
    caches, set up again as its constructor does), to `patches` patches; returns the samples made."""
    import torch

    model = engine.model
    for lm in (model.base_lm, model.residual_lm):
        lm.setup_cache(1, model.config.max_length, engine.device, next(lm.parameters()).dtype)
    torch.manual_seed(params.seed)
    steps = model._generate_with_prompt_cache(
        target_text=params.prompt(TEXT), prompt_cache=None, min_len=patches, max_len=patches, streaming=True
    )
    samples = sum(wav.numel() for wav, _, _ in steps)
    model.base_lm.kv_cache = model.residual_lm.kv_cache = None  # ours keeps its own
    return samples


def step_parts(engine, rows) -> dict[str, float]:
    """One step of `rows` timed part by part (the same calls `RowBatch` makes)."""
    import torch

    from inference.voxcpm.rows import _solve

    batch = engine._new_batch()
    events = batch.run(rows, lambda key: False, 1, None, engine._prompt)
    next(events)  # admitted, the first patch made: the state of a running batch
    model, n = engine.model, len(rows)
    times: dict[str, list[float]] = {"diffusion": [], "VAE decode": [], "encoder + LMs": [], "stop head": []}
    for _ in range(3):
        with torch.inference_mode():
            began = time.perf_counter()
            mu = torch.cat((model.lm_to_dit_proj(batch.lm_hidden), model.res_to_dit_proj(batch.res_hidden)), dim=-1)
            noise = torch.randn(n, batch.patch[1], batch.patch[0], dtype=batch.dtype)
            cfg = torch.full((n, 1, 1), 2.0, dtype=batch.dtype)
            patches = _solve(model.feat_decoder, noise, mu, batch.cond.transpose(1, 2).contiguous(), 10, cfg)
            times["diffusion"].append(time.perf_counter() - began)
            began = time.perf_counter()
            batch.decoder.decode(patches.float())
            times["VAE decode"].append(time.perf_counter() - began)
            began = time.perf_counter()
            model.stop_head(model.stop_actn(model.stop_proj(batch.lm_hidden))).argmax(dim=-1).tolist()
            times["stop head"].append(time.perf_counter() - began)
            began = time.perf_counter()
            batch._step()
            times["encoder + LMs"].append(time.perf_counter() - began)
    events.close()
    return {k: statistics.median(v) for k, v in times.items()}


if __name__ == "__main__":
    main()
