"""Text streamed in (`tts.v2`): one utterance's text arriving in deltas, cut into pieces to speak.

A voice agent sends an LLM's tokens as they come; audio should start once the first sentence is
complete, not when the reply is. `TextStream.add` appends a delta and hands on every complete
sentence; a sentence is complete at an end mark followed by white space (". ", "?\\n": a "." alone
may be a decimal point or an abbreviation still being typed) or at a CJK end mark ("。", "！", "？",
which need no space). A run of text with no end for FORCE_CUT_CHARS characters is cut at its last
space, so a client that never punctuates still hears something. `flush` hands on what is buffered
now; `close` does too and then says the text is over. Pieces with nothing to say (only spaces or
punctuation) wait and join the next piece. Every character received is in exactly one piece, so the
pieces' lengths add up to what was received (what is billed), except trailing text with no words.
"""

from __future__ import annotations

import asyncio
import re

# A sentence end: Latin marks with closing quotes/brackets, then white space; or a CJK mark.
SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+|[。！？；]+[\"'”’)\]」』]*\s*")
FORCE_CUT_CHARS = 300
MAX_BUFFERED_CHARS = 16_384  # text received but not yet cut into a piece
WORD = re.compile(r"\w")


class TextStreamError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class TextStream:
    """The pieces of one streamed utterance, in order; `None` after the last (closed or cancelled)."""

    def __init__(self, utterance: str, speech: dict, text: str = ""):
        self.id = utterance
        self.speech = speech  # a validated /v1/audio/speech body, without its input
        self.buffer = ""
        self.received = 0
        self.closed = False
        self.cancelled = False
        self._pieces: asyncio.Queue[str | None] = asyncio.Queue()
        if text:
            self.add(text)

    def add(self, delta: str) -> None:
        if self.closed:
            raise TextStreamError("not_found", f"The text of {self.id!r} is closed.")
        if len(self.buffer) + len(delta) > MAX_BUFFERED_CHARS:
            raise TextStreamError(
                "text_buffer_full",
                f"At most {MAX_BUFFERED_CHARS} characters may wait without a sentence end; send a flush.",
            )
        self.buffer += delta
        self.received += len(delta)
        self._cut()

    def _cut(self) -> None:
        ends = [m.end() for m in SENTENCE_END.finditer(self.buffer)]
        cut = ends[-1] if ends else 0
        if not cut and len(self.buffer) > FORCE_CUT_CHARS:
            cut = self.buffer.rfind(" ", 0, FORCE_CUT_CHARS) + 1 or FORCE_CUT_CHARS
        if cut:
            self._hand_on(cut)

    def _hand_on(self, cut: int) -> None:
        piece = self.buffer[:cut]
        if WORD.search(piece):
            self._pieces.put_nowait(piece)
            self.buffer = self.buffer[cut:]

    def flush(self) -> None:
        if self.buffer:
            self._hand_on(len(self.buffer))

    def close(self) -> None:
        if not self.closed:
            self.flush()
            self.closed = True
            self._pieces.put_nowait(None)

    def cancel(self) -> None:
        self.cancelled = True
        self.buffer = ""
        if not self.closed:
            self.closed = True
        self._pieces.put_nowait(None)

    async def next_piece(self) -> str | None:
        if self.cancelled:
            return None
        piece = await self._pieces.get()
        return None if self.cancelled else piece
