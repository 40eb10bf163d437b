"""A speech request made concrete, before anything is reserved: the model found and allowed, the
plan's limits checked, the text checked for the model and split, every generation parameter fixed
(`PreparedSpeech`); and the answer when the audio cache already holds it (`CachedSpeech`)."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from accounts.models import Organization
from billing import offer as engines
from billing.limits import Limits
from inference.spec import SAMPLE_RATE, EngineSpec
from inference.text.preparation import MAX_SEGMENT_SECONDS, PreparedText, TextError, estimate_seconds
from inference.text.ssml import SsmlError, is_ssml
from inference.text.ssml_text import finish
from synthesis.audio import cache
from synthesis.audio.captions import Caption
from synthesis.audio.formats import output_format
from synthesis.service.styled import ssml_error, styled
from tts_saas.errors import ApiError
from voices.catalog import resolve_voice
from voices.lexicons import matcher_for

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreparedSpeech:
    data: dict  # the validated request body (its `model` is the engine's name)
    spec: EngineSpec  # the engine that speaks it
    text: PreparedText
    params: Any  # the engine's row parameters (spec.params)
    seed: int  # the seed sent or drawn (x-seed); an engine without seeds ignores it
    cacheable: bool  # deterministic (seeded, or an engine without seeds): its audio may be cached
    characters: int  # billed: the input's characters times the plan's weight for the model (0 if free)
    # The segments as sent, where lexicons changed what is spoken (captions show these); else empty.
    caption_texts: tuple[str, ...] = ()
    free: bool = False  # a voice's preview: generated and cached like any request, billed nothing
    zero_retention: bool = False  # nothing of its text or audio is kept once it is answered
    # SSML: how each segment is said (`styled`: pauses, marks, another voice's parameters...); else empty.
    styles: tuple[dict, ...] = ()

    @property
    def cache_text(self) -> str:
        return cache.segments_text(self.text.segments, self.styles)

    @property
    def shown_texts(self) -> tuple[str, ...]:
        """The segments as this request's captions show them (identical requests may share audio
        made for another's text: their captions still show their own)."""
        return self.caption_texts or self.text.segments


@dataclass(frozen=True)
class CachedSpeech:
    """A speech request answered from the audio cache (a miss is a live `JobAudioFeed` instead)."""

    pcm16: bytes
    seed: int
    captions: list[Caption] = field(default_factory=list)
    characters: int = 0  # billed
    rate: int = SAMPLE_RATE  # of `pcm16` (the model's)


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
    """Refuse what the organization's plan does not include: the model, input length (per request,
    or per asynchronous `job`), format, voice."""
    spec = engines.spec_for(data["model"])
    engines.check_allowed(limits, spec)
    most, what = (limits.max_job_chars, "job") if job else (limits.max_input_chars, "request")
    # The whole input counts here, SSML's markup included; billing counts the characters spoken.
    if len(data["input"]) > most:
        hint = " Longer texts go to POST /v1/jobs." if not job and limits.max_job_chars > most else ""
        raise ApiError(
            400,
            f"Input is {len(data['input'])} characters; your plan allows {most} per {what}.{hint}",
            "string_above_max_length",
            "input",
        )
    check_format(limits, data["response_format"], "response_format")
    engines.check_voice_allowed(limits, spec, data["voice"])


def prepare_speech(
    data: dict, organization, limits: Limits, cacheable: bool = True, free: bool = False
) -> PreparedSpeech:
    """Check the text for the model, split it, apply the organization's pronunciation lexicons to
    each segment and fix every generation parameter (database and CPU work: call in a thread)."""
    spec = engines.spec_for(data["model"])
    zero = zero_retention(organization, bool(data.get("zero_retention")))
    ssml = is_ssml(data["input"], data.get("input_format"))
    try:
        text = spec.prepare(data["input"], ssml=ssml)
    except SsmlError as exc:
        raise ssml_error(exc) from exc
    except TextError as exc:
        raise ApiError(400, str(exc), "invalid_input", "input") from exc
    matcher = matcher_for(
        organization,
        data.get("lexicons", []),
        phonemes=spec.features.phoneme_lexicons,
        defaults=data.get("default_lexicons", True),
    )
    if ssml:  # the lexicons apply outside say-as, sub and phoneme (which win); marks leave the text
        text = finish(text, matcher.apply)
    spoken = text.segments if ssml else tuple(matcher.apply(segment) for segment in text.segments)
    for i, segment in enumerate(spoken):
        if estimate_seconds(segment) > 2 * MAX_SEGMENT_SECONDS and ssml:  # say-as, sub: what a span says
            raise ApiError(
                400,
                f"Invalid SSML: sentence {i + 1} says too much to speak as one ({len(segment)} characters once "
                "say-as, sub and the lexicons are applied); cut it with <s> or <break>.",
                "invalid_ssml",
                "input",
            )
        if estimate_seconds(segment) > 2 * MAX_SEGMENT_SECONDS:  # aliases must not blow a sentence up
            raise ApiError(
                400,
                f"The lexicons' aliases make sentence {i + 1} too long to speak ({len(segment)} characters "
                f"from {len(text.segments[i])}); use shorter aliases.",
                "invalid_value",
                "lexicons",
            )
    if ssml:
        shown = text.shown if text.shown != text.segments else ()
    elif spoken != text.segments:
        text, shown = PreparedText(text=text.text, segments=spoken, continued=text.continued), text.segments
    else:
        shown = ()
    seed = data.get("seed")
    if seed is None and settings.TTS_DEFAULT_SEED != "":
        seed = int(settings.TTS_DEFAULT_SEED)
    cacheable = cacheable and not zero and (seed is not None or spec.deterministic)
    if seed is None:
        seed = secrets.randbelow(2**31)
    voice = resolve_voice(organization, data["voice"], spec)
    params = spec.params.from_request(data, voice, seed)
    # Billed: the characters spoken (SSML's text, not its markup; a break costs nothing).
    said = text.spoken_chars if ssml else len(data["input"])
    characters = 0 if free else limits.billed_characters(spec.name, said or 0)
    return PreparedSpeech(
        data=data,
        spec=spec,
        text=text,
        params=params,
        seed=seed,
        cacheable=cacheable,
        characters=characters,
        caption_texts=shown,
        free=free,
        zero_retention=zero,
        styles=styled(data, organization, limits, spec, text, params, seed) if ssml else (),
    )


def zero_retention(organization, asked: bool) -> bool:
    """Whether a request keeps nothing: always where the organization requires it, on request where
    it allows it; asking where it does not is a 403 (the request would otherwise be kept)."""
    retention = organization.data_retention
    if retention not in Organization.Retention.values:  # a value no API takes: keep nothing, tell the operator
        logger.error("invalid data retention %r: treated as zero", retention, extra={"org_id": organization.pk})
        return True
    if retention == Organization.Retention.ZERO:
        return True
    if asked and retention != Organization.Retention.OPTIONAL:
        raise ApiError(
            403,
            "Your organization does not allow zero retention per request: an owner or admin can allow it "
            "(PUT /v1/organization/data_retention).",
            "zero_retention_not_allowed",
            "zero_retention",
        )
    return asked
