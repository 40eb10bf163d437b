"""The deployment's default model (what OpenAI's names, `tts-1` and the rest, and a request without
`model` speak with, and what the dashboard's playground and snippets use): the operator's
TTS_DEFAULT_MODEL where set, else the first served model whose audio may be sold, so listing
ChatTTS (CC BY-NC weights) first does not make a billing deployment speak it by default."""

from __future__ import annotations

import json

from billing import offer
from synthesis.api import protocol


def test_unset_the_default_is_the_first_model_whose_audio_may_be_sold(settings):
    settings.TTS_ENGINES, settings.TTS_DEFAULT_MODEL = ["chattts", "kokoro"], ""
    assert offer.default_spec().name == "kokoro"
    for alias in ("", "tts-1", "tts-1-hd", "gpt-4o-mini-tts", "gpt-4o-mini-tts-2025-12-15"):
        assert offer.spec_for(alias).name == "kokoro", alias
    assert offer.spec_for("chattts").name == "chattts"  # named: served as asked
    assert protocol.parse(json.dumps({"type": "synthesize", "text": "Hi."})).speech["model"] == "kokoro"


def test_the_operators_choice_stands_and_with_no_commercial_model_the_first_is_the_default(settings):
    settings.TTS_ENGINES, settings.TTS_DEFAULT_MODEL = ["chattts", "kokoro"], "chattts"
    assert offer.spec_for("tts-1").name == "chattts"  # chosen by the operator, by name
    settings.TTS_ENGINES, settings.TTS_DEFAULT_MODEL = ["chattts"], ""
    assert offer.default_spec().name == "chattts"  # nothing else is served
    settings.TTS_ENGINES, settings.TTS_DEFAULT_MODEL = ["voxcpm", "kokoro"], ""
    assert offer.default_spec().name == "voxcpm"  # both may be sold: the first listed
