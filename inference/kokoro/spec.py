"""What Kokoro-82M is and may do, for the API, billing, docs and dashboard (no torch)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..spec import BuiltinVoice, EngineSpec, Features, License
from ..text.preparation import Segmenting
from .languages import BY_PREFIX, NAMES
from .params import KokoroParams
from .phonemes import VOCAB

FRAMES_PER_SECOND = 40.0  # one predicted duration unit is 600 samples at 24 kHz


def _voices() -> tuple[BuiltinVoice, ...]:
    """Kokoro v1.0's 54 voices (hexgrad/Kokoro-82M's VOICES.md): an id's first letter is its
    language (`languages.BY_PREFIX`), its second its gender. Spanish, French, Hindi, Italian and
    Portuguese are read through espeak-ng, Japanese through MeCab (unidic-lite): see `g2p`."""
    names = {
        "af": "heart alloy aoede bella jessica kore nicole nova river sarah sky",
        "am": "adam echo eric fenrir liam michael onyx puck santa",
        "bf": "alice emma isabella lily",
        "bm": "daniel fable george lewis",
        "ef": "dora",
        "em": "alex santa",
        "ff": "siwis",
        "hf": "alpha beta",
        "hm": "omega psi",
        "if": "sara",
        "im": "nicola",
        "jf": "alpha gongitsune nezumi tebukuro",
        "jm": "kumo",
        "pf": "dora",
        "pm": "alex santa",
        "zf": "xiaobei xiaoni xiaoxiao xiaoyi",
        "zm": "yunjian yunxi yunxia yunyang",
    }
    voices = []
    for prefix, words in names.items():
        language = BY_PREFIX[prefix[0]]
        gender = "female" if prefix[1] == "f" else "male"
        for word in words.split():
            description = f"{NAMES[language]}, {gender} ({word.capitalize()})."
            voices.append(BuiltinVoice(f"{prefix}_{word}", description, language))
    return tuple(voices)


VOICES = _voices()


def served_by(spec: EngineSpec, model_dir: str) -> EngineSpec:
    """Kokoro as `model_dir` serves it: the voices whose packs (`voices/<id>.pt`) it holds — a
    converted checkpoint may carry a few (requirements/kokoro-real.txt: five Japanese voices) — and
    each of OpenAI's names the voice it names where that is there, else one that is, of the same
    gender (an id's second letter), in turn. A directory with every voice, or none readable: `spec`."""
    folder = Path(model_dir, "voices")
    held = {pack.stem for pack in folder.glob("*.pt")} if folder.is_dir() else set()
    voices = tuple(v for v in spec.voices if v.id in held)
    if not voices or len(voices) == len(spec.voices):
        return spec
    alike = {gender: [v.id for v in voices if v.id[1] == gender] for gender in "fm"}
    turns = dict.fromkeys(alike, 0)
    names = {}
    for name, voice in spec.openai_voices.items():
        if voice in held:
            names[name] = voice
            continue
        pool = alike.get(voice[1]) or [v.id for v in voices]
        names[name] = pool[turns.get(voice[1], 0) % len(pool)]
        turns[voice[1]] = turns.get(voice[1], 0) + 1
    return replace(spec, voices=voices, openai_voices=names)


SPEC = EngineSpec(
    name="kokoro",
    title="Kokoro-82M",
    version="v1.0",
    description="hexgrad's 82M-parameter model: fast, voices in English (American and British), Mandarin, "
    "Spanish, French, Hindi, Italian, Japanese and Brazilian Portuguese, word timings, voice mixes. "
    "Apache-2.0: may be sold.",
    # Text in another language than its voice's: kana, Devanagari and Han characters go to the G2P
    # of their script (Japanese, Hindi, Mandarin) whatever the voice, in the voice's timbre; Latin
    # script is read in the row's language (the voice's, or the request's `lang`).
    languages=("en", "zh", "es", "fr", "hi", "it", "ja", "pt"),
    voices=VOICES,
    # OpenAI's names, each a fixed Kokoro voice of a like character.
    openai_voices={
        "alloy": "af_alloy",
        "ash": "am_adam",
        "ballad": "bm_george",
        "coral": "af_heart",
        "echo": "am_echo",
        "fable": "bm_fable",
        "nova": "af_nova",
        "onyx": "am_onyx",
        "sage": "af_sarah",
        "shimmer": "af_bella",
        "verse": "am_michael",
        "marin": "af_river",
        "cedar": "am_eric",
    },
    options=frozenset(),
    inline_tags=frozenset(),
    features=Features(
        streaming="sentences",
        batching=True,
        word_timings=True,
        seeds=False,
        inline_tags=False,
        speaker_voices=False,
        recording_voices=False,
        mixed_voices=True,
        phoneme_lexicons=True,
    ),
    code_license=License(
        "Apache-2.0",
        "https://github.com/hexgrad/kokoro/blob/main/LICENSE",
        True,
        "Permissive: may be used and sold, keeping the licence and notices.",
    ),
    weights_license=License(
        "Apache-2.0",
        "https://huggingface.co/hexgrad/Kokoro-82M",
        True,
        "Permissive: the model's audio may be sold.",
    ),
    weights_source="https://huggingface.co/hexgrad/Kokoro-82M",
    tokens_per_second=FRAMES_PER_SECOND,
    params=KokoroParams,
    engine="inference.kokoro.engine:KokoroEngine",
    # Each sentence is made whole: one a segment (its audio goes out as soon as it is made; a live
    # request's first sentence in windows as they are decoded: `forward`).
    phoneme_symbols=frozenset(VOCAB),
    segmenting=Segmenting(pack=False),
    narrow=served_by,
)
