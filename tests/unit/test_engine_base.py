"""What every engine gets from `inference.base.BatchEngine`: the worker's `generate_batch` and a
single request's `synthesize`/`stream` over the engine's own `run_rows`, at the engine's own sample
rate (an engine of 48 kHz gets pauses of 48 kHz), and the load helpers' refusals. The engine here
is a stand-in whose rows are a constant tone: no model is needed to check the plumbing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from inference import base
from inference.base import BatchEngine, model_version, pick_precision
from inference.batch import Audio, BatchRow, Done
from inference.engine import PAUSE_SECONDS, SynthesisRequest
from inference.kokoro.spec import SPEC as KOKORO


class Tone(BatchEngine):
    """Each row: `len(text)` chunks of 100 samples of 0.5, then its end."""

    spec = replace(KOKORO, name="tone", sample_rate=48000)

    def row_budget(self, text, params):
        return len(text)

    def run_rows(self, rows, stop, chunk_tokens=24, more=None):
        for row in rows:
            for _ in range(len(row.text)):
                yield Audio(row.key, np.full(100, 0.5, dtype=np.float32))
            yield Done(row.key, len(row.text), np.zeros(0, dtype=np.int64))


@pytest.mark.parametrize("how", ["synthesize", "stream"])
def test_a_requests_pauses_are_at_the_engines_rate(how):
    engine = Tone()
    request = SynthesisRequest(["ab", "c", "def"], params=None)
    out = np.concatenate(list(getattr(engine, how)(request)))
    pause = round(PAUSE_SECONDS * 48000)
    assert engine.sample_rate == 48000
    assert len(out) == (2 + 1 + 3) * 100 + 2 * pause
    assert np.count_nonzero(out == 0) == 2 * pause  # the two pauses, nothing else silent


def test_generate_batch_reports_each_rows_audio_and_end():
    seen, ended = {}, []

    class Recorder:
        def audio(self, key, samples):
            seen[key] = seen.get(key, 0) + len(samples)

        def done(self, key, tokens, words=()):
            ended.append((key, tokens))

        def stop_requested(self, key):
            return False

    Tone().generate_batch([BatchRow("a", "xy", None, 2), BatchRow("b", "z", None, 1)], Recorder())
    assert seen == {"a": 200, "b": 100} and ended == [("a", 2), ("b", 1)]


def test_precision_and_version_helpers():
    assert pick_precision("auto", ("fp32", "bf16")) == "fp32"
    with pytest.raises(ValueError, match="one of fp32, bf16, not 'int8'"):
        pick_precision("int8", ("fp32", "bf16"))
    fp32 = model_version("tone", ["files", "code"])
    assert fp32.startswith("tone-") and len(fp32) == len("tone-") + 12
    assert model_version("tone", ["files", "code"], "bf16", True) == f"{fp32}-bf16-random"
    assert model_version("tone", ["files", "other code"]) != fp32


def test_the_default_batch_is_four_on_a_cpu_and_what_half_a_gpus_free_memory_holds(monkeypatch):
    torch = pytest.importorskip("torch")
    engine = Tone()
    engine.device = torch.device("cpu")
    assert engine.default_max_batch() == base.CPU_MAX_BATCH == 4
    engine.device = torch.device("cuda")
    free = {"bytes": 0}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (free["bytes"], 80 * 2**30))
    row = engine.row_bytes()
    for free_bytes, rows in ((10 * row, 5), (2 * row + row // 2, 1), (row // 3, 1), (1000 * row, base.GPU_MAX_BATCH)):
        free["bytes"] = free_bytes
        assert engine.default_max_batch() == rows, free_bytes / row
