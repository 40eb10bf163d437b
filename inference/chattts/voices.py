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

    @property
    def description(self) -> str:
        # A seed picks a speaker at random from the checkpoint's statistics: nothing about its timbre
        # (pitch, warmth, gender) is chosen or promised, only that it is the same speaker every time.
        return f"Seed {self.seed}: a fixed random speaker; listen to the preview."


VOICES: dict[str, Voice] = {
    v.name: v
    for v in (
        Voice("alloy", 1111),
        Voice("ash", 2222),
        Voice("ballad", 3333),
        Voice("coral", 4444),
        Voice("echo", 5555),
        Voice("fable", 6666),
        Voice("nova", 7777),
        Voice("onyx", 8888),
        Voice("sage", 9999),
        Voice("shimmer", 1212),
        Voice("verse", 2323),
        Voice("marin", 3434),
        Voice("cedar", 4545),
    )
}
