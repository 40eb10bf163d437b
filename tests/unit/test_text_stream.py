"""Text streamed in over `tts.v2` (synthesis.textstream and the v2 messages of synthesis.protocol):
where complete sentences are cut from deltas, that every character received lands in exactly one
piece, flush/close/cancel, the buffer limit, and the v2 messages (refused under tts.v1)."""

from __future__ import annotations

import asyncio
import json

import pytest

from synthesis.protocol import (
    PROTOCOL,
    TEXT_STREAMING,
    Begin,
    Close,
    CloseText,
    Flush,
    ProtocolError,
    TextDelta,
    parse,
)
from synthesis.textstream import FORCE_CUT_CHARS, MAX_BUFFERED_CHARS, TextStream, TextStreamError


def pieces(stream: TextStream) -> list[str | None]:
    """Everything handed on so far (None: the text is over)."""
    out = []
    while not stream._pieces.empty():
        out.append(stream._pieces.get_nowait())
    return out


def fed(*deltas: str) -> TextStream:
    stream = TextStream("s1", {})
    for delta in deltas:
        stream.add(delta)
    return stream


def test_a_sentence_is_handed_on_once_the_space_after_its_end_arrives():
    stream = fed("Hello", " there", ".")
    assert pieces(stream) == []  # "." may be a decimal point or "Mr." still being typed
    stream.add(" How")
    assert pieces(stream) == ["Hello there. "]
    stream.add(" are you? I am")
    assert pieces(stream) == ["How are you? "]
    assert stream.buffer == "I am"


def test_several_complete_sentences_go_as_one_piece_and_quotes_stay_with_their_sentence():
    stream = fed('He said "stop!" Then he left. And then')
    assert pieces(stream) == ['He said "stop!" Then he left. ']


def test_a_decimal_number_is_not_a_sentence_end():
    stream = fed("It costs 3.50 dollars")
    assert pieces(stream) == []


def test_cjk_sentence_ends_need_no_space():
    stream = fed("你好。今天", "天气很好！明")
    assert pieces(stream) == ["你好。", "今天天气很好！"]


def test_text_without_an_end_is_cut_at_a_space_past_the_force_cut_length():
    words = "word " * (FORCE_CUT_CHARS // 5 + 10)
    stream = fed(words)
    (piece,) = pieces(stream)
    assert len(piece) <= FORCE_CUT_CHARS and piece.endswith(" ")
    assert piece + stream.buffer == words


def test_flush_hands_on_a_partial_sentence_and_close_ends_the_text():
    stream = fed("Half a sen")
    stream.flush()
    stream.add("tence. Tail")
    stream.close()
    assert pieces(stream) == ["Half a sen", "tence. ", "Tail", None]
    with pytest.raises(TextStreamError) as info:
        stream.add("more")
    assert info.value.code == "not_found"


def test_every_character_received_is_in_exactly_one_piece():
    text = "One. Two three? Four... five! 六。 Seven, eight — nine.\nTen"
    stream = TextStream("s1", {})
    for i in range(0, len(text), 3):
        stream.add(text[i : i + 3])
    stream.close()
    out = pieces(stream)
    assert out[-1] is None and "".join(out[:-1]) == text and stream.received == len(text)


def test_a_piece_with_no_words_waits_for_the_next():
    stream = fed("... ", "!! ")
    assert pieces(stream) == []
    stream.add("Yes. ")
    assert pieces(stream) == ["... !! Yes. "]


def test_cancel_ends_the_pieces_at_once():
    stream = fed("Going. Gone")
    stream.cancel()

    async def drain():
        return await stream.next_piece()

    assert asyncio.run(drain()) is None


def test_the_buffer_is_bounded():
    stream = fed("x" * 100)
    stream.flush()
    with pytest.raises(TextStreamError) as info:
        stream.add("a" * (MAX_BUFFERED_CHARS + 1))
    assert info.value.code == "text_buffer_full"


def v2(message: dict):
    return parse(json.dumps(message), version=TEXT_STREAMING)


def test_v2_messages_parse_and_begin_validates_the_options():
    begin = v2({"type": "begin", "id": "s1", "voice": "nova", "seed": 5, "format": "ulaw_8000", "text": "Hi"})
    assert isinstance(begin, Begin) and begin.text == "Hi" and "input" not in begin.speech
    assert begin.speech["voice"] == "nova" and begin.speech["response_format"] == "ulaw_8000"
    assert v2({"type": "text", "id": "s1", "text": "more"}) == TextDelta("s1", "more")
    assert v2({"type": "flush", "id": "s1"}) == Flush("s1")
    assert v2({"type": "close", "id": "s1"}) == CloseText("s1")
    assert v2({"type": "close"}) == Close()  # without an id: the connection
    with pytest.raises(ProtocolError) as info:
        v2({"type": "begin", "id": "s2", "voice": "nobody"})
    assert info.value.code == "invalid_value" and info.value.utterance == "s2"
    with pytest.raises(ProtocolError) as info:
        v2({"type": "begin", "id": "s3", "input": "x"})
    assert info.value.code == "unknown_parameter"
    with pytest.raises(ProtocolError) as info:
        v2({"type": "text", "id": "s1", "text": 5})
    assert info.value.code == "invalid_value"
    with pytest.raises(ProtocolError) as info:
        v2({"type": "flush"})
    assert info.value.code == "required"


def test_v2_messages_are_unknown_under_v1():
    for kind in ("begin", "text", "flush"):
        with pytest.raises(ProtocolError) as info:
            parse(json.dumps({"type": kind, "id": "s1"}), version=PROTOCOL)
        assert info.value.code == "unknown_type"
    assert parse(json.dumps({"type": "close", "id": "s1"})) == Close()
