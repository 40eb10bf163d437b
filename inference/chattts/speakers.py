"""ChatTTS speaker embedding strings (what `Chat.sample_random_speaker()` returns: base16384 of
LZMA2-compressed float16 values), checked and made canonical without torch, so the web process can
refuse a bad one when an organization makes a voice of it. How many values the model takes only a
worker knows: it checks that when it uses the voice (`ChatTTSEngine.speaker_problem`)."""

from __future__ import annotations

import lzma

import numpy as np
import pybase16384 as b14

_LZMA = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
MAX_SPEAKER_CHARS = 8192  # an embedding string: ~854 characters for ChatTTS's 768 values


def speaker_problem(speaker: str) -> str | None:
    """Why `speaker` is not a ChatTTS speaker embedding string, or None."""
    if not speaker or len(speaker) > MAX_SPEAKER_CHARS:
        return f"speaker must be a ChatTTS speaker embedding string (at most {MAX_SPEAKER_CHARS} characters)"
    try:
        decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=_LZMA)
        data = decompressor.decompress(b14.decode_from_string(speaker), max_length=2 * 4097)
    except (lzma.LZMAError, ValueError, TypeError):
        return "speaker is not a ChatTTS speaker embedding string (base16384 of LZMA2-compressed float16 values)"
    if not decompressor.eof or len(data) % 2 or not 16 <= len(data) // 2 <= 4096:
        return "speaker does not decode to a speaker embedding (16 to 4,096 float16 values)"
    values = np.frombuffer(data, dtype=np.float16).astype(np.float32)
    norm = float(np.linalg.norm(values))
    if not np.isfinite(values).all() or not 1e-3 < norm < 6e4:
        return "speaker's values are not finite, or all (nearly) zero"
    return None


def canonical(speaker: str) -> str:
    """The embedding re-encoded as ChatTTS encodes it (trailing characters that decode to nothing
    are dropped), so that one embedding has one string, hence one cache key."""
    values = lzma.decompress(b14.decode_from_string(speaker), format=lzma.FORMAT_RAW, filters=_LZMA)
    return b14.encode_to_string(lzma.compress(values, format=lzma.FORMAT_RAW, filters=_LZMA))
