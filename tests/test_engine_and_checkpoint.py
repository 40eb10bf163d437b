"""The generated checkpoint is loaded by ChatTTS's own loader, and the engine is deterministic."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from inference.chattts.checkpoint import ASSET_FILES, check_model_dir
from inference.chattts.engine import ChatTTSEngine
from inference.chattts.params import SAMPLES_PER_TOKEN, ChatTTSParams, token_budget
from inference.chattts.spec import SPEC as CHATTTS
from inference.checkpoints import MANIFEST
from inference.engine import FADE_SECONDS, PAUSE_SECONDS, ModelUnavailable, SynthesisRequest
from inference.spec import SAMPLE_RATE

CHECKPOINT = os.environ.get("TTS_TEST_CHECKPOINT", "")


@pytest.fixture(scope="module")
def engine():
    return ChatTTSEngine.load(CHECKPOINT, device="cpu")


def audio(engine, text: str, **params) -> np.ndarray:
    prepared = CHATTTS.prepare(text)
    request = SynthesisRequest(prepared.segments, ChatTTSParams(**{"voice_seed": 1, "seed": 1, **params}))
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


def segments_and_pauses(engine, segments: list[str]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """`synthesize` yields each segment's audio with a pause between two: split them apart."""
    pieces = list(engine.synthesize(SynthesisRequest(segments, ChatTTSParams(voice_seed=1, seed=1))))
    assert len(pieces) == 2 * len(segments) - 1
    return pieces[0::2], pieces[1::2]


def test_every_segment_gives_audio_held_to_its_token_budget(engine):
    text = "Short. " + "This second sentence is a good deal longer than the first one was. " * 3
    prepared = CHATTTS.prepare(text)
    assert len(prepared.segments) > 1
    audio, _ = segments_and_pauses(engine, prepared.segments)
    for piece, segment in zip(audio, prepared.segments, strict=True):
        assert np.abs(piece).max() > 1e-3, f"segment {segment!r} is silent"
        assert len(piece) <= token_budget(segment) * SAMPLES_PER_TOKEN


def test_segments_fade_in_and_out_around_silent_pauses_so_joins_do_not_click(engine):
    prepared = CHATTTS.prepare("First part here. Second part here.")
    audio, pauses = segments_and_pauses(engine, prepared.segments * 2)
    fade = int(FADE_SECONDS * SAMPLE_RATE)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    for piece in audio:
        peak = np.abs(piece).max()
        assert peak > 1e-3 and len(piece) > 2 * fade  # real audio, longer than its two fades
        assert abs(piece[0]) < 1e-6 and abs(piece[-1]) < 1e-6
        # Within each fade the signal stays under the ramp: it rises from and falls to silence.
        assert np.all(np.abs(piece[:fade]) <= ramp * peak + 1e-6)
        assert np.all(np.abs(piece[-fade:]) <= ramp[::-1] * peak + 1e-6)
    for gap in pauses:
        assert len(gap) == int(PAUSE_SECONDS * SAMPLE_RATE) and not gap.any()


def test_a_missing_model_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ModelUnavailable, match="does not exist"):
        ChatTTSEngine.load(str(tmp_path / "nothing"))
    (tmp_path / "asset").mkdir()
    with pytest.raises(ModelUnavailable, match="missing asset/Decoder.safetensors"):
        ChatTTSEngine.load(str(tmp_path))
