"""SSML parsed safely and cut into styled segments, on each engine's spec: what each element does,
what is refused and where, the hostile documents, the characters billed, and say-as's words."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from inference.chattts.spec import SPEC as CHATTTS
from inference.kokoro.spec import SPEC as KOKORO
from inference.text.preparation import TextError
from inference.text.sayas import say_as
from inference.text.ssml import SsmlError, is_ssml
from inference.text.ssml_text import finish
from inference.text.ssml_xml import MAX_ELEMENTS
from inference.voxcpm.spec import SPEC as VOXCPM
from synthesis.audio.cache import segments_text

ENGINES = [KOKORO, CHATTTS, VOXCPM]


def prepared(spec, ssml: str, lexicon=None):
    return finish(spec.prepare(ssml, ssml=True), lexicon)


def refusal(spec, ssml: str) -> str:
    with pytest.raises(SsmlError) as caught:
        spec.prepare(ssml, ssml=True)
    return str(caught.value)


def test_a_request_is_ssml_when_it_says_so_or_starts_with_speak():
    assert is_ssml("  <speak>Hi</speak>") and not is_ssml("Hi <break/>")
    assert is_ssml("Hi <break/>", "ssml") and not is_ssml("<speak>Hi</speak>", "text")
    # The XML declaration SSML producers write first, a DOCTYPE (refused as SSML), a byte order mark.
    assert is_ssml('<?xml version="1.0"?>\n<speak>Hi</speak>') and is_ssml("<!DOCTYPE speak><speak/>")
    assert is_ssml("\ufeff <speak>Hi</speak>") and not is_ssml("Hi <?xml?>")


@pytest.mark.parametrize("spec", ENGINES, ids=lambda s: s.name)
def test_breaks_sentences_and_paragraphs_become_segments_with_their_pauses(spec):
    text = prepared(
        spec,
        '<speak><break time="300ms"/><p><s>One two.</s><s>Three four</s></p>'
        '<p>Five<break time="1.5s"/>six <break strength="x-strong"/>seven.</p><break time="2s"/></speak>',
    )
    assert text.segments == ("One two.", "Three four", "Five", "six", "seven.")
    pauses = [s.pause_ms for s in text.styles]
    assert pauses == [300, None, 400, 1500, 1000]  # a leading break; a new paragraph; breaks inside a sentence
    assert text.styles[-1].after_ms == 2000
    assert {3, 4} <= text.continued and 2 not in text.continued  # "six" goes on with "Five"; a paragraph does not
    assert text.text == "One two. Three four Five six seven."  # as written (history): parted where they part


@pytest.mark.parametrize("spec", ENGINES, ids=lambda s: s.name)
def test_prosody_emphasis_voice_and_lang_say_their_span_as_a_segment_of_its_own(spec):
    other = spec.voices[1].id
    lang = "zh" if "zh" in spec.languages else spec.languages[0]
    text = prepared(
        spec,
        f'<speak>Plain <prosody rate="150%" pitch="+2st" volume="-6dB">fast high soft</prosody> '
        f'<emphasis level="strong">loud</emphasis> <voice name="{other}">other voice</voice> '
        f'<lang xml:lang="{lang}">words</lang> end.</speak>',
    )
    spans = dict(zip(text.segments, text.styles, strict=True))
    fast = spans["fast high soft"]
    assert (fast.rate, fast.pitch, fast.volume_db) == (1.5, 2.0, -6.0)
    assert (spans["loud"].rate, spans["loud"].volume_db) == (0.9, 3.0)
    assert spans["other voice"].voice == other
    assert spans["words"].lang == lang
    assert spans["Plain"].as_dict() == {} and text.segments[-1] == "end."


def test_say_as_speaks_numbers_dates_times_money_and_phone_numbers_in_words():
    assert say_as("1234", "cardinal", "", "en") == "one thousand, two hundred and thirty-four"
    assert say_as("3", "ordinal", "", "en") == "third" and say_as("21st", "ordinal", "", "en") == "twenty-first"
    assert say_as("2048", "digits", "", "en") == "two zero four eight"
    assert say_as("+1 (555) 010-0199", "telephone", "", "en") == (
        "plus one, five five five, zero one zero, zero one nine nine"
    )
    assert say_as("12/24/2026", "date", "mdy", "en") == "December twenty-fourth, twenty twenty-six"
    assert say_as("24.12.2026", "date", "dmy", "es") == "veinticuatro de diciembre de dos mil veintiséis"
    assert say_as("2026-12-03", "date", "", "zh") == "2026年12月3日"
    assert say_as("2:30pm", "time", "", "en") == "two thirty p m"
    assert say_as("$12.50", "currency", "", "en") == "twelve dollars, fifty cents"
    assert say_as("USB-C", "characters", "", "en") == "U S B C"


@pytest.mark.parametrize("spec", ENGINES, ids=lambda s: s.name)
def test_sub_and_say_as_win_over_lexicons_which_still_apply_around_them(spec):
    lexicon = lambda text: text.replace("WWW", "dub dub dub").replace("Call", "Ring")  # noqa: E731
    text = prepared(
        spec,
        '<speak>Call <sub alias="World Wide Web">WWW</sub> at <say-as interpret-as="digits">42</say-as>. WWW.</speak>',
        lexicon=lexicon,
    )
    assert " ".join(text.segments) == "Ring World Wide Web at four two. dub dub dub."
    assert " ".join(text.shown) == "Call WWW at 42. WWW."  # captions show the text as written


def test_a_phoneme_is_read_as_phonemes_by_kokoro_and_as_its_word_by_text_models():
    ssml = '<speak>Say <phoneme alphabet="ipa" ph="təˈmɑːtoʊ">tomato</phoneme> now.</speak>'
    assert prepared(KOKORO, ssml).segments == ("Say [tomato](/təˈmɑːtoʊ/) now.",)
    for spec in (CHATTTS, VOXCPM):
        assert prepared(spec, ssml).segments == ("Say tomato now.",)
        message = refusal(spec, '<speak>Say <phoneme alphabet="ipa" ph="təˈmɑːtoʊ"/> now.</speak>')
        assert f"model '{spec.name}' reads text, not phonemes" in message and "line 1, column 12" in message


@pytest.mark.parametrize("spec", ENGINES, ids=lambda s: s.name)
def test_marks_are_placed_by_where_they_fall_in_the_segments(spec):
    text = prepared(
        spec,
        '<speak><mark name="start"/>Hello <mark name="mid"/>there.<break time="500ms"/>'
        '<mark name="after-break"/>Again.<mark name="last"/><break time="1s"/><mark name="tail"/></speak>',
    )
    assert text.segments == ("Hello there.", "Again.")
    assert text.styles[0].marks == (("start", 0, 0), ("mid", 6, 0))
    assert text.styles[1].marks == (("after-break", 0, 0), ("last", 6, 0), ("tail", -1, 1000))


def test_marks_inside_breaks_keep_their_place_in_the_silence():
    text = prepared(
        KOKORO,
        '<speak><mark name="m0"/><break time="1s"/>Hello.<break time="2s"/><mark name="a"/>'
        '<break time="1s"/><mark name="b"/></speak>',
    )
    assert text.styles[0].pause_ms == 1000 and text.styles[0].after_ms == 3000
    assert text.styles[0].marks == (("m0", 0, 1000), ("a", -1, 2000), ("b", -1, 3000))


@pytest.mark.parametrize(
    ("ssml", "expected"),
    [
        ("<speak>Hi <b>there</b></speak>", "line 1, column 11: <b> is not supported by model 'kokoro'"),
        ('<speak>Hi <prosody speed="2">x</prosody></speak>', "attribute 'speed' of <prosody> is not supported"),
        ("<speak>Hi <break time='20s'/></speak>", "break time '20s' is over 10 s"),
        ("<speak>\n  Hi <break time='soon'/></speak>", "line 2, column 6: break time 'soon' is not a duration"),
        ("<speak>Hi <say-as interpret-as='unit'>3kg</say-as></speak>", "interpret-as 'unit' is not supported"),
        ("<speak>Hi <say-as interpret-as='date' format='mdy'>40/40/2020</say-as></speak>", "no such month or day"),
        ("<speak>Hi <prosody pitch='120Hz'>x</prosody></speak>", "in Hz is not supported"),
        ("<speak>Hi <lang xml:lang='ko-KR'>x</lang></speak>", "model 'kokoro' does not speak 'ko-KR'"),
        ("<speak>Hi <amazon:effect name='whispered'>x</amazon:effect></speak>", "not well-formed XML (unbound prefix"),
        ("<speak>Hi <p>unclosed</speak>", "line 1, column 24: not well-formed XML (mismatched tag"),
        ("<speak><break/><mark name='x'/></speak>", "nothing to say"),
        ("<speak>" + "<break time='10s'/>x" * 13 + "</speak>", "breaks add up to more than 120 s"),
        ("<speak>" + "<s>" * 30 + "deep" + "</s>" * 30 + "</speak>", "nested more than 24 deep"),
    ],
)
def test_bad_ssml_is_refused_naming_the_place_and_the_problem(ssml, expected):
    assert expected in refusal(KOKORO, ssml)


def test_an_element_beyond_the_limit_is_refused_while_parsing():
    assert f"more than {MAX_ELEMENTS} elements" in refusal(KOKORO, "<speak>" + "<mark name='m'/>" * 3000 + "x</speak>")


BOMBS = {
    "billion laughs": '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10 if i > 1 else "&lol;" * 10}">' for i in range(1, 10))
    + "]><speak>&lol9;</speak>",
    "external entity": '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
    "<speak>&xxe;</speak>",
    "external dtd": '<?xml version="1.0"?><!DOCTYPE speak SYSTEM "http://127.0.0.1:9/evil.dtd"><speak>Hi</speak>',
    "parameter entity": '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY % p SYSTEM "http://127.0.0.1:9/x">%p;]>'
    "<speak>Hi</speak>",
    "quadratic blowup": '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY a "'
    + "a" * 5000
    + '">]><speak>'
    + "&a;" * 500
    + "</speak>",
}


@pytest.mark.parametrize("bomb", BOMBS, ids=list(BOMBS))
def test_xml_bombs_and_external_entities_are_refused_fast_with_flat_memory(bomb):
    tracemalloc.start()
    started = time.perf_counter()
    message = refusal(KOKORO, BOMBS[bomb])
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "are not allowed in SSML (no DTD, entity or external reference)" in message
    assert elapsed < 0.5 and peak < 5_000_000, (elapsed, peak)


def test_only_the_characters_spoken_are_billed_and_a_break_costs_nothing():
    plain = KOKORO.prepare("Hello world.", ssml=True)
    marked = KOKORO.prepare(
        '<speak version="1.0" xml:lang="en-US"><p>Hello <break time="3s"/><mark name="m"/>world.</p></speak>',
        ssml=True,
    )
    assert plain.spoken_chars == marked.spoken_chars == len("Hello world.")
    alias = KOKORO.prepare('<speak><sub alias="World Wide Web">WWW</sub></speak>', ssml=True)
    assert alias.spoken_chars == len("World Wide Web")


def test_two_spellings_of_the_same_speech_share_a_cache_text_and_different_pauses_do_not():
    one = prepared(KOKORO, "<speak>Hello there. How are you?</speak>")
    two = prepared(KOKORO, "<speak><s>Hello there.</s> <s>How are you?</s></speak>")
    longer = prepared(KOKORO, '<speak>Hello there. <break time="2s"/>How are you?</speak>')
    key = lambda t: segments_text(t.segments, tuple(s.as_dict() for s in t.styles))  # noqa: E731
    assert key(one) == key(two) != key(longer)


def test_a_twilio_fragment_without_speak_is_taken_with_input_format_ssml():
    text = prepared(KOKORO, 'Hi <break time="200ms"/> there')
    assert text.segments == ("Hi", "there") and text.styles[1].pause_ms == 200


def test_lines_and_columns_are_the_inputs_as_sent_with_leading_lines_and_without_speak():
    assert "line 3, column 10: break time 'soon'" in refusal(KOKORO, "\n\n  <speak><break time='soon'/></speak>")
    assert "line 1, column 4: break time 'soon'" in refusal(KOKORO, "Hi <break time='soon'/>")
    assert "line 2, column 1: <b> is not supported" in refusal(KOKORO, "Hi\n<b>x</b>")


def test_kokoro_takes_ipa_in_its_own_symbols_and_refuses_a_symbol_it_cannot_read_by_name():
    text = prepared(
        KOKORO,
        '<speak><phoneme alphabet="ipa" ph="t͡ʃiːz">cheese</phoneme> and <phoneme ph="gʊd">good</phoneme></speak>',
    )
    assert text.segments == ("[cheese](/ʧiːz/) and [good](/ɡʊd/)",)
    message = refusal(KOKORO, '<speak><phoneme alphabet="ipa" ph="ʘaʘ">click</phoneme></speak>')
    assert "line 1, column 8" in message and "symbols model 'kokoro' does not read: ʘ" in message


def test_a_break_before_punctuation_keeps_its_pause_on_the_words_after_it():
    text = prepared(KOKORO, '<speak>Hello<break time="700ms"/>, world.</speak>')
    assert text.segments == ("Hello,", "world.") and text.styles[1].pause_ms == 700


def test_a_break_before_nothing_to_say_is_kept_and_added_to_the_next():
    alone = prepared(KOKORO, '<speak>Hello<break time="3s"/>.</speak>')
    assert alone.segments == ("Hello.",) and alone.styles[0].after_ms == 3000
    two = prepared(KOKORO, '<speak>Hello <break time="3s"/> ... <break time="2s"/> world.</speak>')
    assert two.segments[-1] == "world." and two.styles[-1].pause_ms == 5000


def test_what_a_span_says_counts_in_the_segments_length():
    call = 'Call <say-as interpret-as="telephone">+1 (555) 010-0199</say-as>. '
    text = prepared(CHATTTS, "<speak>" + call * 12 + "</speak>")
    assert len(text.segments) > 1  # packed by what is said, not by one character a span


def test_the_text_outside_lang_spans_is_still_checked_for_the_models_languages():
    with pytest.raises(TextError, match="the input has Russian"):
        CHATTTS.prepare('<speak><lang xml:lang="en">x</lang> Привет</speak>', ssml=True)


@pytest.mark.parametrize(
    ("ssml", "needle"),
    [
        ('<say-as interpret-as="date" format="y">' + "9" * 300 + "</say-as>", "years of up to 4 digits"),
        ('<say-as interpret-as="currency">$1e14</say-as>', "not an amount"),
        ('<say-as interpret-as="characters">--</say-as>', "nothing to say"),
        ('<mark name="' + "m" * 200 + '"/>x', "at most 128 characters"),
        ("<mark name='m'/>" * 501 + "x", "more than 500 marks"),
    ],
)
def test_say_as_and_marks_beyond_their_bounds_are_400s_not_errors(ssml, needle):
    assert needle in refusal(KOKORO, "<speak>Hi " + ssml + "</speak>")


def test_currency_a_language_cannot_name_is_said_as_the_number_and_its_code():
    text = prepared(KOKORO, '<speak xml:lang="pt-BR">Olá <say-as interpret-as="currency">12.50 USD</say-as>.</speak>')
    assert "USD" in text.segments[0] or "dólares" in text.segments[0]


def test_a_phoneme_is_billed_by_what_it_says_and_nested_volume_is_bounded():
    long = "həlˈO" * 20
    billed = KOKORO.prepare(f'<speak><phoneme alphabet="ipa" ph="{long}">a</phoneme></speak>', ssml=True).spoken_chars
    assert billed >= 80
    loud = '<prosody volume="+20dB">' * 4 + "x" + "</prosody>" * 4
    assert prepared(KOKORO, f"<speak>{loud}</speak>").styles[0].volume_db == 20.0


def test_a_lexicon_cannot_forge_a_mark():
    text = prepared(KOKORO, "<speak>Hello world.</speak>", lexicon=lambda t: t.replace("world", "world\U000f0003"))
    assert text.segments == ("Hello world.",) and text.styles[0].marks == ()
