"""What an engine says of itself: its models, languages, voices, options, features and licences.

Each engine package exports one `EngineSpec` (pure data: no torch, so the web process reads it) and
one engine class implementing `inference.engine.Engine`. The API, billing, the docs and the
dashboard read the spec — no `if engine == "kokoro"` outside the engine's own package; a feature an
engine lacks is refused from its spec, naming the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .text.preparation import PreparedText, Segmenting, memoised, prepare
from .text.ssml_text import prepare_ssml

SAMPLE_RATE = 24000  # OpenAI's rate: what a plain `pcm` is on every engine, and the default engines' rate
# The rows a CPU worker generates together when TTS_MAX_BATCH is 0 (`base.BatchEngine.default_max_batch`,
# which says why); here, torch-free, for the web's fair share too (`synthesis.service.capacity`).
CPU_MAX_BATCH = 4
RANDOM_WEIGHTS = "-random"  # ends the model version of a randomly initialised checkpoint (noise, not speech)


prepare_ssml_memoised = memoised(maxsize=1024)(prepare_ssml)


@dataclass(frozen=True)
class License:
    spdx: str  # e.g. "Apache-2.0", "CC-BY-NC-4.0"
    url: str
    commercial: bool  # may an operator sell what it makes without the authors' separate permission
    summary: str  # one plain sentence for operators

    def as_dict(self) -> dict:
        return {"spdx": self.spdx, "url": self.url, "commercial_use": self.commercial, "summary": self.summary}


@dataclass(frozen=True)
class BuiltinVoice:
    id: str  # what a request sends as `voice`
    description: str
    language: str  # "en-us", "en-gb", "zh", or "multi" (a ChatTTS speaker speaks both)


@dataclass(frozen=True)
class Features:
    streaming: str  # "tokens": audio every few hundred ms of a sentence; "sentences": each sentence whole
    batching: bool  # rows of different requests generate together
    word_timings: bool  # captions carry each word's start and end
    seeds: bool  # the seed changes the audio (False: deterministic, the seed is accepted and ignored)
    inline_tags: bool  # [laugh], [uv_break]... in the text
    speaker_voices: bool  # a voice made from a seed or a speaker embedding string (sampled speakers)
    recording_voices: bool  # a voice made from a reference recording
    mixed_voices: bool  # a voice made as a weighted mix of built-in voices
    phoneme_lexicons: bool  # lexicon entries may give phonemes
    instructions: bool = False  # it follows a request's `instructions` (voice and style); else they are ignored

    def as_dict(self) -> dict:
        return {
            "streaming": self.streaming,
            "batching": self.batching,
            "word_timings": self.word_timings,
            "seeds": self.seeds,
            "inline_tags": self.inline_tags,
            "speaker_voices": self.speaker_voices,
            "recording_voices": self.recording_voices,
            "mixed_voices": self.mixed_voices,
            "phoneme_lexicons": self.phoneme_lexicons,
            "instructions": self.instructions,
        }


@dataclass(frozen=True)
class EngineSpec:
    name: str  # the model id a request sends: "chattts", "kokoro"
    title: str  # "ChatTTS", "Kokoro-82M"
    version: str  # the released weights this code serves, e.g. "v1.0"
    description: str
    languages: tuple[str, ...]  # ISO 639-1: "en", "zh"
    voices: tuple[BuiltinVoice, ...]
    openai_voices: Mapping[str, str]  # OpenAI's voice names -> one of `voices`
    options: frozenset[str]  # request options beyond the common ones (temperature, top_p, ...)
    inline_tags: frozenset[str]  # the tags the text may carry (empty: none)
    features: Features
    code_license: License
    weights_license: License
    weights_source: str  # where the real weights come from
    tokens_per_second: float  # the engine's streaming unit (ChatTTS audio tokens, Kokoro frames)
    params: type  # its rows' parameters: a frozen dataclass with `from_request(data, voice, seed)`
    engine: str  # "module:Class" of the engine (imported in worker processes only)
    queue: str = field(default="")  # the Celery queue of its workers ("tts-<name>" when empty)
    # How its text is cut into segments (generations): packed sentences for an engine that streams
    # within a segment; a sentence each, the first one cut short, for one that makes each whole.
    segmenting: Segmenting = field(default=Segmenting())
    sample_rate: int = SAMPLE_RATE  # of the float32 mono audio it generates (Hz): its audio carries it
    # A voice from a recording (features.recording_voices): how long the recording may be (seconds),
    # and whether its transcript is needed (ChatTTS's zero-shot reads it; VoxCPM2 clones without).
    recording_seconds: tuple[float, float] = (1.0, 15.0)
    transcript_required: bool = True
    # A job's voice as its workers keep it (a clone's prompt: costly to build, worth keeping on one
    # worker): the key of a job's `params` (a dict), "" when there is nothing to keep; None: the
    # engine keeps nothing per voice (its jobs are not routed by voice).
    voice_affinity: Callable[[Mapping], str] | None = None
    # The phoneme symbols the model reads (features.phoneme_lexicons): what SSML's <phoneme ph> may hold.
    phoneme_symbols: frozenset[str] = frozenset()
    # The spec as a model directory serves it, where a directory may hold fewer voices than
    # `voices` (Kokoro's are files beside the weights): read without loading the model; None: the
    # spec whatever the directory (`served_by`).
    narrow: Callable[[EngineSpec, str], EngineSpec] | None = None

    @property
    def queue_name(self) -> str:
        return self.queue or f"tts-{self.name}"

    @property
    def commercial(self) -> bool:
        """May what it makes be sold without a separate permission (code and weights)?"""
        return self.code_license.commercial and self.weights_license.commercial

    @property
    def deterministic(self) -> bool:
        """The same text and voice always give the same audio: every request is cacheable."""
        return not self.features.seeds

    def prepare(self, text: str, ssml: bool = False) -> PreparedText:
        """`text` validated for this model (its inline tags, its languages) and split into
        segments as the model wants them; TextError says what is wrong. `ssml`: the text is SSML
        (`inference.text.ssml`), its segments styled; SsmlError says where."""
        cutting = self.segmenting
        if ssml:
            return prepare_ssml_memoised(
                text, self.name, self.inline_tags, self.languages, self.phoneme_symbols, cutting
            )
        return prepare(text, self.inline_tags, self.languages, self.name, cutting)

    def served_by(self, model_dir: str) -> EngineSpec:
        """This spec as the model directory `model_dir` serves it ("": the official download, every
        voice): its voices those the directory holds, OpenAI's names each one of those."""
        return self.narrow(self, model_dir) if self.narrow is not None and model_dir else self

    def voice(self, name: str) -> BuiltinVoice | None:
        """A built-in voice by its id or by OpenAI's name for it."""
        name = self.openai_voices.get(name, name)
        return next((v for v in self.voices if v.id == name), None)

    def voice_ids(self) -> list[str]:
        """Every name a request may send: OpenAI's first, then the engine's own ids."""
        own = [v.id for v in self.voices]
        return list(self.openai_voices) + [v for v in own if v not in self.openai_voices]
