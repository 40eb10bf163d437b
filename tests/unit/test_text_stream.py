"""Text streamed in over `tts.v2` (synthesis.textstream and the v2 messages of synthesis.protocol):
where sentences are cut from deltas (one piece each, abbreviations and decimals not ends, nothing
longer than FORCE_CUT_CHARS), that every character with words lands in exactly one piece, how the
backlog is joined up to a limit, flush (never half a tag), close, cancel, the bound on unspoken
text, and the v2 messages (refused under tts.v1)."""

from __future__ import annotations

import asyncio
import json

import pytest

from synthesis.api.protocol import (
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
from synthesis.api.textstream import FORCE_CUT_CHARS, MAX_UNSPOKEN_CHARS, TextStream, TextStreamError


def queued(stream: TextStream) -> list[str]:
    return list(stream._pieces)


def fed(*deltas: str) -> TextStream:
    stream = TextStream("s1", {})
    for delta in deltas:
        stream.add(delta)
    return stream


def take_all(stream: TextStream, limit: int = 1) -> list[str]:
    async def go():
        out = []
        while (piece := await stream.take(limit)) is not None:
            out.append(piece)
        return out

    return asyncio.run(go())


def test_a_sentence_is_handed_on_once_the_space_after_its_end_arrives():
    stream = fed("Hello", " there", ".")
    assert queued(stream) == []  # "." may be a decimal point, or "Dr." still being typed
    stream.add(" How")
    assert queued(stream) == ["Hello there. "]
    stream.add(" are you? I am")
    assert queued(stream) == ["Hello there. ", "How are you? "]
    assert stream.buffer == "I am"


def test_each_sentence_is_a_piece_and_quotes_stay_with_their_sentence():
    stream = fed('He said "stop!" Then he left. And then')
    assert queued(stream) == ['He said "stop!" ', "Then he left. "]


def test_decimals_and_abbreviations_are_not_sentence_ends():
    stream = fed("It costs 3.50 dollars. Dr. Smith sees you at 3 p.m. today. Yes")
    assert queued(stream) == ["It costs 3.50 dollars. ", "Dr. Smith sees you at 3 p.m. today. "]


def test_cjk_sentence_ends_need_no_space():
    stream = fed("你好。今天", "天气很好！明")
    assert queued(stream) == ["你好。", "今天天气很好！"]


def test_no_piece_is_longer_than_the_force_cut():
    words = "word " * 200  # no sentence end at all
    stream = fed(words)
    assert all(len(p) <= FORCE_CUT_CHARS and p.endswith(" ") for p in queued(stream))
    assert "".join(queued(stream)) + stream.buffer == words
    long_sentence = "a" * 20 + " " + "b " * 400 + "end. "
    stream = fed(long_sentence)
    assert all(len(p) <= FORCE_CUT_CHARS for p in queued(stream)) and "".join(queued(stream)) == long_sentence


def test_the_backlog_is_joined_up_to_the_limit_and_a_lone_sentence_goes_alone():
    stream = fed("One. ", "Two! ", "Three? ")
    stream.close()
    assert take_all(stream, limit=12) == ["One. Two! ", "Three? "]
    stream = fed("First sentence here. ")
    stream.close()
    assert take_all(stream, limit=4) == ["First sentence here. "]  # longer than the limit: it still goes


def test_flush_hands_on_a_partial_sentence_but_never_half_a_tag_and_close_ends_the_text():
    stream = fed("Half a sen")
    stream.flush()
    stream.add("tence [lau")
    stream.flush()
    assert stream.buffer == "[lau"
    stream.add("gh] done. Tail")
    stream.close()
    assert take_all(stream) == ["Half a sen", "tence ", "[laugh] done. ", "Tail"]
    with pytest.raises(TextStreamError) as info:
        stream.add("more")
    assert info.value.code == "not_found"


def test_every_character_with_words_is_in_exactly_one_piece():
    text = "One. Two three? Four... five! 六。 Seven, eight — nine.\nTen"
    stream = TextStream("s1", {})
    for i in range(0, len(text), 3):
        stream.add(text[i : i + 3])
    stream.close()
    assert "".join(take_all(stream, limit=10_000)) == text and stream.received == len(text)


def test_a_piece_with_no_words_waits_for_the_next():
    stream = fed("... ", "!! ")
    assert queued(stream) == []
    stream.add("Yes. ")
    assert queued(stream) == ["... !! Yes. "]


def test_cancel_drops_what_is_queued_and_ends_the_pieces():
    stream = fed("Going. Gone. Still")
    stream.cancel()
    assert take_all(stream) == [] and stream.unspoken == 0


def test_unspoken_text_is_bounded():
    stream = fed("x. " * 1000)  # queued pieces count, not only the buffer
    assert stream.unspoken == 3000
    with pytest.raises(TextStreamError) as info:
        stream.add("a" * (MAX_UNSPOKEN_CHARS - 2999))
    assert info.value.code == "text_buffer_full"


def v2(message: dict):
    return parse(json.dumps(message), version=TEXT_STREAMING)


def test_v2_messages_parse_and_begin_validates_the_options():
    begin = v2({"type": "begin", "id": "s1", "voice": "nova", "seed": 5, "format": "ulaw_8000", "text": "Hi"})
    assert isinstance(begin, Begin) and begin.text == "Hi" and "input" not in begin.speech
    assert begin.speech["voice"] == "nova" and begin.speech["response_format"] == "ulaw_8000"
    assert v2({"type": "begin", "id": "s1", "output_format": "pcm_16000"}).speech["response_format"] == "pcm_16000"
    assert v2({"type": "text", "id": "s1", "text": "more"}) == TextDelta("s1", "more")
    assert v2({"type": "flush", "id": "s1"}) == Flush("s1")
    assert v2({"type": "close", "id": "s1"}) == CloseText("s1")
    assert v2({"type": "close"}) == Close()  # without an id: the connection
    for message, code in (
        ({"type": "begin", "id": "s2", "voice": "nobody"}, "invalid_value"),
        ({"type": "begin", "id": "s3", "input": "x"}, "unknown_parameter"),
        ({"type": "begin", "id": 5}, "required"),
        ({"type": "begin"}, "required"),
        ({"type": "text", "id": "s1", "text": 5}, "invalid_value"),
        ({"type": "flush"}, "required"),
    ):
        with pytest.raises(ProtocolError) as info:
            v2(message)
        assert info.value.code == code, message


def test_v2_messages_are_unknown_under_v1():
    for kind in ("begin", "text", "flush"):
        with pytest.raises(ProtocolError) as info:
            parse(json.dumps({"type": kind, "id": "s1"}), version=PROTOCOL)
        assert info.value.code == "unknown_type"
    assert parse(json.dumps({"type": "close", "id": "s1"})) == Close()
