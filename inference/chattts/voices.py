"""Built-in named voices. A voice is a fixed ChatTTS speaker embedding, sampled once from the
checkpoint's speaker statistics with the voice's own seed, so a voice sounds the same on every
worker and in every request. The names are OpenAI's, so the `openai` SDK's voices work as they are.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Voice:
    name: str
    seed: int
    description: str


VOICES: dict[str, Voice] = {
    v.name: v
    for v in (
        Voice("alloy", 1111, "Balanced, neutral."),
        Voice("ash", 2222, "Clear and direct."),
        Voice("ballad", 3333, "Soft and melodic."),
        Voice("coral", 4444, "Warm and friendly."),
        Voice("echo", 5555, "Calm, low-pitched."),
        Voice("fable", 6666, "Expressive storyteller."),
        Voice("nova", 7777, "Bright and lively."),
        Voice("onyx", 8888, "Deep and steady."),
        Voice("sage", 9999, "Measured and thoughtful."),
        Voice("shimmer", 1212, "Light and airy."),
        Voice("verse", 2323, "Versatile narrator."),
        Voice("marin", 3434, "Natural and composed."),
        Voice("cedar", 4545, "Warm, grounded baritone."),
    )
}
