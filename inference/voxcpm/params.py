"""A VoxCPM2 row's parameters, and how a speech request's fields become them (pure Python).

A VoxCPM2 voice here is a voice *design*: a description the model reads before the text, in its
own form `"(description)text"` (a young woman, warm, a little fast...). A built-in voice is one
fixed description; a request's `instructions` replace it (OpenAI's `gpt-4o-mini-tts` field: the
model follows them). The model samples (flow-matching noise), so the seed is a parameter: the same
text, voice and seed give the same audio; a designed voice varies from seed to seed.
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

    @classmethod
    def from_request(cls, data: dict, voice: dict, seed: int) -> VoxCPMParams:
        """`voice`: {"builtin": id}; `instructions`, when sent, design the voice instead."""
        design = (data.get("instructions") or "").strip() or VOICES[voice["builtin"]]
        return cls(
            design=design,
            seed=seed,
            cfg_value=float(data.get("cfg_value", CFG_VALUE)),
            inference_timesteps=int(data.get("inference_timesteps", INFERENCE_TIMESTEPS)),
            speed=float(data.get("speed", 1.0)),
        )

    def prompt(self, text: str) -> str:
        """What the model reads: the design in parentheses, then the text."""
        design = self.design.replace("(", "").replace(")", "")
        return f"({design}){text}" if design else text
