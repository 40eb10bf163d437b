"""Text preparation: numbers and symbols survive normalisation; long text is split at sentence
boundaries; every segment gets a bounded token budget. The web process splits; only the workers
load the normalisers."""

from __future__ import annotations

import subprocess
import sys

import pytest

from inference.chattts.params import ChatTTSParams, token_budget
from inference.chattts.spec import INLINE_TAGS
from inference.chattts.spec import SPEC as CHATTTS
from inference.kokoro.params import KokoroParams
from inference.kokoro.spec import SPEC as KOKORO
from inference.kokoro.text import read as kokoro_read
from inference.text.preparation import (
    MAX_SEGMENT_SECONDS,
    TextError,
    as_written,
    estimate_seconds,
    languages,
    normalize,
    normalize_segment,
    split_text,
)
from inference.voxcpm.params import VoxCPMParams
from inference.voxcpm.spec import SPEC as VOXCPM

prepare = CHATTTS.prepare


def test_chinese_numbers_and_currency_are_spelled_out():
    assert normalize("价格是100元") == "价格是一百元"


def test_chinese_dates_percent_and_negative_numbers_are_spelled_out():
    out = normalize("2024年3月5日，气温-3.5°C，增长了15%。")
    assert "二零二四年三月五日" in out
    assert "负三点五" in out
    assert "百分之十五" in out
    assert not any(ch.isdigit() for ch in out)


def test_english_numbers_money_and_symbols_are_spelled_out():
    out = normalize("It costs $12.50, 3 cats & 2 dogs, up 15%.")
    assert "twelve" in out and "dollars" in out
    assert "three cats and two dogs" in out
    assert "fifteen percent" in out
    assert not any(ch.isdigit() for ch in out)


def test_inline_control_tags_are_kept_verbatim():
    out = normalize("I have 2 apples [laugh] and [uv_break] 3 pears.")
    assert "[laugh]" in out and "[uv_break]" in out
    assert "two apples" in out and "three pears" in out


def test_unknown_control_tag_is_rejected_by_name():
    with pytest.raises(TextError, match=r"\[shout\]"):
        prepare("hello [shout] world")


@pytest.mark.parametrize("text", ["[laugh] [uv_break]", "  ", "... !!! ---"])
def test_text_with_nothing_to_say_is_rejected(text):
    with pytest.raises(TextError):
        prepare(text)


def test_a_segments_budget_counts_its_spelled_out_form():
    (segment,) = prepare("Call 1234567890 now.").segments
    assert token_budget(normalize_segment(segment, INLINE_TAGS, "chattts")) > token_budget(segment)


@pytest.mark.parametrize(
    "text, found",
    [
        ("Hello there.", {"en"}),
        ("你好，世界。", {"zh"}),
        ("我用SQL查询。", {"en", "zh"}),
        ("こんにちは", {"ja"}),
        ("Привет, мир.", {"ru"}),
        ("안녕하세요", {"ko"}),
        ("Hello [laugh] 1234.", {"en"}),
    ],
)
def test_the_languages_of_a_text_are_told_by_their_script(text, found):
    assert languages(text) == found


@pytest.mark.parametrize(
    ("spec", "can"),
    [(CHATTTS, "English and Chinese"), (KOKORO, "8 languages (en, zh, es, fr, hi, it, ja, pt)")],
    ids=["chattts", "kokoro"],
)
def test_a_language_the_model_cannot_speak_is_refused_naming_those_it_can(spec, can):
    with pytest.raises(TextError) as refused:
        spec.prepare("Hello, Привет.")
    message = str(refused.value)
    assert f"'{spec.name}'" in message and can in message and "Russian" in message


def test_english_and_chinese_mixed_are_spoken_by_both_models():
    for spec in (CHATTTS, KOKORO):
        assert spec.prepare("我用SQL查询数据。Then we go home.").segments


def test_preparing_text_does_not_load_the_normalisers():
    """The web process prepares every request: it must stay free of the ~90 MB of grammars."""
    code = (
        "import sys; from inference.chattts.spec import SPEC; SPEC.prepare('It costs $12.50, 3 cats.'); "
        "print(any(m.startswith('tn.') or m == 'tn' for m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_short_text_is_one_segment():
    assert split_text("Hello there. How are you?") == ["Hello there. How are you?"]


def test_long_english_text_is_split_at_sentence_ends():
    sentences = [f"This is sentence number {w} of the story." for w in ["one", "two", "three", "four"] * 10]
    segments = split_text(" ".join(sentences))
    assert len(segments) > 1
    for segment in segments:
        assert estimate_seconds(segment) <= MAX_SEGMENT_SECONDS
        assert segment.endswith(".")
    assert " ".join(segments) == " ".join(sentences)


def test_long_chinese_text_is_split_at_chinese_punctuation():
    text = "今天天气很好。" * 30
    segments = split_text(text)
    assert len(segments) > 1
    assert all(s.endswith("。") for s in segments)
    assert "".join(segments) == text


def test_a_sentence_without_punctuation_is_still_cut_to_size():
    text = " ".join(["word"] * 400)
    segments = split_text(text)
    assert len(segments) > 1
    assert all(estimate_seconds(s) <= MAX_SEGMENT_SECONDS for s in segments)
    assert " ".join(segments) == text


def test_token_budget_grows_with_text_and_is_bounded():
    short, long = token_budget("Hi."), token_budget("This is a much longer sentence with many words in it.")
    assert 24 <= short < long
    assert token_budget("字" * 40) < 2048  # one segment stays inside one generation


def test_kokoro_speaks_a_sentence_a_segment_live_or_not():
    """Kokoro makes each segment whole: each sentence is a segment, the first one whole too (a live
    request's first audio comes from its first window as the engine decodes it, not from cutting
    the sentence, which made two utterances of it); a long sentence's pieces make one caption."""
    text = "The quick brown fox jumps over the lazy dog. It costs $5 today."
    prepared = KOKORO.prepare(text)
    assert prepared.segments == ("The quick brown fox jumps over the lazy dog.", "It costs $5 today.")
    assert prepared.continued == frozenset()
    assert prepared.sentences() == ["The quick brown fox jumps over the lazy dog.", "It costs $5 today."]
    chinese = KOKORO.prepare("你好，欢迎使用我们的语音服务，今天天气很好。明天见。")
    assert chinese.segments == ("你好，欢迎使用我们的语音服务，今天天气很好。", "明天见。")
    linked = KOKORO.prepare("[New York City Hall](/nˈu jˈɔɹk/) is where the mayor works all day long. Yes.")
    assert linked.segments == ("[New York City Hall](/nˈu jˈɔɹk/) is where the mayor works all day long.", "Yes.")
    # ChatTTS, which streams within a segment, packs sentences.
    assert CHATTTS.prepare(text).segments == (text,)


def test_text_in_a_language_voxcpm_does_not_speak_is_refused_naming_the_thirty_it_does():
    for text in ("Привет, мир.", "ສະບາຍດີ", "ជំរាបសួរ", "မင်္ဂလာပါ", "Bonjour à tous.", "안녕하세요", "नमस्ते"):
        assert VOXCPM.prepare(text).segments  # its languages: Russian, Lao, Khmer, Burmese, French...
    for text, name in (("Українська мова.", "Ukrainian"), ("ქართული ენა", "Georgian"), ("বাংলা ভাষা", "Bengali")):
        with pytest.raises(TextError) as refused:
            VOXCPM.prepare(text)
        assert str(refused.value).startswith("Model 'voxcpm' speaks 30 languages (ar, my, zh,")
        assert str(refused.value).endswith(f"the input has {name}.")


@pytest.mark.parametrize("params", [KokoroParams, ChatTTSParams, VoxCPMParams])
def test_text_normalization_off_reaches_every_engines_row_and_auto_or_on_do_not(params):
    voice = {"builtin": "af_heart" if params is KokoroParams else "alloy"}
    assert params.from_request({"text_normalization": "off"}, voice, seed=1).spell_out is False
    assert params.from_request({"text_normalization": "on"}, voice, seed=1) == params.from_request({}, voice, seed=1)


def test_text_normalization_off_reads_the_text_as_written():
    said = "It costs $5 at 3:30 on 4/5."
    assert kokoro_read(said, "", spell_out=False) == said  # digits left to the G2P
    assert "five" in kokoro_read(said).lower()  # spelled out by default
    assert as_written("  It  costs $5. ", frozenset(), "voxcpm") == "It costs $5."
    with pytest.raises(TextError):
        as_written(" $ ", frozenset(), "chattts")
    with pytest.raises(TextError):  # an inline tag the model does not take is refused all the same
        as_written("Hi [laugh]", frozenset(), "voxcpm")
