"""A VoxCPM2 row's parameters, and how a speech request's fields become them (pure Python).

A VoxCPM2 voice here is a voice *design*: a description the model reads before the text, in its
own form `"(description)text"` (a young woman, warm, a little fast...), or a *clone*: a recording's
encoded reference (`references.pack`), with what it says when the tenant gave it. A built-in voice
is one fixed description; a request's `instructions` replace it (OpenAI's `gpt-4o-mini-tts` field:
the model follows them), and steer a cloned voice's style (the reference then guides the timbre
alone: the transcript's continuation would read the description as the recording's words). The
model samples (flow-matching noise), so the seed is a parameter: the same text, voice and seed give
the same audio; a designed voice varies from seed to seed.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    @classmethod
    def from_request(cls, data: dict, voice: dict, seed: int) -> VoxCPMParams:
        """`voice`: {"builtin": id} or a cloned voice's row ({"sample", "sample_text"});
        `instructions`, when sent, design the voice instead (or steer the clone's style)."""
        instructions = (data.get("instructions") or "").strip()
        builtin = voice.get("builtin")
        return cls(
            design=instructions or (VOICES[builtin] if builtin else ""),
            reference="" if builtin else voice.get("sample", ""),
            reference_text="" if builtin else voice.get("sample_text", ""),
            seed=seed,
            cfg_value=float(data.get("cfg_value", CFG_VALUE)),
            inference_timesteps=int(data.get("inference_timesteps", INFERENCE_TIMESTEPS)),
            speed=float(data.get("speed", 1.0)),
        )

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
