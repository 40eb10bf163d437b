"""How the dashboard words the models served: each engine's spec (`inference.spec.EngineSpec`) as
pages show it — its licences in plain words (may its audio be sold?), languages, features and
options — and the models an organization's plan offers in its pickers. Everything is read from
the spec: no page knows one engine from another."""

from __future__ import annotations

from inference.registry import SPECS
from inference.spec import EngineSpec, License
from synthesis.service import workers

LANGUAGES = {
    "en": "English",
    "zh": "Chinese",
    "en-us": "American English",
    "en-gb": "British English",
    "multi": "English and Chinese",
    "es": "Spanish",
    "fr": "French",
    "hi": "Hindi",
    "it": "Italian",
    "ja": "Japanese",
    "pt": "Portuguese",
    "pt-br": "Brazilian Portuguese",
}
STREAMING = {
    "tokens": "streams audio every few hundred milliseconds",
    "sentences": "streams each sentence whole",
}


def licence_name(licence: License) -> str:
    """The SPDX id as people write it: CC-BY-NC-4.0 as "CC BY-NC 4.0", others as they are."""
    parts = licence.spdx.split("-")
    if parts[0] == "CC" and len(parts) > 2:
        return f"CC {'-'.join(parts[1:-1])} {parts[-1]}"
    return licence.spdx


def licence_words(spec: EngineSpec) -> str:
    """One line: "Apache-2.0, may be sold", or what keeps its audio from being sold."""
    code, weights = spec.code_license, spec.weights_license
    if spec.commercial:
        same = code.spdx == weights.spdx
        names = licence_name(code) if same else f"code {licence_name(code)}, weights {licence_name(weights)}"
        return f"{names}, may be sold"
    closed = [
        f"{what} ({licence_name(lic)})" for what, lic in (("code", code), ("weights", weights)) if not lic.commercial
    ]
    return "non-commercial " + " and ".join(closed)


def label(spec: EngineSpec) -> str:
    """A model as a picker names it: "Kokoro-82M — Apache-2.0, may be sold"."""
    return f"{spec.title} — {licence_words(spec)}"


def language_name(code: str) -> str:
    return LANGUAGES.get(code, code)


def feature_words(spec: EngineSpec) -> list[str]:
    """What the model does, one short phrase each, in the spec's order."""
    f = spec.features
    words = [STREAMING.get(f.streaming, f"streams by {f.streaming}")]
    if f.word_timings:
        words.append("word timings in its captions")
    words.append(
        "a seed changes the audio" if f.seeds else "deterministic: the same text and voice give the same audio"
    )
    if f.inline_tags:
        words.append(f"inline tags such as {', '.join(sorted(spec.inline_tags, key=lambda t: (len(t), t))[:3])}")
    made = [
        what
        for what, has in (
            ("a seed or a speaker embedding", f.speaker_voices),
            ("a recording", f.recording_voices),
            ("a mix of its built-in voices", f.mixed_voices),
        )
        if has
    ]
    if made:
        words.append(f"your own voices from {' or '.join(made)}")
    words.append(
        "lexicon entries with phonemes (misaki's notation)" if f.phoneme_lexicons else "lexicon entries by alias"
    )
    return words


def card(spec: EngineSpec, allowed: bool = True) -> dict:
    """Everything a page shows of a model."""
    return {
        "name": spec.name,
        "title": spec.title,
        "version": spec.version,
        "description": spec.description,
        "label": label(spec),
        "licence": licence_words(spec),
        "code_licence": spec.code_license,
        "code_licence_name": licence_name(spec.code_license),
        "weights_licence": spec.weights_license,
        "weights_licence_name": licence_name(spec.weights_license),
        "commercial": spec.commercial,
        "languages": [language_name(code) for code in spec.languages],
        "features": feature_words(spec),
        "options": sorted(spec.options),
        "voices": len(spec.voices),
        "names": len(spec.voice_ids()) - len(spec.voices),  # OpenAI's names mapped onto those voices
        "allowed": allowed,
        "random_weights": workers.serves_random_weights(spec.name),
    }


def title_of(model: str) -> str:
    """A ledger row's model as a person reads it (an engine's title; another name as it is)."""
    spec = SPECS.get(model)
    return spec.title if spec is not None else model
