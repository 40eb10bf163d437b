"""The SSML subset this service takes: its elements and attributes, and what prosody's words mean
(rates, pitches, volumes, emphasis, break strengths), with what each element does on a model, for
`/v1/models` and the docs (`describe`). Pure Python."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

SSML_NS = "{http://www.w3.org/2001/10/synthesis}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
BREAK_STRENGTHS = {"none": 0, "x-weak": 100, "weak": 250, "medium": 500, "strong": 750, "x-strong": 1000}
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
PITCHES = {"x-low": -4.0, "low": -2.0, "medium": 0.0, "default": 0.0, "high": 2.0, "x-high": 4.0}  # semitones
VOLUMES = {
    "silent": -math.inf,
    "x-soft": -10.0,
    "soft": -5.0,
    "medium": 0.0,
    "default": 0.0,
    "loud": 4.0,
    "x-loud": 8.0,
}
# emphasis as the prosody of its span: (rate factor, decibels)
EMPHASIS = {"strong": (0.9, 3.0), "moderate": (0.95, 1.5), "none": (1.0, 0.0), "reduced": (1.1, -3.0)}


@dataclass(frozen=True)
class Style:
    """How a span is said: another voice ("" the request's), a rate (times the request's speed),
    volume (dB; -inf silent), pitch (semitones) and language ("" the text's own)."""

    voice: str = ""
    rate: float = 1.0
    volume_db: float = 0.0
    pitch: float = 0.0
    lang: str = ""


ATTRIBUTES = {
    "speak": {"version", XML_LANG},
    "p": {XML_LANG},
    "s": {XML_LANG},
    "break": {"time", "strength"},
    "say-as": {"interpret-as", "format"},
    "sub": {"alias"},
    "phoneme": {"alphabet", "ph"},
    "prosody": {"rate", "pitch", "volume"},
    "emphasis": {"level"},
    "lang": {XML_LANG},
    "voice": {"name"},
    "mark": {"name"},
}


def _percent_or_number(value: str) -> float | None:
    match = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)(%)?", value)
    if not match:
        return None
    number = float(match.group(1))
    if match.group(2):
        return 1 + number / 100 if value[0] in "+-" else number / 100
    return number


def prosody(style: Style, attr: str, value: str) -> Style:
    if attr == "rate":
        factor = RATES.get(value) if value in RATES else _percent_or_number(value)
        if factor is None or not 0.2 <= factor <= 4.0:
            raise ValueError(f"prosody rate '{value}' is not x-slow…x-fast or a percentage from 20% to 400%.")
        return replace(style, rate=style.rate * factor)
    if attr == "volume":
        if value in VOLUMES:
            return replace(style, volume_db=style.volume_db + VOLUMES[value])
        match = re.fullmatch(r"([+-]?\d+(?:\.\d+)?)dB", value)
        if not match or abs(float(match.group(1))) > 20:
            raise ValueError(f"prosody volume '{value}' is not silent, x-soft…x-loud or +/-N dB (up to 20dB).")
        return replace(style, volume_db=style.volume_db + float(match.group(1)))
    if value in PITCHES:
        return replace(style, pitch=style.pitch + PITCHES[value])
    if value.endswith("Hz"):
        raise ValueError(
            f"prosody pitch '{value}' in Hz is not supported: give semitones (+2st) or a percentage (+10%)."
        )
    match = re.fullmatch(r"([+-]\d+(?:\.\d+)?)st", value)
    semitones = float(match.group(1)) if match else None
    if semitones is None and re.fullmatch(r"[+-]\d+(?:\.\d+)?%", value) and float(value[:-1]) > -100:
        semitones = 12 * math.log2(1 + float(value[:-1]) / 100)
    if semitones is None or abs(style.pitch + semitones) > 12:
        raise ValueError(f"prosody pitch '{value}' is not x-low…x-high, +/-N st or +/-N% (within an octave).")
    return replace(style, pitch=style.pitch + semitones)


def describe(model: str, phonemes: bool, word_timings: bool, languages: tuple[str, ...]) -> dict[str, str]:
    """What each element does on a model (`/v1/models`' `ssml`, the docs)."""
    return {
        "speak": "The root (optional with input_format ssml); its xml:lang must be a language the model speaks.",
        "p": f"A paragraph: its own segment, {400 / 1000:g} s of silence before it.",
        "s": "A sentence: its own segment.",
        "break": "Silence of its time (ms or s, up to 10 s; 120 s in all) or strength (none 0, x-weak 0.1 s, weak "
        "0.25 s, medium 0.5 s, strong 0.75 s, x-strong 1 s). Billed nothing; counted in every timing.",
        "say-as": "interpret-as characters, spell-out, cardinal, number, ordinal, digits, telephone, date (format mdy, "
        "dmy, ymd, md, dm, ym, my, y, m, d), time or currency: said in words in the span's language.",
        "sub": "Its alias is read (and billed) in place of its text; captions show the text.",
        "phoneme": "alphabet ipa: the phonemes are read as given (Kokoro's symbols, e.g. kˈOkəɹO)."
        if phonemes
        else f"Model '{model}' reads text, not phonemes: the word inside is read as written (ph is not used); "
        "an empty phoneme is refused.",
        "prosody": "rate (x-slow 0.5, slow 0.75, medium, fast 1.25, x-fast 1.5, or 20%-400%) through the model's "
        "speed; volume (silent, x-soft -10 dB, soft -5, medium, loud +4, x-loud +8, or +/-N dB up to 20) and pitch "
        "(x-low -4, low -2, medium, high +2, x-high +4 semitones, +/-N st or +/-N %, within an octave) applied to its "
        "audio. Its span is a segment of its own.",
        "emphasis": "As prosody: strong 0.9x rate and +3 dB, moderate (default) 0.95x and +1.5 dB, reduced 1.1x and "
        "-3 dB, none unchanged.",
        "lang": f"A span in another language the model speaks ({', '.join(languages)})"
        + (", read with that language's phonemes." if phonemes else "."),
        "voice": "name: another voice of this model (built in or the organization's) for its span, a segment of "
        "its own.",
        "mark": "A named point, timed at the next word's start (captions' marks)."
        if word_timings
        else "A named point: exact at a segment's edge (sentence, break, span), else placed by its characters and "
        "marked approximate (the model gives no word timings).",
    }
