"""What ChatTTS is and may do, for the API, billing, docs and dashboard (no torch)."""

from __future__ import annotations

import re

from ..spec import BuiltinVoice, EngineSpec, Features, License
from .params import TOKENS_PER_SECOND, ChatTTSParams
from .voices import VOICES

# Inline control tags users may write in `input` (ChatTTS's tokenizer knows them).
INLINE_TAGS = frozenset(
    ["[uv_break]", "[v_break]", "[lbreak]", "[llbreak]", "[laugh]"]
    + [f"[break_{i}]" for i in range(8)]
    + [f"[laugh_{i}]" for i in range(3)]
    + [f"[oral_{i}]" for i in range(10)]
)
# Tags that steer text refinement (`refine_prompt`).
REFINE_TAG = re.compile(r"^(\[(oral_\d|laugh_[0-2]|break_[0-7])\])+$")

SPEC = EngineSpec(
    name="chattts",
    title="ChatTTS",
    version="v0.2",
    description="2noise's conversational model: Chinese and English, sampled speakers, laughter and pauses "
    "as inline tags. Non-commercial weights.",
    languages=("en", "zh"),
    voices=tuple(BuiltinVoice(v.name, v.description, "multi") for v in VOICES.values()),
    openai_voices={name: name for name in VOICES},
    options=frozenset({"temperature", "top_p", "top_k", "refine_text", "refine_prompt"}),
    inline_tags=INLINE_TAGS,
    features=Features(
        streaming="tokens",
        batching=True,
        word_timings=False,
        seeds=True,
        inline_tags=True,
        speaker_voices=True,
        recording_voices=True,
        mixed_voices=False,
        phoneme_lexicons=False,
    ),
    code_license=License(
        "AGPL-3.0-or-later",
        "https://github.com/2noise/ChatTTS/blob/main/LICENSE",
        True,
        "Free software: a service that runs it (modified or not) must offer its users the source.",
    ),
    weights_license=License(
        "CC-BY-NC-4.0",
        "https://creativecommons.org/licenses/by-nc/4.0/",
        False,
        "Non-commercial: selling this model's audio needs the ChatTTS authors' separate permission.",
    ),
    weights_source="https://huggingface.co/2Noise/ChatTTS",
    tokens_per_second=TOKENS_PER_SECOND,
    params=ChatTTSParams,
    engine="inference.chattts.engine:ChatTTSEngine",
)
