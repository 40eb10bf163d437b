"""The generated checkpoint is loaded by ChatTTS's own loader, and the engine is deterministic."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from inference.chattts_engine import ChatTTSEngine, check_model_dir
from inference.checkpoint import ASSET_FILES, MANIFEST
from inference.engine import ModelUnavailable, SynthesisParams, SynthesisRequest
from inference.text import SAMPLES_PER_TOKEN, prepare, token_budget

CHECKPOINT = os.environ.get("TTS_TEST_CHECKPOINT", "")


@pytest.fixture(scope="module")
def engine():
    return ChatTTSEngine.load(CHECKPOINT, device="cpu")


def audio(engine, text: str, **params) -> np.ndarray:
    prepared = prepare(text)
    request = SynthesisRequest(prepared.segments, SynthesisParams(**{"voice_seed": 1, "seed": 1, **params}))
    return np.concatenate(list(engine.synthesize(request)))


def test_the_checkpoint_has_the_official_layout_and_a_hash_manifest():
    manifest = json.loads((open(os.path.join(CHECKPOINT, MANIFEST))).read())
    assert manifest["random_weights"] is True and manifest["size"] == "tiny"
    assert set(manifest["sha256"]) == set(ASSET_FILES)
    assert check_model_dir(CHECKPOINT) is None


def test_the_engine_reports_a_random_model_version(engine):
    assert engine.random_weights
    assert engine.model_version.startswith("chattts-") and engine.model_version.endswith("-random")


def test_same_text_voice_and_seed_give_the_same_samples(engine):
    a = audio(engine, "Same again.", seed=9)
    b = audio(engine, "Same again.", seed=9)
    assert a.dtype == np.float32 and a.ndim == 1
    np.testing.assert_array_equal(a, b)


def test_seed_voice_and_speed_change_the_output(engine):
    base = audio(engine, "Vary me.", seed=1)
    assert not np.array_equal(base, audio(engine, "Vary me.", seed=2))
    assert not np.array_equal(base, audio(engine, "Vary me.", seed=1, voice_seed=2))
    assert not np.array_equal(base, audio(engine, "Vary me.", seed=1, speed=9))


def test_each_segment_is_held_to_its_token_budget(engine):
    text = "Short. " + "This second sentence is a good deal longer than the first one was. " * 3
    prepared = prepare(text)
    request = SynthesisRequest(prepared.segments, SynthesisParams(voice_seed=1, seed=1))
    pieces = [p for p in engine.synthesize(request) if p.any()]
    assert len(pieces) == len(prepared.segments)
    for piece, segment in zip(pieces, prepared.segments, strict=True):
        assert 0 < len(piece) <= token_budget(segment) * SAMPLES_PER_TOKEN


def test_segments_are_joined_without_clicks(engine):
    prepared = prepare("First part here. Second part here.")
    request = SynthesisRequest(prepared.segments * 2, SynthesisParams(voice_seed=1, seed=1))
    pieces = list(engine.synthesize(request))
    for piece in pieces:
        if piece.any():  # every sentence fades in and out: no step at the joins
            assert abs(piece[0]) < 1e-6 and abs(piece[-1]) < 1e-6


def test_a_missing_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ModelUnavailable, match="does not exist"):
        ChatTTSEngine.load(str(tmp_path / "nothing"))
    (tmp_path / "asset").mkdir()
    with pytest.raises(ModelUnavailable, match="missing asset/Decoder.safetensors"):
        ChatTTSEngine.load(str(tmp_path))
