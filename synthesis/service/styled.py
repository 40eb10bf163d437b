"""SSML's spans said another way, made concrete for the worker: each segment's style
(`inference.text.ssml_text.SegmentStyle`) with, where it speaks with another voice, rate or language,
the engine's row parameters for it (`params`), fixed here as the request's are (its voice resolved
for the organization and allowed by its plan, its speed in the model's range)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from billing import offer as engines
from billing.limits import Limits
from inference.spec import EngineSpec
from inference.text.preparation import PreparedText
from inference.text.ssml import SsmlError
from tts_saas.errors import ApiError
from voices.catalog import resolve_voice

MIN_SPEED, MAX_SPEED = 0.25, 4.0  # OpenAI's speed range: what every engine's parameters take


def ssml_error(exc: SsmlError) -> ApiError:
    return ApiError(400, str(exc), "invalid_ssml", "input")


def styled(
    data: dict, organization, limits: Limits, spec: EngineSpec, text: PreparedText, params: Any, seed: int
) -> tuple[dict, ...]:
    """One dict per segment (`SegmentStyle.as_dict()`, plus `params` where the segment's row
    parameters differ from the request's); () for a text without styles."""
    if not text.styles:
        return ()
    made: dict[tuple, dict | None] = {}
    out = []
    for style in text.styles:
        key = (style.voice, style.rate, style.lang)
        if key not in made:
            made[key] = _params(data, organization, limits, spec, text, style, params, seed)
        body = style.as_dict()
        if made[key] is not None:
            body["params"] = made[key]
        out.append(body)
    return tuple(out)


def _params(
    data: dict, organization, limits: Limits, spec: EngineSpec, text: PreparedText, style, params: Any, seed: int
) -> dict | None:
    if not style.voice and style.rate == 1.0 and not style.lang:
        return None
    speed = float(data.get("speed", 1.0)) * style.rate
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ssml_error(
            SsmlError(
                f"prosody rate ×{style.rate:g} at speed {data.get('speed', 1.0)} makes {speed:g}, outside "
                f"{MIN_SPEED}–{MAX_SPEED}."
            )
        )
    voice_name = style.voice or data["voice"]
    try:
        engines.check_voice_allowed(limits, spec, voice_name)
        voice = resolve_voice(organization, voice_name, spec)
    except ApiError as exc:
        place = next(((line, column) for name, line, column in text.voice_places if name == voice_name), (None, None))
        said = str(SsmlError(f'<voice name="{voice_name}">: {exc.message}', *place))
        code = "invalid_ssml" if exc.status == 400 else exc.code  # a plan's 403, a voice still encoding's 409
        raise ApiError(exc.status, said, code, "input") from exc
    body = {**data, "speed": speed, "voice": voice_name}
    if style.lang:
        body["lang"] = style.lang
    try:
        made = asdict(spec.params.from_request(body, voice, seed))
    except ValueError as exc:  # a language the engine's parameters refuse (Kokoro's G2P languages)
        raise ssml_error(SsmlError(str(exc))) from exc
    return None if made == asdict(params) else made
