"""Built-in VoxCPM2 voices: OpenAI's thirteen names, each a fixed written description the model
designs its voice from (with the request's seed: the same seed, the same voice)."""

from __future__ import annotations

VOICES: dict[str, str] = {
    "alloy": "A balanced, neutral adult voice, clear and even",
    "ash": "A clear, direct male voice, confident and crisp",
    "ballad": "A soft, melodic male voice, gentle and unhurried",
    "coral": "A warm, friendly female voice, bright and welcoming",
    "echo": "A calm, low-pitched male voice, steady and relaxed",
    "fable": "An expressive storyteller with a British accent, lively and engaging",
    "nova": "A bright, lively young female voice, energetic and upbeat",
    "onyx": "A deep, steady male voice, authoritative and resonant",
    "sage": "A measured, thoughtful female voice, calm and wise",
    "shimmer": "A light, airy female voice, soft and gentle",
    "verse": "A versatile narrator, expressive and natural",
    "marin": "A natural, composed female voice, professional and clear",
    "cedar": "A warm, grounded baritone, friendly and reassuring",
}
