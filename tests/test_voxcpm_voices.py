"""VoxCPM2's built-in voices made fixed: OpenAI's thirteen names, each designed once from its written
description and kept beside the weights as a reference (`tts_voices.json`), so that a built-in voice
is the same voice in every request and every segment; the tiny random checkpoint ships them as the
real model's are made (`manage.py make_builtin_voices`). Without the file a worker speaks the written
descriptions. Random weights: noise, not speech."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from django.core.management import call_command

from inference.batch import Audio, BatchRow
from inference.checkpoints import MANIFEST, read_manifest, write_random_manifest
from inference.engine import ModelUnavailable
from inference.voxcpm.engine import VoxCPMEngine
from inference.voxcpm.files import FILES
from inference.voxcpm.params import VoxCPMParams
from inference.voxcpm.references import unpack
from inference.voxcpm.voices import VOICES, VOICES_FILE, read_voices
from tests.test_voxcpm_engine import checkpoint, offline  # noqa: F401  (fixtures)

TEXT = "Good morning, how are you?"


def audio(engine, params: VoxCPMParams, patches: int = 5) -> np.ndarray:
    rows = [BatchRow("a", TEXT, params, patches)]
    return np.concatenate([e.samples for e in engine.run_rows(rows, lambda key: False, 100) if isinstance(e, Audio)])


@pytest.fixture(scope="module")
def engine(checkpoint) -> VoxCPMEngine:  # noqa: F811
    return VoxCPMEngine.load(str(checkpoint), device="cpu", fixed_length=True)


@pytest.fixture
def bare(checkpoint, tmp_path):  # noqa: F811
    """A copy of the checkpoint without the built-in voices' file (as a real download comes)."""
    copy = tmp_path / "bare"
    shutil.copytree(checkpoint, copy)
    (copy / VOICES_FILE).unlink()
    manifest = read_manifest(copy)
    write_random_manifest(copy, "voxcpm", manifest["size"], manifest["seed"], FILES)
    return copy


def test_the_checkpoint_ships_the_thirteen_voices_designed_from_their_descriptions(checkpoint):  # noqa: F811
    body = json.loads((checkpoint / VOICES_FILE).read_text())
    assert set(body["voices"]) == set(VOICES) and "designed from the written descriptions" in body["made_by"]
    assert VOICES_FILE in json.loads((checkpoint / MANIFEST).read_text())["sha256"]  # checked when loaded
    samples = {name: unpack(v["sample"], 4, 64) for name, v in body["voices"].items()}
    assert all(len(s) >= 1 for s in samples.values()) and not np.allclose(samples["alloy"][0], samples["onyx"][0])


def test_a_builtin_voice_speaks_from_its_kept_reference_whatever_the_seed(engine):
    kept = engine.builtin["alloy"]
    alloy = VoxCPMParams.from_request({}, {"builtin": "alloy"}, seed=4)
    assert (alloy.builtin, alloy.design, alloy.reference) == ("alloy", "", "")  # resolved by the worker
    resolved = alloy.with_builtin(engine.builtin)
    assert resolved.mode == "continuation" and resolved.reference == kept["sample"]
    explicit = VoxCPMParams(design="", seed=4, reference=kept["sample"], reference_text=kept["sample_text"])
    built = engine.prompts.built
    assert np.array_equal(audio(engine, alloy), audio(engine, explicit))  # the reference, not the description
    assert engine.prompts.built == built + 1  # its prompt built once, then kept
    styled = VoxCPMParams.from_request({"instructions": "Whisper."}, {"builtin": "alloy"}, seed=4)
    assert styled.with_builtin(engine.builtin).mode == "reference"  # instructions steer the kept timbre
    assert not np.array_equal(audio(engine, styled), audio(engine, alloy))


def test_without_the_file_a_builtin_voice_is_its_written_design(bare, engine):
    plain = VoxCPMEngine.load(str(bare), device="cpu", fixed_length=True)
    assert plain.builtin is None and plain.model_version != engine.model_version  # the file is part of it
    alloy = VoxCPMParams.from_request({}, {"builtin": "alloy"}, seed=4)
    assert alloy.with_builtin(None).design == VOICES["alloy"]
    described = VoxCPMParams(design=VOICES["alloy"], seed=4)
    assert np.array_equal(audio(plain, alloy), audio(plain, described))


def test_a_voices_file_that_does_not_fit_the_model_stops_the_load_naming_the_command(bare):
    (bare / VOICES_FILE).write_text(json.dumps({"voices": {"alloy": {"sample": "x", "sample_text": ""}}}))
    with pytest.raises(ModelUnavailable, match="make_builtin_voices"):
        VoxCPMEngine.load(str(bare), device="cpu")


def test_the_command_designs_the_voices_beside_the_weights(bare, checkpoint, capsys):  # noqa: F811
    call_command("make_builtin_voices", model_dir=str(bare), seed=5)
    made = read_voices(bare)
    shipped = read_voices(checkpoint)
    assert set(made) == set(VOICES) and made["alloy"]["sample_text"] == shipped["alloy"]["sample_text"]
    assert made["alloy"]["sample"] != shipped["alloy"]["sample"]  # another seed, other samples
    assert "seed 5" in json.loads((bare / VOICES_FILE).read_text())["made_by"]
    assert "restart the VoxCPM2 workers" in capsys.readouterr().out
    call_command("make_builtin_voices", model_dir=str(bare), seed=5)  # again, over its own file
    assert read_voices(bare) == made
