"""Text preparation before ChatTTS: control tags, sentence splitting, normalisation, token budgets.

Two steps, in two places. `prepare` (the web process, on every request) validates the control
tags and splits the text at sentence boundaries into segments — rather than ChatTTS's own
`split_text`, which mutates the caller's parameters and changes later calls. `normalize_segment`
(the synthesis worker, per segment) spells out numbers, dates, currencies and symbols with
WeTextProcessing's Chinese and English grammars, since ChatTTS silently deletes what it cannot
pronounce ("价格是100元" becomes "价格是元"). The grammars take ~2 s and ~90 MB to load, once per
process: only the workers load them, so a web process stays small.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import re
import threading
import unicodedata
from dataclasses import dataclass

SAMPLE_RATE = 24000
SAMPLES_PER_TOKEN = 512
TOKENS_PER_SECOND = SAMPLE_RATE / SAMPLES_PER_TOKEN  # 46.875

# Inline control tags users may write in `input` (ChatTTS's tokenizer knows them).
INLINE_TAGS = frozenset(
    ["[uv_break]", "[v_break]", "[lbreak]", "[llbreak]", "[laugh]"]
    + [f"[break_{i}]" for i in range(8)]
    + [f"[laugh_{i}]" for i in range(3)]
    + [f"[oral_{i}]" for i in range(10)]
)
# Tags that steer text refinement (`refine_prompt`).
REFINE_TAG = re.compile(r"^(\[(oral_\d|laugh_[0-2]|break_[0-7])\])+$")
# Anything written like a tag: a bracketed word. ChatTTS's tokenizer knows more special tokens
# than INLINE_TAGS ([Stts], [Ptts], [spk_emb], [Sbreak], ...): they steer the model and must never
# come from a user, so every tag-like word not exactly (case and all) in INLINE_TAGS is refused.
# "[1]" or "[see below]" are not tags and stay text.
TAG = re.compile(r"\[[A-Za-z][A-Za-z0-9_-]*\]")
CJK = re.compile(r"[\u3400-\u9fff]")
# Sentence ends: Chinese ones always; Latin ones when followed by space or the end.
SENTENCE_END = re.compile(r"(?<=[。！？；…!?;])|(?<=\.)(?=\s|$)|\n+")
CLAUSE_END = re.compile(r"(?<=[，、：,:])")

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


def unknown_tags(text: str) -> list[str]:
    found = set(TAG.findall(text)) | set(TAG.findall(_folded(text)))
    return sorted(t for t in found if t not in INLINE_TAGS)


def _refuse_unknown_tags(text: str) -> None:
    bad = unknown_tags(text)
    if bad:
        raise TextError(
            f"Unknown control tag(s) {', '.join(bad)}; allowed (case-sensitive): {', '.join(sorted(INLINE_TAGS))}."
        )


def normalizer_version() -> str:
    """Part of the model version (what a cached audio depends on): the grammars that spell out."""
    try:
        return "wetext-" + importlib.metadata.version("WeTextProcessing")
    except importlib.metadata.PackageNotFoundError:
        return "wetext-unknown"


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
            part = lead + _normalizer(lang).normalize(part.strip()) + trail
        out.append(part)
        if i < len(tags):
            out.append(tags[i])
    return re.sub(r"[ \t]+", " ", "".join(out)).strip()


def estimate_seconds(text: str) -> float:
    plain = TAG.sub("", text)
    cjk = len(CJK.findall(plain))
    other = sum(1 for ch in plain if ch.isalnum()) - cjk
    return cjk * SECONDS_PER_CJK_CHAR + max(other, 0) * SECONDS_PER_OTHER_CHAR


def token_budget(segment: str, speed: float = 1.0) -> int:
    """The most audio tokens one segment may generate: proportional to its text, so a runaway
    generation (random weights rarely emit the end token) stops."""
    seconds = 1.0 + 2.0 * estimate_seconds(segment) / max(speed, 0.25)
    return max(24, math.ceil(seconds * TOKENS_PER_SECOND))


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


def split_text(text: str) -> list[str]:
    """Split at sentence ends, then pack sentences into segments of at most MAX_SEGMENT_SECONDS;
    a sentence longer than that is cut at clause ends, then between words."""
    sentences = [s.strip() for s in SENTENCE_END.split(text) if s and s.strip()]
    pieces: list[str] = []
    for s in sentences:
        if estimate_seconds(s) <= MAX_SEGMENT_SECONDS:
            pieces.append(s)
            continue
        for clause in (c.strip() for c in CLAUSE_END.split(s) if c.strip()):
            pieces.extend([clause] if estimate_seconds(clause) <= MAX_SEGMENT_SECONDS else _hard_split(clause))
    segments: list[str] = []
    for piece in pieces:
        if segments and estimate_seconds(segments[-1] + piece) <= MAX_SEGMENT_SECONDS:
            joiner = "" if CJK.search(piece[:1] + segments[-1][-1:]) else " "
            segments[-1] = f"{segments[-1]}{joiner}{piece}"
        else:
            segments.append(piece)
    return [s for s in segments if TAG.sub("", s).strip()]


@dataclass(frozen=True)
class PreparedText:
    text: str  # as given, spaces tidied: what the cache key and identical-request sharing use
    segments: tuple[str, ...]  # as given; the worker normalises each (`normalize_segment`)

    @property
    def max_audio_seconds(self) -> float:
        """The most audio the segments may become (loads the normalisers)."""
        return sum(segment_budget(s) for s in self.segments) * SAMPLES_PER_TOKEN / SAMPLE_RATE


def _has_words(segment: str) -> bool:
    return any(ch.isalnum() for ch in TAG.sub("", segment))


MEMOISED_CHARS = 4096  # texts up to a speech request's size are memoised; a long job's are not kept


def prepare(text: str) -> PreparedText:
    """Validate `text` and split it into segments (cheap: no normalisation). Memoised up to
    MEMOISED_CHARS: repeated texts (greetings, prompts: what the audio cache serves) come back
    often, while a 200,000-character job's text would only fill the memory."""
    return _prepare_memoised(text) if len(text) <= MEMOISED_CHARS else _prepare(text)


@functools.lru_cache(maxsize=4096)
def _prepare_memoised(text: str) -> PreparedText:
    return _prepare(text)


def _prepare(text: str) -> PreparedText:
    _refuse_unknown_tags(text)
    tidy = re.sub(r"[ \t]+", " ", text).strip()
    segments = [s for s in split_text(tidy) if _has_words(s)]
    if not segments:
        raise TextError("The input has nothing to say (only tags, spaces or symbols).")
    return PreparedText(text=tidy, segments=tuple(segments))


@functools.lru_cache(maxsize=4096)
def normalize_segment(segment: str) -> str:
    """What the model reads for a segment: spelled out. Memoised (~20 ms a sentence)."""
    normalized = normalize(segment)
    _refuse_unknown_tags(normalized)  # what reaches the model, whatever normalising made of the text
    if not _has_words(normalized):
        raise TextError("The input has nothing to say once spelled out (only tags, spaces or symbols).")
    return normalized


def segment_budget(segment: str, speed: float = 1.0) -> int:
    """The token budget of a prepared segment, from its spelled-out form ("1999" is four words)."""
    return token_budget(normalize_segment(segment), speed)
