"""A ChatTTS row's generation parameters, and how a speech request's fields become them.

Pure Python (the web process builds them for the cache key and the job; the worker reads them back
from the job). Frozen and hashable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..text.preparation import estimate_seconds
from .voices import VOICES


def speed_level(speed: float) -> int:
    """OpenAI's speed (0.25–4.0, 1.0 normal) onto ChatTTS's [speed_0..9] (5 normal), log-scaled."""
    return max(0, min(9, round(5 + 2 * math.log2(speed))))


@dataclass(frozen=True)
class ChatTTSParams:
    voice_seed: int  # the named voice's speaker seed
    seed: int  # sampling seed: same text + voice + seed gives the same audio
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    speed: int = 5  # ChatTTS [speed_N], 0..9
    refine_text: bool = False
    refine_prompt: str = ""
    use_decoder: bool = True
    speaker: str = ""  # a ChatTTS speaker embedding string (an organization's voice); else voice_seed's
    sample: str = ""  # a recording's codes (ChatTTS `spk_smp`): the voice is the recording's speaker
    sample_text: str = ""  # what the recording says, spelled out (ChatTTS `txt_smp`)
    spell_out: bool = True  # numbers, dates and symbols read out (a request's text_normalization "off": False)

    @classmethod
    def from_request(cls, data: dict, voice: dict, seed: int) -> ChatTTSParams:
        """`data`: the validated request; `voice`: {"builtin": id} or an organization's voice
        ({"seed"} / {"speaker"} / {"sample", "sample_text"})."""
        if "builtin" in voice:
            voice_seed, speaker, sample, sample_text = VOICES[voice["builtin"]].seed, "", "", ""
        else:
            voice_seed = voice.get("seed") or 0
            speaker, sample, sample_text = (
                voice.get("speaker", ""),
                voice.get("sample", ""),
                voice.get("sample_text", ""),
            )
        return cls(
            voice_seed=voice_seed,
            speaker=speaker,
            sample=sample,
            sample_text=sample_text,
            seed=seed,
            temperature=data.get("temperature", cls.temperature),
            top_p=data.get("top_p", cls.top_p),
            top_k=data.get("top_k", cls.top_k),
            speed=speed_level(data.get("speed", 1.0)),
            refine_text=data.get("refine_text", False),
            refine_prompt=data.get("refine_prompt", ""),
            spell_out=data.get("text_normalization", "auto") != "off",
        )


SAMPLES_PER_TOKEN = 512  # one audio token decodes to 512 samples at 24 kHz
TOKENS_PER_SECOND = 24000 / SAMPLES_PER_TOKEN  # 46.875


def token_budget(segment: str, speed: float = 1.0) -> int:
    """The most audio tokens one segment may generate: proportional to its text, so a runaway
    generation (random weights rarely emit the end token) stops."""
    seconds = 1.0 + 2.0 * estimate_seconds(segment) / max(speed, 0.25)
    return max(24, math.ceil(seconds * TOKENS_PER_SECOND))
