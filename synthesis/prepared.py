"""A speech request made concrete, before anything is reserved: the plan's limits checked, the
text normalised and split, every generation parameter fixed (`PreparedSpeech`); and the answer
when the audio cache already holds it (`CachedSpeech`)."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field

from django.conf import settings

from billing.limits import Limits
from inference.engine import SynthesisParams
from inference.text import MAX_SEGMENT_SECONDS, PreparedText, TextError, estimate_seconds, prepare
from inference.voices import VOICES
from tts_saas.errors import ApiError

from . import cache
from .audio import output_format
from .captions import Caption
from .custom_voices import resolve_voice
from .lexicons import matcher_for


def speed_level(speed: float) -> int:
    """OpenAI's speed (0.25–4.0, 1.0 normal) onto ChatTTS's [speed_0..9] (5 normal), log-scaled."""
    return max(0, min(9, round(5 + 2 * math.log2(speed))))


@dataclass(frozen=True)
class PreparedSpeech:
    data: dict  # the validated request body
    text: PreparedText
    params: SynthesisParams
    cacheable: bool  # deterministic (seeded), so its audio may be cached and reused
    # The segments as sent, where lexicons changed what is spoken (captions show these); else empty.
    caption_texts: tuple[str, ...] = ()
    free: bool = False  # a voice's preview: generated and cached like any request, billed nothing

    @property
    def cache_text(self) -> str:
        return cache.segments_text(self.text.segments)

    @property
    def shown_texts(self) -> tuple[str, ...]:
        """The segments as this request's captions show them (identical requests may share audio
        made for another's text: their captions still show their own)."""
        return self.caption_texts or self.text.segments

    @property
    def characters(self) -> int:
        """The characters billed."""
        return 0 if self.free else len(self.data["input"])


@dataclass(frozen=True)
class CachedSpeech:
    """A speech request answered from the audio cache (a miss is a live `JobAudioFeed` instead)."""

    pcm16: bytes
    seed: int
    captions: list[Caption] = field(default_factory=list)


def check_format(limits: Limits, fmt: str, param: str) -> None:
    """A plan's formats name codecs (mp3, opus, aac, flac, wav, pcm, ulaw, alaw): each admits all
    its sample rates and bit rates."""
    if limits.allowed_formats and output_format(fmt).codec not in limits.allowed_formats:
        raise ApiError(
            403,
            f"{param} '{fmt}' is not in your plan; available: {', '.join(limits.allowed_formats)}.",
            "not_in_plan",
            param,
        )


def enforce_plan_limits(limits: Limits, data: dict, job: bool = False) -> None:
    """Refuse what the organization's plan does not include: input length (per request, or per
    asynchronous `job`), format, voice."""
    most, what = (limits.max_job_chars, "job") if job else (limits.max_input_chars, "request")
    if len(data["input"]) > most:
        hint = " Longer texts go to POST /v1/jobs." if not job and limits.max_job_chars > most else ""
        raise ApiError(
            400,
            f"Input is {len(data['input'])} characters; your plan allows {most} per {what}.{hint}",
            "string_above_max_length",
            "input",
        )
    check_format(limits, data["response_format"], "response_format")
    if limits.allowed_voices and data["voice"] in VOICES and data["voice"] not in limits.allowed_voices:
        raise ApiError(
            403,
            f"Voice '{data['voice']}' is not in your plan; available: {', '.join(limits.allowed_voices)}.",
            "not_in_plan",
            "voice",
        )


def prepare_speech(data: dict, organization, cacheable: bool = True, free: bool = False) -> PreparedSpeech:
    """Split the text, apply the organization's pronunciation lexicons to each segment and fix
    every generation parameter (database and CPU work: call in a thread)."""
    try:
        text = prepare(data["input"])
    except TextError as exc:
        raise ApiError(400, str(exc), "invalid_input", "input") from exc
    matcher = matcher_for(organization, data.get("lexicons", []))
    spoken = tuple(matcher.apply(segment) for segment in text.segments)
    for i, segment in enumerate(spoken):
        if estimate_seconds(segment) > 2 * MAX_SEGMENT_SECONDS:  # aliases must not blow a sentence up
            raise ApiError(
                400,
                f"The lexicons' aliases make sentence {i + 1} too long to speak ({len(segment)} characters "
                f"from {len(text.segments[i])}); use shorter aliases.",
                "invalid_value",
                "lexicons",
            )
    if spoken != text.segments:
        text, shown = PreparedText(text=text.text, segments=spoken), text.segments
    else:
        shown = ()
    seed = data.get("seed")
    if seed is None and settings.TTS_DEFAULT_SEED != "":
        seed = int(settings.TTS_DEFAULT_SEED)
    cacheable = cacheable and seed is not None
    if seed is None:
        seed = secrets.randbelow(2**31)
    voice = resolve_voice(organization, data["voice"])
    params = SynthesisParams(
        voice_seed=voice.voice_seed,
        speaker=voice.speaker,
        sample=voice.sample,
        sample_text=voice.sample_text,
        seed=seed,
        temperature=data["temperature"],
        top_p=data["top_p"],
        top_k=data["top_k"],
        speed=speed_level(data["speed"]),
        refine_text=data["refine_text"],
        refine_prompt=data["refine_prompt"],
    )
    return PreparedSpeech(data=data, text=text, params=params, cacheable=cacheable, caption_texts=shown, free=free)
