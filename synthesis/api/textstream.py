"""Text streamed in (`tts.v2`): one utterance's text arriving in deltas, cut into pieces to speak.

A voice agent sends an LLM's tokens as they come; audio should start once the first sentence is
complete, not when the reply is. `TextStream.add` appends a delta and hands on each complete
sentence as a piece of its own. A sentence is complete at an end mark followed by white space
(". ", "?\\n": a "." alone may be a decimal point, and "Dr. " or "e.g. " are not ends) or at a CJK
end mark ("。", "！", "？", which need no space). Text with no end is cut at a space once it passes
FORCE_CUT_CHARS, and so is a longer sentence: no piece is longer than that. `flush` hands on what is
buffered now (but never half an inline tag such as "[lau"); `close` does too and then says the text
is over. A piece with nothing to say (only spaces or punctuation) waits and joins the next.

`take` gives the next piece joined with the pieces queued behind it, up to a length: while the
speaker keeps up each sentence goes alone (the first audio comes soonest), and when text arrives
faster than it is spoken the backlog goes as one request. At most MAX_UNSPOKEN_CHARS characters of
an utterance may wait to be spoken (buffered or queued); more is refused (`text_buffer_full`).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque

# A sentence end: Latin marks with closing quotes/brackets, then white space; or a CJK mark.
SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+|[。！？；]+[\"'”’)\]」』]*\s*")
# Words whose "." is not a sentence end (lower case, with their dots).
ABBREVIATIONS = frozenset(
    "mr. mrs. ms. dr. prof. st. sr. jr. vs. etc. e.g. i.e. a.m. p.m. no. fig. approx. inc. ltd. co. mt.".split()
)
FORCE_CUT_CHARS = 300
MAX_UNSPOKEN_CHARS = 8_192
WORD = re.compile(r"\w")


class TextStreamError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def _is_sentence_end(text: str, match: re.Match) -> bool:
    word = text[: match.start() + 1].rsplit(None, 1)[-1].lower()
    return word not in ABBREVIATIONS


def _split_long(piece: str) -> list[str]:
    """`piece` in parts of at most FORCE_CUT_CHARS, cut after a space where there is one."""
    parts = []
    while len(piece) > FORCE_CUT_CHARS:
        cut = piece.rfind(" ", 0, FORCE_CUT_CHARS) + 1 or FORCE_CUT_CHARS
        parts.append(piece[:cut])
        piece = piece[cut:]
    return [*parts, piece] if piece else parts


class TextStream:
    """The pieces of one streamed utterance, in order (`take` returns None after the last)."""

    def __init__(self, utterance: str, speech: dict):
        self.id = utterance
        self.speech = speech  # a validated /v1/audio/speech body, without its input
        self.buffer = ""
        self.received = 0
        self.closed = False
        self.cancelled = False
        self._pieces: deque[str] = deque()
        self._ready = asyncio.Event()

    @property
    def unspoken(self) -> int:
        """Characters received and not yet taken to be spoken."""
        return len(self.buffer) + sum(len(piece) for piece in self._pieces)

    def add(self, delta: str) -> None:
        if self.closed:
            raise TextStreamError("not_found", f"The text of {self.id!r} is closed.")
        if self.unspoken + len(delta) > MAX_UNSPOKEN_CHARS:
            raise TextStreamError(
                "text_buffer_full",
                f"At most {MAX_UNSPOKEN_CHARS} characters of an utterance may wait to be spoken; send less at a time.",
            )
        self.buffer += delta
        self.received += len(delta)
        self._cut()

    def _cut(self) -> None:
        start = 0
        for match in SENTENCE_END.finditer(self.buffer):
            if _is_sentence_end(self.buffer, match) and WORD.search(self.buffer, start, match.end()):
                self._queue(self.buffer[start : match.end()])
                start = match.end()
        self.buffer = self.buffer[start:]
        if len(self.buffer) > FORCE_CUT_CHARS:
            *parts, self.buffer = _split_long(self.buffer)
            for part in parts:
                self._queue(part)

    def _queue(self, piece: str) -> None:
        for part in _split_long(piece):
            self._pieces.append(part)
        self._ready.set()

    def flush(self) -> None:
        cut = len(self.buffer)
        if self.buffer.rfind("[") > self.buffer.rfind("]"):  # never half a tag
            cut = self.buffer.rfind("[")
        if WORD.search(self.buffer, 0, cut):
            self._queue(self.buffer[:cut])
            self.buffer = self.buffer[cut:]

    def close(self) -> None:
        if not self.closed:
            self.flush()
            if WORD.search(self.buffer):  # an unclosed "[" at the very end: say it as it is
                self._queue(self.buffer)
                self.buffer = ""
            self.closed = True
            self._ready.set()

    def cancel(self) -> None:
        self.cancelled = self.closed = True
        self.buffer = ""
        self._pieces.clear()
        self._ready.set()

    async def take(self, limit: int) -> str | None:
        """The next piece and those queued behind it, at most `limit` characters together (the
        first piece goes even when longer); None once the text is over or cancelled."""
        while not self._pieces and not self.closed:
            self._ready.clear()
            await self._ready.wait()
        if self.cancelled or not self._pieces:
            return None
        piece = self._pieces.popleft()
        while self._pieces and len(piece) + len(self._pieces[0]) <= limit:
            piece += self._pieces.popleft()
        return piece
