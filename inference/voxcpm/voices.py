"""Built-in VoxCPM2 voices: OpenAI's thirteen names, each written as a description the model designs
a voice from, and made fixed once as a reference (pure Python).

A design alone varies from run to run (the model samples), so each built-in voice is designed once,
its sample kept as a reference (`VOICES_FILE` in the model directory: each name's packed latent
patches and what the sample says), and every request with that voice speaks from it: the same voice
in every request, across a long text's segments, whatever the seed. `manage.py make_builtin_voices`
makes the file with the real model (a deployment's own, once); the random checkpoints ship one made
the same way (`checkpoint.make_checkpoint`). A worker whose model directory has none speaks the
written descriptions (the voice then varies with the seed) and says so in its log.
"""

from __future__ import annotations

import json
from pathlib import Path

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

VOICES_FILE = "tts_voices.json"
SAMPLE_TEXT = "Hello! This is how I sound when I read something aloud for you."


def design_all(engine, seed: int = 0, text: str = SAMPLE_TEXT) -> dict[str, dict]:
    """Every built-in voice designed once by `engine` (a loaded VoxCPM2 engine) from its description,
    under `seed` plus its place in the list: {name: {"sample", "sample_text"}}."""
    return {name: engine.voice_from_design(design, seed + i, text) for i, (name, design) in enumerate(VOICES.items())}


def write_voices(directory: str | Path, voices: dict[str, dict], made_by: str) -> Path:
    path = Path(directory) / VOICES_FILE
    body = {"format": 1, "made_by": made_by, "voices": voices}
    path.write_text(json.dumps(body, indent=1, ensure_ascii=False))
    return path


def read_voices(directory: str | Path) -> dict[str, dict] | None:
    """The references of the built-in voices kept beside a model, or None where there are none.
    Raises ValueError for a file that is not one (a name missing, a field of the wrong type)."""
    path = Path(directory) / VOICES_FILE
    if not path.is_file():
        return None
    try:
        voices = json.loads(path.read_text())["voices"]
        missing = sorted(set(VOICES) - set(voices))
        if missing:
            raise ValueError(f"no reference for {', '.join(missing)}")
        return {
            name: {"sample": str(voices[name]["sample"]), "sample_text": str(voices[name]["sample_text"])}
            for name in VOICES
        }
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{VOICES_FILE} is not a voices file ({exc})") from exc
