"""VoxCPM2's rows across requests, on the tiny random checkpoint through the package's own loader:
our loop (per-row slots in both language models, the diffusion decoder and AudioVAE over the
batch's rows) makes what the package's own generation makes for a row, and a row in a batch makes
what it makes alone — joining late, leaving early, beside rows of other lengths, voices, guidance
and solver steps — within a stated tolerance (floating point only: each row's noise is its own)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inference.batch import Audio, BatchRow, Done
from inference.engine import fade_in
from inference.voxcpm.engine import VoxCPMEngine
from inference.voxcpm.params import VoxCPMParams
from tests.test_voxcpm_engine import checkpoint, offline, speaker  # noqa: F401  (fixtures)

TOLERANCE = 1e-5  # largest sample difference allowed between a row alone and in a batch (seen: ~3e-7)
TEXT = "Good morning, how are you today?"


@pytest.fixture(scope="module")
def fixed(checkpoint) -> VoxCPMEngine:  # noqa: F811
    """Every row runs to its budget: rows of known lengths, compared patch by patch."""
    return VoxCPMEngine.load(str(checkpoint), device="cpu", fixed_length=True)


@pytest.fixture(scope="module")
def voices(fixed) -> dict[str, VoxCPMParams]:
    clone = fixed.voice_from_recording(speaker(1.5), "A short reference sentence.")
    return {
        "designed": VoxCPMParams(design="A calm, low voice", seed=7),
        "continued": VoxCPMParams.from_request({}, clone, seed=8),
        "styled": VoxCPMParams.from_request({"instructions": "Whisper."}, clone, seed=9),
        "tuned": VoxCPMParams(design="A bright voice", seed=10, cfg_value=1.5, inference_timesteps=5),
    }


def audio_of(engine, rows, more=None, stop=lambda key: False) -> dict[str, np.ndarray]:
    out: dict[str, list] = {}
    ends: dict[str, int] = {}
    for event in engine.run_rows(rows, stop, 3, more):
        out.setdefault(event.key, [])
        if isinstance(event, Audio):
            out[event.key].append(event.samples)
        else:
            assert isinstance(event, Done)
            ends[event.key] = event.tokens
    return {k: np.concatenate(v) if v else np.zeros(0, dtype=np.float32) for k, v in out.items()} | {
        f"{k}.patches": ends[k] for k in ends
    }


def package_row(engine, params: VoxCPMParams, text: str, min_len: int, max_len: int) -> np.ndarray:
    """The row as the package's own `_generate_with_prompt_cache` streams it (its one-row static
    caches, its global generator seeded as our row's own), with our first chunk's fade-in."""
    model = engine.model
    model.base_lm.setup_cache(1, model.config.max_length, "cpu", torch.float32)
    model.residual_lm.setup_cache(1, model.config.max_length, "cpu", torch.float32)
    patches = engine._prompt(params.reference).patches if params.reference else None
    cache = {
        "design": None,
        "reference": {"mode": "reference", "ref_audio_feat": patches},
        "continuation": {
            "mode": "ref_continuation",
            "ref_audio_feat": patches,
            "audio_feat": patches,
            "prompt_text": params.reference_text + " ",
        },
    }[params.mode]
    torch.manual_seed(params.seed)
    steps = model._generate_with_prompt_cache(
        target_text=params.prompt(text), prompt_cache=cache, min_len=min_len, max_len=max_len, streaming=True
    )
    audio = np.concatenate([wav.reshape(-1).numpy() for wav, _, _ in steps])
    model.base_lm.kv_cache = model.residual_lm.kv_cache = None
    return fade_in(audio, 48000)


@pytest.mark.parametrize("voice", ["designed", "continued", "styled", "tuned"])
def test_a_row_is_what_the_packages_own_generation_makes(fixed, voices, voice):
    params = voices[voice]
    if params.inference_timesteps != 10 or params.cfg_value != 2.0:
        params = VoxCPMParams(design=params.design, seed=params.seed)  # the package's defaults
    ours = audio_of(fixed, [BatchRow("a", TEXT, params, 9)])["a"]
    theirs = package_row(fixed, params, TEXT, min_len=9, max_len=9)
    assert len(ours) == len(theirs) == 9 * 7680
    assert np.abs(ours - theirs).max() < TOLERANCE


def test_a_row_stops_where_the_packages_generation_stops(checkpoint):  # noqa: F811
    engine = VoxCPMEngine.load(str(checkpoint), device="cpu")  # the stop head decides
    params = VoxCPMParams(design="A calm, low voice", seed=3)
    ours = audio_of(engine, [BatchRow("a", TEXT, params, 40)])
    theirs = package_row(engine, params, TEXT, min_len=2, max_len=40)
    assert len(ours["a"]) == len(theirs) and ours["a.patches"] * 7680 == len(theirs)
    assert np.abs(ours["a"] - theirs).max() < TOLERANCE


def test_rows_of_different_voices_and_lengths_make_in_a_batch_what_they_make_alone(fixed, voices):
    rows = [BatchRow(name, TEXT, params, 6 + 3 * i) for i, (name, params) in enumerate(voices.items())]
    alone = {r.key: audio_of(fixed, [r])[r.key] for r in rows}
    together = audio_of(fixed, rows)
    for row in rows:  # each leaves at its own length while the others go on
        assert together[f"{row.key}.patches"] == row.max_tokens
        assert len(together[row.key]) == len(alone[row.key]) == row.max_tokens * 7680
        assert np.abs(together[row.key] - alone[row.key]).max() < TOLERANCE
    assert not np.allclose(alone["designed"][:7680], alone["continued"][:7680])  # different voices


def test_rows_joining_a_running_batch_make_what_they_make_alone(fixed, voices):
    first = BatchRow("first", TEXT, voices["designed"], 12)
    late = [BatchRow("late-clone", TEXT, voices["styled"], 5), BatchRow("late-tuned", "Hi.", voices["tuned"], 4)]
    asked: list[int] = []

    def more(live: int) -> list[BatchRow]:
        asked.append(live)
        return late if len(asked) == 3 else []  # they join the third time they are asked

    together = audio_of(fixed, [first], more=more)
    for row in [first, *late]:
        alone = audio_of(fixed, [row])[row.key]
        assert len(together[row.key]) == len(alone) == row.max_tokens * 7680
        assert np.abs(together[row.key] - alone).max() < TOLERANCE
    assert asked[:3] == [1, 1, 1] and asked[3] == 3  # live rows counted between steps


def test_a_stopped_row_leaves_and_its_companions_are_unchanged(fixed, voices):
    rows = [BatchRow("a", TEXT, voices["designed"], 10), BatchRow("b", TEXT, voices["continued"], 10)]
    heard: list[str] = []

    def stop(key: str) -> bool:
        return key == "a" and heard.count("a") >= 2

    out: dict[str, list] = {"a": [], "b": []}
    for event in fixed.run_rows(rows, stop, 1):
        if isinstance(event, Audio):
            heard.append(event.key)
            out[event.key].append(event.samples)
    assert len(out["a"]) == 2 and len(out["b"]) == 10
    alone = audio_of(fixed, [rows[1]])["b"]
    assert np.abs(np.concatenate(out["b"]) - alone).max() < TOLERANCE


def test_a_clones_prefix_is_built_once_while_kept_and_again_once_dropped(checkpoint, voices):  # noqa: F811
    engine = VoxCPMEngine.load(str(checkpoint), device="cpu", fixed_length=True)
    clone = voices["continued"]
    first = audio_of(engine, [BatchRow("a", TEXT, clone, 4)])["a"]
    again = audio_of(engine, [BatchRow("a", TEXT, clone, 4), BatchRow("b", "Hi.", voices["styled"], 4)])["a"]
    assert engine.prompts.built == 1 and engine.prompts.decoded == 1  # one reference, one prefix
    assert np.abs(first - again).max() < TOLERANCE  # from the kept prefix: the same audio
    assert engine.prompts.bytes > 0
    engine.prompts.max_bytes = 1  # room for the last one used only
    other = engine.voice_from_recording(speaker(1.0, pitch=330.0), "")
    audio_of(engine, [BatchRow("c", TEXT, VoxCPMParams.from_request({}, other, seed=1), 3)])
    assert len(engine.prompts) == 1
    audio_of(engine, [BatchRow("a", TEXT, clone, 3)])
    assert engine.prompts.built == 3 and engine.prompts.decoded == 3  # dropped, then made again
