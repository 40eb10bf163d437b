"""What VoxCPM2 is and may do, for the API, billing, docs and dashboard (no torch)."""

from __future__ import annotations

from ..spec import BuiltinVoice, EngineSpec, Features, License
from .params import VoxCPMParams
from .references import affinity
from .voices import VOICES

SAMPLE_RATE = 48000  # AudioVAE V2's output
PATCHES_PER_SECOND = 6.25  # one language-model step: a patch of 4 latent frames, 7680 samples at 48 kHz

# Its own table (docs/api.md, "The three models"): no language tag needed; Chinese dialects are read as Chinese.
LANGUAGES = (
    "ar", "my", "zh", "da", "nl", "en", "fi", "fr", "de", "el", "he", "hi", "id", "it", "ja",
    "km", "ko", "lo", "ms", "no", "pl", "pt", "ru", "es", "sw", "sv", "tl", "th", "tr", "vi",
)  # fmt: skip

SPEC = EngineSpec(
    name="voxcpm",
    title="VoxCPM2",
    version="2.0",
    description="OpenBMB's 2B-parameter model: 30 languages with no language tag, 48 kHz audio, voices designed "
    "from a description (`instructions`), voices cloned from a recording. Apache-2.0: may be sold.",
    languages=LANGUAGES,
    voices=tuple(BuiltinVoice(name, f"{text}.", "multi") for name, text in VOICES.items()),
    openai_voices={name: name for name in VOICES},
    options=frozenset({"cfg_value", "inference_timesteps"}),
    inline_tags=frozenset(),
    features=Features(
        streaming="tokens",
        batching=True,  # rows of different requests share each step (per-row slots: `rows`)
        word_timings=False,
        seeds=True,
        inline_tags=False,
        speaker_voices=False,
        recording_voices=True,  # a clone: the recording's reference, its transcript when given
        mixed_voices=False,
        phoneme_lexicons=False,
        instructions=True,  # a voice design: "(description)text"
    ),
    code_license=License(
        "Apache-2.0",
        "https://github.com/OpenBMB/VoxCPM/blob/main/LICENSE",
        True,
        "Permissive: may be used and sold, keeping the licence and notices.",
    ),
    weights_license=License(
        "Apache-2.0",
        "https://huggingface.co/openbmb/VoxCPM2",
        True,
        "Permissive: the model's audio may be sold (no watermark is applied).",
    ),
    weights_source="https://huggingface.co/openbmb/VoxCPM2",
    tokens_per_second=PATCHES_PER_SECOND,
    params=VoxCPMParams,
    engine="inference.voxcpm.engine:VoxCPMEngine",
    sample_rate=SAMPLE_RATE,
    recording_seconds=(1.0, 30.0),
    transcript_required=False,  # without: the timbre (instructions steer the style); with: continued, closest
    voice_affinity=affinity,  # a clone's prompt is kept by the worker that owns it (rows: its prefix)
)
