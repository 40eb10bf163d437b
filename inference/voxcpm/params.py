"""A VoxCPM2 row's parameters, and how a speech request's fields become them (pure Python).

A VoxCPM2 voice here is a voice *design*: a description the model reads before the text, in its
own form `"(description)text"` (a young woman, warm, a little fast...), or a *clone*: a recording's
encoded reference (`references.pack`), with what it says when the tenant gave it. A built-in voice
is named (`builtin`) and resolved by the worker (`with_builtin`): the reference its model directory
keeps for it (`voices.VOICES_FILE`: a clone, the same voice in every request), else its written
description. A request's `instructions` (OpenAI's `gpt-4o-mini-tts` field: the model follows them)
design the voice, or steer a cloned or built-in voice's style (the reference then guides the timbre
alone: the transcript's continuation would read the description as the recording's words). The
model samples (flow-matching noise), so the seed is a parameter: the same text, voice and seed give
the same audio; a design alone varies from seed to seed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .voices import VOICES

CFG_VALUE = 2.0  # the package's default classifier-free guidance
INFERENCE_TIMESTEPS = 10  # the package's default flow-matching solver steps per patch


@dataclass(frozen=True)
class VoxCPMParams:
    design: str  # the voice's description, read by the model before the text ("" : its own voice)
    seed: int
    cfg_value: float = CFG_VALUE
    inference_timesteps: int = INFERENCE_TIMESTEPS
    speed: float = 1.0  # OpenAI's 0.25-4.0: a time-stretch that keeps the pitch (the model has none)
    reference: str = ""  # a cloned voice: its recording's latent patches, packed
    reference_text: str = ""  # what the recording says, as the model reads it ("": not given)
    builtin: str = ""  # a built-in voice's name, resolved by the worker (`with_builtin`)
    spell_out: bool = True  # numbers, dates and symbols read out (a request's text_normalization "off": False)

    @classmethod
    def from_request(cls, data: dict, voice: dict, seed: int) -> VoxCPMParams:
        """`voice`: {"builtin": id} or a cloned voice's row ({"sample", "sample_text"});
        `instructions`, when sent, steer its style (or, with no reference, design the voice)."""
        instructions = (data.get("instructions") or "").strip()
        builtin = voice.get("builtin") or ""
        return cls(
            design=instructions,
            builtin=builtin,
            reference="" if builtin else voice.get("sample", ""),
            reference_text="" if builtin else voice.get("sample_text", ""),
            seed=seed,
            cfg_value=float(data.get("cfg_value", CFG_VALUE)),
            inference_timesteps=int(data.get("inference_timesteps", INFERENCE_TIMESTEPS)),
            speed=float(data.get("speed", 1.0)),
            spell_out=data.get("text_normalization", "auto") != "off",
        )

    def with_builtin(self, references: dict[str, dict] | None) -> VoxCPMParams:
        """A built-in voice resolved: its kept reference (from `references`, the model directory's
        voices file) with what its sample says, else its written description (unless instructions
        design the voice already). Any other voice as it is."""
        if not self.builtin:
            return self
        kept = (references or {}).get(self.builtin)
        if kept is not None:
            return replace(self, builtin="", reference=kept["sample"], reference_text=kept["sample_text"])
        return replace(self, builtin="", design=self.design or VOICES[self.builtin])

    @property
    def mode(self) -> str:
        """How the row speaks: "design" (a description, or the model's own voice), "reference"
        (a clone's timbre, the design steering its style), "continuation" (a clone with its
        transcript and no design: the recording continued, closest to the speaker)."""
        if not self.reference:
            return "design"
        return "continuation" if self.reference_text and not self.design else "reference"

    def prompt(self, text: str) -> str:
        """What the model reads: the design in parentheses, then the text."""
        design = self.design.replace("(", "").replace(")", "")
        return f"({design}){text}" if design else text
