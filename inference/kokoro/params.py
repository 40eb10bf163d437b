"""A Kokoro row's parameters, and how a speech request's fields become them (pure Python).

Kokoro is deterministic: the same text, voice and speed give the same audio, so the seed is not a
parameter (a request's seed is accepted and changes nothing) and every request is cacheable.
"""

from __future__ import annotations

from dataclasses import dataclass

from .languages import LANGUAGES, kokoro_language, voice_language


@dataclass(frozen=True)
class KokoroParams:
    # The voice: built-in voices with weights that sum to 1 (one voice: weight 1.0). Kokoro's voices
    # are style vectors; a mix is their weighted sum.
    voice: tuple[tuple[str, float], ...]
    speed: float = 1.0  # OpenAI's 0.25-4.0, Kokoro's own duration scale
    english: str = "en-us"  # how English words are read: "en-us" or "en-gb" (the voice's accent)
    # The G2P language of the row (one of languages.LANGUAGES): "" is the voice's (its id's letter);
    # a request's `lang` (SSML's xml:lang) sets it. Latin-script text is read in it.
    language: str = ""
    spell_out: bool = True  # numbers, dates and symbols read out (a request's text_normalization "off": False)

    def __post_init__(self):
        # Read back from a job's JSON the mix is lists: keep it a tuple of pairs (hashable, comparable).
        object.__setattr__(self, "voice", tuple((str(v), float(w)) for v, w in self.voice))
        if self.language and self.language not in LANGUAGES:
            raise ValueError(f"language must be one of {LANGUAGES} or empty, not {self.language!r}")

    @property
    def reading(self) -> str:
        """The language the row is read in: its own, else its heaviest voice's."""
        return self.language or voice_language(self.voice, self.english)

    @classmethod
    def from_request(cls, data: dict, voice: dict, seed: int) -> KokoroParams:
        """`voice`: {"builtin": id} or an organization's mix {"mix": [[id, weight], ...]}. `data`'s
        optional `lang` (an xml:lang tag) sets the row's language; ValueError when Kokoro does not
        speak it."""
        if "builtin" in voice:
            mix: tuple[tuple[str, float], ...] = ((voice["builtin"], 1.0),)
        else:
            total = sum(float(w) for _, w in voice["mix"])
            mix = tuple((str(v), round(float(w) / total, 6)) for v, w in voice["mix"])
        english = accent(mix)
        language = kokoro_language(data.get("lang"), english) or ""
        if language in ("en-us", "en-gb"):
            english = language  # an English span of a request reads English with its accent
        if language == voice_language(mix, english):
            language = ""  # the voice's own: the same parameters (and cache key) as without `lang`
        return cls(
            voice=mix,
            speed=float(data.get("speed", 1.0)),
            english=english,
            language=language,
            spell_out=data.get("text_normalization", "auto") != "off",
        )


def accent(mix: tuple[tuple[str, float], ...]) -> str:
    """British English when the heaviest English voice of the mix is British (`b…`), else American."""
    english = [(w, v) for v, w in mix if v[:1] in ("a", "b")]
    return "en-gb" if english and max(english)[1].startswith("b") else "en-us"
