"""ElevenLabs' shapes of this service's things (`synthesis.api.elevenlabs` serves them): its error
body, character alignments from the captions' timings, and its voice, model and subscription
objects. Nothing here speaks or authorizes; each function turns our values into theirs."""

from __future__ import annotations

from django.http import JsonResponse

from billing.usage import MonthSummary
from inference.spec import EngineSpec
from synthesis.audio.captions import Caption
from tts_saas.errors import elevenlabs_body


def error(status: int, code: str | None, message: str, headers: dict[str, str] | None = None) -> JsonResponse:
    """ElevenLabs' error body, `{"detail": {"status": …, "message": …}}`."""
    response = JsonResponse(elevenlabs_body(code, message), status=status, json_dumps_params={"ensure_ascii": False})
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def alignment(captions: list[Caption], after: Caption | None = None) -> dict | None:
    """ElevenLabs' `alignment`: every character of the captions' texts (the request's text, one space
    between sentences) with its start and end in seconds from the audio's start. A word's characters
    share its timing (Kokoro's durations); the characters between words take the gap; a sentence
    without word timings (ChatTTS, VoxCPM2) spreads its characters over its own span. `after`: the
    sentence before these (a stream's): the space between them comes first. None without captions."""
    chars: list[str] = []
    starts: list[float] = []
    ends: list[float] = []

    def spread(text: str, start: float, end: float) -> None:
        step = (end - start) / len(text) if text else 0.0
        for i, char in enumerate(text):
            chars.append(char)
            starts.append(round(start + i * step, 3))
            ends.append(round(start + (i + 1) * step, 3))

    if not captions:
        return None
    for n, caption in enumerate(captions):
        before = captions[n - 1] if n else after
        if before is not None:
            spread(" ", before.end, caption.start)
        if not caption.words:
            spread(caption.text, caption.start, caption.end)
            continue
        text, at, before = caption.text, 0, caption.start
        for word in caption.words:
            found = text.lower().find(word.text.lower(), at) if word.text else -1
            if found < 0:
                continue  # a word the engine spelled otherwise: its characters take the gap around it
            spread(text[at:found], before, word.start)
            spread(text[found : found + len(word.text)], word.start, word.end)
            at, before = found + len(word.text), word.end
        spread(text[at:], before, caption.end)
    return {"characters": chars, "character_start_times_seconds": starts, "character_end_times_seconds": ends}


def voice(voice_id: str, name: str, category: str, spec: EngineSpec, description: str, language: str = "") -> dict:
    """A voice as ElevenLabs lists it: premade (built in) or cloned/generated (the organization's)."""
    labels = {"model": spec.name, **({"language": language} if language else {})}
    return {
        "voice_id": voice_id,
        "name": name,
        "category": category,
        "description": description,
        "labels": labels,
        "preview_url": f"/v1/audio/voices/{voice_id}/preview?model={spec.name}",
        "available_for_tiers": [],
        "settings": None,
        "high_quality_base_model_ids": [spec.name],
        "verified_languages": [{"language": lang, "model_id": spec.name} for lang in spec.languages],
    }


def model(spec: EngineSpec, weight: float) -> dict:
    """A served model as ElevenLabs' `GET /v1/models` lists one."""
    licence = "its audio may be sold" if spec.commercial else "non-commercial"
    return {
        "model_id": spec.name,
        "name": spec.title,
        "description": f"{spec.description} Licence: {licence}.",
        "can_be_finetuned": False,
        "can_do_text_to_speech": True,
        "can_do_voice_conversion": False,
        "can_use_style": False,
        "can_use_speaker_boost": False,
        "serves_pro_voices": False,
        "token_cost_factor": weight,
        "requires_alpha_access": False,
        "max_characters_request_free_user": None,
        "max_characters_request_subscribed_user": None,
        "maximum_text_length_per_request": None,
        "languages": [{"language_id": lang, "name": lang} for lang in spec.languages],
        "concurrency_group": "standard",
    }


def subscription(month: MonthSummary, own_voices: int) -> dict:
    """This month's characters and limits in ElevenLabs' `GET /v1/user/subscription` shape."""
    limits = month.limits
    return {
        "tier": limits.plan,
        "character_count": month.used,
        "character_limit": limits.monthly_characters,
        "max_character_limit_extension": None,
        "max_credit_limit_extension": 0,
        "can_extend_character_limit": limits.has_overage,
        "allowed_to_extend_character_limit": limits.has_overage,
        "next_character_count_reset_unix": int(month.resets_at.timestamp()),
        "voice_slots_used": own_voices,
        "professional_voice_slots_used": 0,
        "professional_voice_slots_used_in_workspace": 0,
        "voice_limit": limits.max_custom_voices,
        "max_voice_add_edits": None,
        "voice_add_edit_counter": 0,
        "professional_voice_limit": 0,
        "can_extend_voice_limit": False,
        "can_use_instant_voice_cloning": limits.max_cloned_voices > 0,
        "can_use_professional_voice_cloning": False,
        "currency": "usd",
        "status": "active" if month.billing_status in ("", "none", "active", "trialing") else month.billing_status,
        "billing_period": "monthly_period",
        "character_refresh_period": "monthly_period",
        "current_overage": {"amount": "0", "currency": "usd"},
        "open_invoices": [],
        "has_open_invoices": False,
    }
