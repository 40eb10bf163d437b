"""Text preparation every engine shares: control tags, languages, sentence splitting, spelling out.

Two steps, in two places. `prepare` (the web process, on every request) validates the text for the
model it goes to — its inline tags, its languages — and splits it at sentence boundaries into
segments (rather than ChatTTS's own `split_text`, which mutates the caller's parameters).
`normalize` (the synthesis worker, per segment) spells out numbers, dates, currencies and symbols
with WeTextProcessing's Chinese and English grammars, since ChatTTS silently deletes what it cannot
pronounce ("价格是100元" becomes "价格是元") and Kokoro should read them the same way. The grammars
take ~2 s and ~90 MB to load, once per process: only the workers load them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import threading
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from . import english
from .scripts import refusal, written_in

T = TypeVar("T")

# Anything written like a tag: a bracketed word. An engine names the inline tags it takes
# (`EngineSpec.inline_tags`); ChatTTS's tokenizer knows more special tokens than those ([Stts],
# [Ptts], [spk_emb], ...): they steer the model and must never come from a user, so every tag-like
# word not exactly (case and all) one of the engine's is refused. "[1]" or "[see below]" are not
# tags and stay text; neither is a phoneme link `[word](/phonemes/)` (`PHONEME_LINK`).
TAG = re.compile(r"\[[A-Za-z][A-Za-z0-9_-]*\](?!\(/)")
# misaki's way of giving a word's phonemes: `[Kokoro](/kˈOkəɹO/)` (engines with phoneme lexicons).
PHONEME_LINK = re.compile(r"\[([^\[\]]{1,100})\]\(/([^/()]{1,200})/\)")
CJK = re.compile(r"[\u3400-\u9fff]")
# Sentence ends: Chinese ones always; Latin ones when followed by space or the end.
SENTENCE_END = re.compile(r"(?<=[。！？；…!?;])|(?<=\.)(?=\s|$)|\n+")
CLAUSE_END = re.compile(r"(?<=[，、：,:])")
# A full stop that ends no sentence: after a title or an initial ("Dr. Smith", "J. Smith"), or
# before a lowercase word or a digit ("Elm St. near", "at 9 a.m. tomorrow", "e.g. a brush"). Cut
# there, a sentence was spoken as two utterances, and "St." alone could not tell Street from Saint.
TITLE_OR_INITIAL = re.compile(
    r"(?:^|[\s(])(?:Mr|Mrs|Ms|Mx|Dr|Prof|St|Mt|Ft|Sr|Jr|Rev|Gen|Col|Capt|Lt|Sgt|Gov|Sen|Rep|Hon|Fr|vs|[A-Z])\.$"
)

# A segment is at most this many seconds of estimated speech, so that its token budget stays
# well inside one generation.
MAX_SEGMENT_SECONDS = 12.0
# Estimated speaking time per character (generous: budgets are an upper bound, not a target).
SECONDS_PER_CJK_CHAR = 0.32
SECONDS_PER_OTHER_CHAR = 0.085


class TextError(ValueError):
    """Input that cannot be synthesised; the message is shown to the user."""


def _folded(text: str) -> str:
    """`text` as normalisation or the tokenizer may come to read it: compatibility forms folded
    (full-width "［Ｐtts］" is "[Ptts]") and invisible format characters (zero-width spaces) gone."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", text) if unicodedata.category(ch) != "Cf")


def unknown_tags(text: str, allowed: frozenset[str]) -> list[str]:
    found = set(TAG.findall(text)) | set(TAG.findall(_folded(text)))
    return sorted(t for t in found if t not in allowed)


def refuse_unknown_tags(text: str, allowed: frozenset[str], model: str) -> None:
    bad = unknown_tags(text, allowed)
    if bad and not allowed:
        raise TextError(f"Inline tags ({', '.join(bad)}) are not supported by model '{model}'; remove them.")
    if bad:
        raise TextError(
            f"Unknown control tag(s) {', '.join(bad)}; allowed (case-sensitive): {', '.join(sorted(allowed))}."
        )


def languages(text: str) -> set[str]:
    """The languages `text` is written in, by script (tags and phoneme links left out)."""
    return written_in(PHONEME_LINK.sub(r"\1", TAG.sub("", text)))


def refuse_other_languages(text: str, spoken: tuple[str, ...], model: str) -> None:
    problem = refusal(languages(text), spoken, model)
    if problem:
        raise TextError(problem)


def normalizer_version() -> str:
    """Part of the model version (what a cached audio depends on): the grammars that spell out, and
    our English rules around them."""
    try:
        return f"wetext-{importlib.metadata.version('WeTextProcessing')}+{english.VERSION}"
    except importlib.metadata.PackageNotFoundError:
        return f"wetext-unknown+{english.VERSION}"


_normalizers: dict[str, object] = {}
_lock = threading.Lock()


def _normalizer(lang: str):
    with _lock:
        if lang not in _normalizers:
            if lang == "zh":
                from tn.chinese.normalizer import Normalizer  # noqa: PLC0415  (grammars load on first use)
            else:
                from tn.english.normalizer import Normalizer  # noqa: PLC0415  (grammars load on first use)
            _normalizers[lang] = Normalizer(overwrite_cache=False)
        return _normalizers[lang]


def preload() -> None:
    for lang in ("zh", "en"):
        _normalizer(lang)


def detect_language(text: str) -> str:
    return "zh" if CJK.search(text) else "en"


def normalize(text: str) -> str:
    """Spell out numbers, dates, currencies and symbols; keep inline control tags as they are."""
    parts = TAG.split(text)
    tags = TAG.findall(text)
    out: list[str] = []
    for i, part in enumerate(parts):
        if part.strip():
            lang = detect_language(part)
            lead = part[: len(part) - len(part.lstrip())]
            trail = part[len(part.rstrip()) :]
            plain = part.strip()
            if lang == "en":
                spelled = english.after(_normalizer(lang).normalize(english.before(plain)), plain)
            else:
                spelled = _normalizer(lang).normalize(plain)
            part = lead + spelled + trail
        out.append(part)
        if i < len(tags):
            out.append(tags[i])
    return re.sub(r"[ \t]+", " ", "".join(out)).strip()


def estimate_seconds(text: str) -> float:
    plain = TAG.sub("", text)
    cjk = len(CJK.findall(plain))
    other = sum(1 for ch in plain if ch.isalnum()) - cjk
    return cjk * SECONDS_PER_CJK_CHAR + max(other, 0) * SECONDS_PER_OTHER_CHAR


def _hard_split(piece: str) -> list[str]:
    limit_chars = int(MAX_SEGMENT_SECONDS / (SECONDS_PER_CJK_CHAR if CJK.search(piece) else SECONDS_PER_OTHER_CHAR))
    words = piece.split(" ") if not CJK.search(piece) else list(piece)
    joiner = " " if not CJK.search(piece) else ""
    chunks, current = [], ""
    for w in words:
        candidate = f"{current}{joiner}{w}" if current else w
        if len(candidate) > limit_chars and current:
            chunks.append(current)
            current = w
        else:
            current = candidate
    if current:
        chunks.append(current)
    return chunks


def joiner(left: str, right: str) -> str:
    """What goes between two pieces of text put back together: nothing between CJK characters."""
    return "" if CJK.search(right[:1] + left[-1:]) else " "


def _sentence_pieces(sentence: str) -> list[str]:
    """A sentence, cut at clause ends and then between words where it is longer than
    MAX_SEGMENT_SECONDS."""
    if estimate_seconds(sentence) <= MAX_SEGMENT_SECONDS:
        return [sentence]
    pieces: list[str] = []
    for clause in (c.strip() for c in CLAUSE_END.split(sentence) if c.strip()):
        pieces.extend([clause] if estimate_seconds(clause) <= MAX_SEGMENT_SECONDS else _hard_split(clause))
    return pieces


def split_sentences(text: str) -> list[str]:
    """`text`'s sentences: cut at each `SENTENCE_END` but a full stop that ends none (`TITLE_OR_INITIAL`,
    or one a lowercase word or a digit follows)."""
    out, start = [], 0
    for m in SENTENCE_END.finditer(text):
        at = m.start()
        if at == m.end() and text[at - 1 : at] == ".":
            after = text[at:].lstrip()[:1]
            if after.islower() or after.isdigit() or TITLE_OR_INITIAL.search(text[:at]):
                continue
        out.append(text[start:at])
        start = m.end()
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]


def segment_text(text: str, pack: bool = True) -> tuple[list[str], set[int]]:
    """The text's segments, one generation each, and which of them continue the sentence of the one
    before. Sentences longer than MAX_SEGMENT_SECONDS are cut at clause ends, then between words.
    `pack`: sentences are packed into segments of at most MAX_SEGMENT_SECONDS (an engine that
    streams within a segment); else each sentence is a segment of its own (an engine that makes each
    segment whole), its pieces marked as continuing it."""
    sentences = split_sentences(text)
    pieces: list[tuple[str, bool]] = []
    for sentence in sentences:
        parts = _sentence_pieces(sentence)
        pieces += [(part, j > 0) for j, part in enumerate(parts)]
    pieces = [(p, c) for p, c in pieces if TAG.sub("", p).strip()]
    if not pack:
        return [p for p, _ in pieces], {i for i, (_, c) in enumerate(pieces) if c and i}
    segments: list[str] = []
    for piece, _ in pieces:
        if segments and estimate_seconds(segments[-1] + piece) <= MAX_SEGMENT_SECONDS:
            segments[-1] = f"{segments[-1]}{joiner(segments[-1], piece)}{piece}"
        else:
            segments.append(piece)
    return segments, set()


def split_text(text: str) -> list[str]:
    """Split at sentence ends, then pack sentences into segments of at most MAX_SEGMENT_SECONDS;
    a sentence longer than that is cut at clause ends, then between words."""
    return segment_text(text)[0]


@dataclass(frozen=True)
class PreparedText:
    text: str  # as given, spaces tidied: what the cache key and identical-request sharing use
    segments: tuple[str, ...]  # as given; the worker's engine reads each (`Engine.read`)
    continued: frozenset[int] = frozenset()  # segments that continue the sentence of the one before
    # SSML (`inference.text.ssml_text`): how each segment is said (pauses, voice, rate, marks...), the
    # segments as written (captions), the characters spoken (billed), the marks' names.
    styles: tuple = ()
    shown: tuple[str, ...] = ()
    spoken_chars: int | None = None
    mark_names: tuple[str, ...] = ()
    mark_ms: tuple[int, ...] = ()  # per mark: how far it lies from its segment's text, in a pause (ms)
    voice_places: tuple[tuple[str, int, int], ...] = ()  # each <voice name> and its line and column

    def sentences(self, texts: tuple[str, ...] | list[str] | None = None) -> list[str]:
        """`texts` (one per segment; default the segments) put back together per sentence: what
        one caption shows."""
        out: list[str] = []
        for i, text in enumerate(self.segments if texts is None else texts):
            if i in self.continued and out:
                out[-1] = f"{out[-1]}{joiner(out[-1], text)}{text}"
            else:
                out.append(text)
        return out


def has_words(segment: str) -> bool:
    return any(ch.isalnum() for ch in TAG.sub("", segment))


MEMOISED_CHARS = 4096  # texts up to a speech request's size are memoised; a long job's are not kept


def memoised(maxsize: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """A function of a text (its first argument) memoised for texts up to MEMOISED_CHARS: repeated
    texts (greetings, prompts: what the audio cache serves) come back often, while a 200,000-character
    job's text would only fill the memory. `cache_clear` as lru_cache's."""

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(text: str, *args, **kwargs):
            return (cached if len(text) <= MEMOISED_CHARS else fn)(text, *args, **kwargs)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return call

    return wrap


@dataclass(frozen=True)
class Segmenting:
    """How an engine wants its text cut (`segment_text`)."""

    pack: bool = True  # sentences packed into segments of up to MAX_SEGMENT_SECONDS


@memoised(maxsize=4096)
def prepare(
    text: str, tags: frozenset[str], spoken: tuple[str, ...], model: str, cutting: Segmenting = Segmenting()
) -> PreparedText:
    """Validate `text` for a model (its inline `tags`, the languages it has `spoken`) and split it
    into segments as the model wants them (cheap: no normalisation). Memoised (`memoised`)."""
    refuse_unknown_tags(text, tags, model)
    refuse_other_languages(text, spoken, model)
    tidy = re.sub(r"[ \t]+", " ", text).strip()
    cut, continued = segment_text(tidy, cutting.pack)
    kept = [i for i, s in enumerate(cut) if has_words(s)]
    if not kept:
        raise TextError("The input has nothing to say (only tags, spaces or symbols).")
    marks = frozenset(n for n, i in enumerate(kept) if n and i in continued)  # (pieces with no words dropped)
    return PreparedText(text=tidy, segments=tuple(cut[i] for i in kept), continued=marks)


def as_written(segment: str, tags: frozenset[str], model: str) -> str:
    """What a model reads for a segment when the request turns normalisation off: the text as
    written (spaces tidied), its numbers and symbols left to the model."""
    refuse_unknown_tags(segment, tags, model)
    text = re.sub(r"[ \t]+", " ", segment).strip()
    if not has_words(text):
        raise TextError("The input has nothing to say (only tags, spaces or symbols).")
    return text


@functools.lru_cache(maxsize=4096)
def normalize_segment(segment: str, tags: frozenset[str], model: str) -> str:
    """What the model reads for a segment: spelled out. Memoised (~20 ms a sentence)."""
    normalized = normalize(segment)
    refuse_unknown_tags(normalized, tags, model)  # what reaches the model, whatever normalising made of the text
    if not has_words(normalized):
        raise TextError("The input has nothing to say once spelled out (only tags, spaces or symbols).")
    return normalized
