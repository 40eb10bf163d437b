"""The VoxCPM2 engine on a tiny random checkpoint (the package's own classes and loader, no
network): every tensor really loads, 48 kHz audio in 160 ms patches, seeds and designs, streaming
equal to the whole, stops, rows joining a running batch, speed as a time-stretch, and the wheel's
declared extras (a web UI, an ASR toolkit...) absent: the engine needs only what its path imports."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from inference.batch import Audio, BatchRow, Done
from inference.checkpoints import MANIFEST
from inference.engine import PAUSE_SECONDS, ModelUnavailable, SynthesisRequest
from inference.voxcpm.checkpoint import make_checkpoint
from inference.voxcpm.engine import VoxCPMEngine
from inference.voxcpm.files import CONFIG, FILES, WEIGHTS, check_model_dir
from inference.voxcpm.params import VoxCPMParams
from inference.voxcpm.references import pack, unpack
from inference.voxcpm.spec import SPEC
from tests.unit.test_kokoro_text import no_network

PATCH = 7680  # samples a language-model step makes at 48 kHz (160 ms)
CALM = VoxCPMParams(design="A calm, low voice", seed=7)


@pytest.fixture(scope="module", autouse=True)
def offline():
    with no_network():
        yield


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> Path:
    ready = os.environ.get("TTS_TEST_VOXCPM_CHECKPOINT", "")
    if ready and (Path(ready) / MANIFEST).exists():
        return Path(ready)
    return make_checkpoint("tiny", tmp_path_factory.mktemp("voxcpm") / "tiny")


@pytest.fixture(scope="module")
def engine(checkpoint) -> VoxCPMEngine:
    return VoxCPMEngine.load(str(checkpoint), device="cpu")


def run(engine, rows, stop=lambda key: False, more=None, chunk=2) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for event in engine.run_rows(rows, stop, chunk, more):
        row = out.setdefault(event.key, {"chunks": [], "order": len(out)})
        if isinstance(event, Audio):
            row["chunks"].append(event.samples)
        else:
            assert isinstance(event, Done)
            row["patches"] = event.tokens
    for row in out.values():
        row["audio"] = np.concatenate(row["chunks"]) if row["chunks"] else np.zeros(0, dtype=np.float32)
    return out


def test_the_wheels_declared_extras_are_not_installed():
    """The worker carries no web UI, ASR toolkit, denoiser hub or dataset library: the engine below
    loads and speaks without them (scripts/bootstrap installs the wheel with --no-deps)."""
    for extra in ("gradio", "spaces", "funasr", "modelscope", "datasets", "matplotlib"):
        assert importlib.util.find_spec(extra) is None, extra


def test_the_checkpoint_has_the_official_layout(checkpoint):
    config = json.loads((checkpoint / CONFIG).read_text())
    assert config["architecture"] == "voxcpm2" and config["patch_size"] == 4
    assert config["audio_vae_config"]["sample_rate"] == 16000 and config["audio_vae_config"]["out_sample_rate"] == 48000
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    assert manifest["engine"] == "voxcpm" and manifest["random_weights"] is True
    assert set(manifest["sha256"]) == set(FILES) | {"tts_voices.json"}  # and the built-in voices (ours)
    assert not any(k.startswith("audio_vae.") for k in load_file(str(checkpoint / WEIGHTS)))
    assert check_model_dir(str(checkpoint)) is None


def test_a_directory_without_the_files_is_refused_naming_the_setting(tmp_path):
    assert "TTS_VOXCPM_MODEL_DIR" in check_model_dir(str(tmp_path)) and "model.safetensors" in check_model_dir(
        str(tmp_path)
    )
    (tmp_path / CONFIG).write_text(json.dumps({"architecture": "voxcpm"}))
    for name in ("model.safetensors", "audiovae.pth", "tokenizer.json"):
        (tmp_path / name).write_bytes(b"x")
    assert "VoxCPM 1.x" in check_model_dir(str(tmp_path))
    with pytest.raises(ModelUnavailable, match="TTS_VOXCPM_MODEL_DIR"):
        VoxCPMEngine.load(str(tmp_path / "absent"), device="cpu")


def test_a_tensor_missing_from_the_file_is_refused_not_left_random(checkpoint, tmp_path):
    """The package loads non-strictly: a renamed or missing tensor would stay random, silently."""
    copy = tmp_path / "copy"
    shutil.copytree(checkpoint, copy)
    state = load_file(str(copy / WEIGHTS))
    dropped = sorted(state)[0]
    del state[dropped]
    save_file(state, str(copy / WEIGHTS))
    (copy / MANIFEST).unlink()  # not a checksum problem: a file that lacks a tensor
    with pytest.raises(ModelUnavailable, match=f"{dropped} missing"):
        VoxCPMEngine.load(str(copy), device="cpu")


def test_the_engine_reports_its_version_rate_and_licence(engine):
    name, digest, random = engine.model_version.split("-")  # float32, as the random checkpoint's config says
    assert name == "voxcpm" and len(digest) == 12 and random == "random"
    assert engine.sample_rate == SPEC.sample_rate == 48000
    assert SPEC.commercial and SPEC.weights_license.spdx == "Apache-2.0"


def test_a_row_is_48k_audio_in_patches_and_its_seed_decides_it(engine):
    rows = [BatchRow("a", engine.read("Hello there, I have 3 apples."), CALM, 20)]
    first = run(engine, rows)["a"]
    again = run(engine, rows)["a"]
    other = run(engine, [BatchRow("a", rows[0].text, VoxCPMParams(design=CALM.design, seed=8), 20)])["a"]
    assert 1 <= first["patches"] <= 20 and len(first["audio"]) == first["patches"] * PATCH
    assert np.isfinite(first["audio"]).all() and np.abs(first["audio"]).max() > 0
    assert np.array_equal(first["audio"], again["audio"])
    assert len(other["audio"]) != len(first["audio"]) or not np.allclose(other["audio"], first["audio"])


def test_the_design_is_what_the_model_reads_before_the_text(engine):
    assert CALM.prompt("Hi.") == "(A calm, low voice)Hi." and VoxCPMParams(design="", seed=1).prompt("Hi.") == "Hi."
    assert VoxCPMParams(design="warm (and slow)", seed=1).prompt("Hi.") == "(warm and slow)Hi."
    text = engine.read("Good morning.")
    calm = run(engine, [BatchRow("a", text, CALM, 12)])["a"]["audio"]
    bright = run(engine, [BatchRow("a", text, VoxCPMParams(design="A bright, fast voice", seed=7), 12)])["a"]["audio"]
    assert len(calm) != len(bright) or not np.allclose(calm, bright)


def test_instructions_design_the_voice_or_steer_a_builtin_ones_style():
    builtin = VoxCPMParams.from_request({}, {"builtin": "onyx"}, seed=1)
    designed = VoxCPMParams.from_request({"instructions": "Whisper, slowly."}, {"builtin": "onyx"}, seed=1)
    assert builtin.with_builtin(None).design.startswith("A deep, steady male voice")  # no kept reference
    assert designed.with_builtin(None).design == "Whisper, slowly."  # the instructions design it instead
    kept = {"onyx": {"sample": "packed", "sample_text": "Hello."}}
    assert designed.with_builtin(kept).mode == "reference"  # the kept timbre, styled by the instructions
    tuned = VoxCPMParams.from_request({"cfg_value": 3.5, "inference_timesteps": 4}, {"builtin": "onyx"}, seed=1)
    assert (tuned.cfg_value, tuned.inference_timesteps) == (3.5, 4)


def test_streaming_gives_the_whole_audio_in_chunks_and_pauses_at_48k(engine):
    segments = [engine.read("Hello there."), engine.read("你好，世界。")]
    whole = np.concatenate(list(engine.synthesize(SynthesisRequest(segments, CALM))))
    chunks = list(engine.stream(SynthesisRequest(segments, CALM), chunk_tokens=1))
    streamed = np.concatenate(chunks)  # its first segment alone, then batched: equal but for rounding
    assert len(chunks) > 3 and len(streamed) == len(whole) and np.abs(streamed - whole).max() < 1e-5
    pause = np.zeros(round(PAUSE_SECONDS * 48000), dtype=np.float32)
    assert any(len(c) == len(pause) and not c.any() for c in chunks)


def test_a_stopped_row_ends_at_once_and_rows_join_a_running_batch(engine):
    stopped = set()

    def stop(key):
        return key in stopped

    rows, joined = [BatchRow("a", engine.read("One two three four five six."), CALM, 30)], []

    def more(live):
        if not joined:
            joined.append(BatchRow("b", engine.read("Seven."), CALM, 8))
            return joined
        return []

    events = []
    for event in engine.run_rows(rows, stop, 1, more):
        events.append(event)
        if isinstance(event, Audio) and event.key == "a":
            stopped.add("a")  # the client left after the first chunk
    done = {e.key: e.tokens for e in events if isinstance(e, Done)}
    assert done["a"] <= 2 and done["b"] >= 1
    with pytest.raises(ValueError, match="unique"):
        list(engine.run_rows(rows + rows, stop))


def test_speed_is_a_time_stretch(engine):
    text = engine.read("Hello there, my friend.")
    normal = run(engine, [BatchRow("a", text, CALM, 12)])["a"]
    fast = run(engine, [BatchRow("a", text, VoxCPMParams(design=CALM.design, seed=7, speed=2.0), 12)])["a"]
    assert fast["patches"] == normal["patches"]  # the same generation
    assert len(fast["audio"]) == pytest.approx(len(normal["audio"]) / 2, rel=0.05)


def test_it_reads_numbers_in_the_segments_language(engine):
    assert engine.read("Tengo 25 años y cuesta 5 €.") == "Tengo veinticinco años y cuesta cinco euros."
    assert engine.read("Der Zug kommt um 9:15 an.") == "Der Zug kommt um neun Uhr fünfzehn an."
    assert "twenty five" in engine.read("I have 25 apples.")  # English: the grammars every engine uses
    assert engine.read("今日は5月です。") == "今日は五月です。"


def test_a_design_too_long_for_the_language_models_cache_is_refused(engine):
    assert engine.voice_problem(CALM) is None
    problem = engine.voice_problem(VoxCPMParams(design="a warm voice " * 400, seed=1))
    assert problem and "tokens long" in problem and "shorten it" in problem


def speaker(seconds: float, pitch: float = 220.0) -> np.ndarray:
    """A 24 kHz 'recording' (as the web side hands one to a worker): a tone and a little noise."""
    t = np.arange(int(seconds * 24000)) / 24000
    noise = 0.02 * np.random.default_rng(3).standard_normal(len(t))
    return (0.3 * np.sin(2 * np.pi * pitch * t) + noise).astype(np.float32)


def test_a_recording_becomes_a_reference_of_the_models_latent_patches(engine):
    voice = engine.voice_from_recording(speaker(2.0), "It costs 12 dollars.")
    patches = unpack(voice["sample"], 4, 64)  # the tiny model's patch size and latent size
    assert patches.shape == (math.ceil(2.0 * 16000 / (4 * 640)), 4, 64)  # 16 kHz, whole patches
    assert np.isfinite(patches).all() and np.abs(patches).max() > 0
    assert voice["sample_text"] == "It costs twelve dollars."  # read as the model reads text
    assert engine.voice_from_recording(speaker(2.0), "")["sample_text"] == ""  # VoxCPM2 clones without one
    other = unpack(engine.voice_from_recording(speaker(2.0, pitch=440.0), "")["sample"], 4, 64)
    assert not np.allclose(other, patches)  # another voice, another reference


def test_a_cloned_voice_speaks_continued_or_styled_and_its_seed_decides_it(engine):
    voice = engine.voice_from_recording(speaker(1.5), "A short reference sentence.")
    continued = VoxCPMParams.from_request({}, voice, seed=7)
    styled = VoxCPMParams.from_request({"instructions": "Whisper, slowly."}, voice, seed=7)
    timbre = VoxCPMParams.from_request({}, {**voice, "sample_text": ""}, seed=7)
    assert (continued.mode, styled.mode, timbre.mode, CALM.mode) == ("continuation", "reference", "reference", "design")
    assert styled.design == "Whisper, slowly." and continued.design == "" and timbre.reference == voice["sample"]
    text = engine.read("Good morning to you.")
    out = {
        p.mode + str(i): run(engine, [BatchRow("a", text, p, 12)])["a"]["audio"]
        for i, p in enumerate((continued, styled, timbre, CALM))
    }
    assert all(len(a) and np.isfinite(a).all() for a in out.values())
    audios = list(out.values())
    assert all(len(a) != len(b) or not np.allclose(a, b) for i, a in enumerate(audios) for b in audios[i + 1 :])
    assert np.array_equal(run(engine, [BatchRow("a", text, continued, 12)])["a"]["audio"], out["continuation0"])
    assert engine.prompts.decoded == 1 and engine.prompts.built == 1  # decoded and run through the LMs once, kept


def test_a_reference_of_another_model_is_refused_when_used(engine):
    wrong = VoxCPMParams(design="", seed=1, reference=pack(np.zeros((3, 2, 64), dtype=np.float32)))
    problem = engine.voice_problem(wrong)
    assert problem and "(n, 4, 64)" in problem and "again from its recording" in problem
    assert "cannot be read" in engine.voice_problem(VoxCPMParams(design="", seed=1, reference="not base64!"))
    huge = engine.voice_from_recording(speaker(1.0), "")  # fits; a reference beyond the cache does not
    long = VoxCPMParams(design="", seed=1, reference=pack(np.ones((3000, 4, 64), dtype=np.float32)))
    assert engine.voice_problem(VoxCPMParams(design="", seed=1, reference=huge["sample"])) is None
    assert "steps" in engine.voice_problem(long)


def test_a_design_is_made_fixed_as_a_sample_kept_for_reference(engine):
    made = engine.voice_from_design("A calm, low voice", 11, "Hello! This is how I sound.")
    again = engine.voice_from_design("A calm, low voice", 11, "Hello! This is how I sound.")
    other = engine.voice_from_design("A calm, low voice", 12, "Hello! This is how I sound.")
    assert made == again and made["sample"] != other["sample"]  # the seed picks the sample, once
    assert made["sample_text"] == "Hello! This is how I sound." and len(unpack(made["sample"], 4, 64)) >= 1
    params = VoxCPMParams.from_request({}, made, seed=3)
    assert params.mode == "continuation" and engine.voice_problem(params) is None
    assert len(run(engine, [BatchRow("a", engine.read("Good night."), params, 10)])["a"]["audio"])
