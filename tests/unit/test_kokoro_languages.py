"""Kokoro's other languages without a model: Spanish, French, Hindi, Italian and Brazilian
Portuguese through espeak-ng, Japanese through MeCab (unidic-lite), all offline; which G2P reads
which script; numbers spelled out in the row's language; a request's `lang` as the row's language;
the spec's voices and languages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from inference.kokoro import g2p, japanese
from inference.kokoro.g2p import phonemize
from inference.kokoro.languages import LANGUAGES, kokoro_language
from inference.kokoro.params import KokoroParams
from inference.kokoro.phonemes import VOCAB
from inference.kokoro.spec import SPEC
from inference.kokoro.text import assemble, is_word, read
from inference.text.preparation import TextError
from tests.unit.test_kokoro_text import no_network

ROOT = Path(__file__).resolve().parents[2]

SENTENCES = {
    "es": ("Tengo tres gatos y un perro.", ["Tengo", "tres", "gatos", "y", "un", "perro"]),
    "fr": ("Les amis sont arrivés, c'est vrai.", ["Les", "amis", "sont", "arrivés", "c'est", "vrai"]),
    "hi": ("नमस्ते, आप कैसे हैं?", ["नमस्ते", "आप", "कैसे", "हैं"]),
    "it": ("Ciao, come stai oggi?", ["Ciao", "come", "stai", "oggi"]),
    "pt-br": ("Olá, tudo bem com você?", ["Olá", "tudo", "bem", "com", "você"]),
    "ja": ("私は東京に行きました。", ["私", "は", "東京", "に", "行き", "ました"]),
}


@pytest.fixture(scope="module", autouse=True)
def offline():
    with no_network():
        yield


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_each_language_reads_a_sentence_word_by_word_in_kokoros_phonemes(language):
    text, expected = SENTENCES[language]
    tokens = phonemize(text, "en-us", language)
    spoken = [t for t in tokens if is_word(t)]
    assert [t.text for t in spoken] == expected  # the words as written: their timings follow them
    assert all(t.phonemes for t in spoken)
    assert all(ch in VOCAB for t in tokens for ch in t.phonemes)


def test_espeak_ng_reads_each_language_with_its_own_sounds():
    def said(text, language):
        return " ".join(t.phonemes for t in phonemize(text, "en-us", language))

    assert "ɾ" in said("pero", "es") and "ʁ" in said("Paris", "fr")
    assert said("gatos", "es") != said("gatos", "pt-br")  # the same letters, two languages
    # Liaison: the clause is read whole, "les amis" keeps its z.
    assert [t.phonemes for t in phonemize("les amis", "en-us", "fr")][0].endswith("z")


def test_punctuation_stays_a_pause_and_spanish_opening_marks_are_not_read():
    tokens = phonemize("¡Hola! ¿Qué tal?", "en-us", "es")
    assert [t.text for t in tokens] == ["Hola", "!", "Qué", "tal", "?"]


def test_a_hindi_number_is_one_word_read_by_espeak_ng():
    tokens = phonemize("मेरे पास 25 किताबें हैं।", "en-us", "hi")
    twenty_five = next(t for t in tokens if t.text == "25")
    assert twenty_five.phonemes and twenty_five.phonemes.isascii() is False  # Hindi, not English digits
    assert tokens[-1].phonemes == "."  # the danda: a full stop


@pytest.mark.parametrize("text", ["学校に行った。", "ちょっと待って！", "こんにちは、今日はいい天気ですね。"])
def test_japanese_gives_the_phonemes_of_misakis_own_japanese_g2p(text):
    """KPipeline's Japanese path (JAG2P's cutlet) reads the text as one string; ours keeps its
    words apart and gives the same phonemes."""
    from misaki.cutlet import Cutlet  # noqa: PLC0415  (the reference, as KPipeline builds it)

    tokens = phonemize(text, "en-us", "ja")
    assert assemble(tokens).phonemes == Cutlet()(text)[0]
    assert "".join(t.text for t in tokens if is_word(t)) == "".join(ch for ch in text if ch.isalnum())


def test_a_script_only_one_language_uses_goes_to_its_g2p_whatever_the_voice():
    english_row = phonemize("I love こんにちは.", "en-us", "en-us")
    assert [t.text for t in english_row if is_word(t)] == ["I", "love", "こんにちは"]
    assert english_row[2].phonemes == "koɲɲiʨiβa"  # kana: Japanese
    hindi = phonemize("नमस्ते दोस्त", "en-us", "es")
    assert hindi == phonemize("नमस्ते दोस्त", "en-us", "hi")  # Devanagari: Hindi
    # Han characters alone: Mandarin, unless the row is Japanese (or kana is beside them).
    assert phonemize("東京", "en-us", "zh")[0].phonemes != phonemize("東京", "en-us", "ja")[0].phonemes
    assert phonemize("東京", "en-us", "ja")[0].phonemes == "toːkʲoː"


def test_latin_script_is_read_in_the_rows_language():
    spanish = phonemize("Hola amigo", "en-us", "es")
    english = phonemize("Hola amigo", "en-us", "en-us")
    assert [t.text for t in spanish] == [t.text for t in english] == ["Hola", "amigo"]
    assert spanish != english
    # Japanese, Hindi and Mandarin rows read Latin script as English (in the voice's accent).
    assert phonemize("Hello there", "en-gb", "ja") == phonemize("Hello there", "en-gb")
    assert phonemize("Hello there", "en-us", "hi") == phonemize("Hello there", "en-us")


def test_a_phoneme_link_gives_a_words_phonemes_in_every_language():
    for language in ("es", "ja"):
        tokens = phonemize("Hola [Kokoro](/kˈOkəɹO/) amigo.", "en-us", language)
        assert ("Kokoro", "kˈOkəɹO") in [(t.text, t.phonemes) for t in tokens]


def test_a_fresh_process_phonemizes_spanish_hindi_and_japanese_offline():
    """Nothing cached: espeak-ng's data and MeCab's dictionary load with the network blocked."""
    code = (
        "import json\n"
        "from tests.unit.test_kokoro_text import no_network\n"
        "with no_network():\n"
        "    from inference.kokoro import g2p\n"
        "    cases = (('Hola, amigo.', 'es'), ('नमस्ते', 'hi'), ('こんにちは。', 'ja'))\n"
        "    print(json.dumps([[t.phonemes for t in g2p.phonemize(s, 'en-us', lang)] for s, lang in cases]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    spanish, hindi, japanese_ = json.loads(result.stdout.strip().splitlines()[-1])
    assert spanish[0] == "ˈola" and hindi[0] and japanese_[0] == "koɲɲiʨiβa"


def test_the_model_version_names_the_new_g2p_packages():
    version = g2p.versions()
    for package in ("fugashi-1.5.2", "unidic-lite-1.0.8", "jaconv-0.5.0", "mojimoji-0.0.13", "phonemizer-fork"):
        assert package in version


@pytest.mark.parametrize(
    "segment, language, spoken",
    [
        ("Tengo 3 gatos.", "es", "Tengo tres gatos."),
        ("Cuesta 21 €.", "es", "Cuesta veintiún euros."),
        ("Il coûte 21 € à 14h.", "fr", "Il coûte vingt et un euros à quatorze heures."),
        ("Le 12/05/2024.", "fr", "Le douze mai deux mille vingt-quatre."),
        ("Ho 3 gatti, il 25% alle 9:15.", "it", "Ho tre gatti, il venticinque per cento alle nove e quindici."),
        ("Custa R$ 21,50.", "pt-br", "Custa vinte e um reais e cinquenta centavos."),
        ("Em 1º de maio, 3 gatos.", "pt-br", "Em primeiro de maio, três gatos."),
        ("今日は5月3日です。", "ja", "今日は五月三日です。"),
        ("今日は5月3日です。", "", "今日は五月三日です。"),  # kana: Japanese, whatever the voice
        ("मेरे पास 25 किताबें हैं।", "hi", "मेरे पास 25 किताबें हैं।"),  # espeak-ng says Hindi's digits
        ("I have 3 cats.", "", "I have three cats."),  # English: the grammars every engine uses
        ("I have 3 cats.", "ja", "I have three cats."),  # Latin script in a Japanese row: English
        ("我有3个苹果。", "es", "我有三个苹果."),  # Han characters: Chinese grammars
    ],
)
def test_numbers_money_and_dates_are_spelled_out_in_the_language_that_reads_them(segment, language, spoken):
    assert read(segment, language) == spoken


def test_a_phoneme_link_is_kept_as_written_in_every_language():
    assert read("Tengo 3 [gatos](/ɣˈatos/).", "es") == "Tengo tres [gatos](/ɣˈatos/)."


def test_japanese_is_refused_by_name_where_its_g2p_is_not_installed(monkeypatch):
    monkeypatch.setattr(japanese, "missing", lambda: ["fugashi", "unidic-lite"])
    with pytest.raises(TextError, match="Japanese.*fugashi, unidic-lite"):
        read("こんにちは、2人です。", "")
    assert read("Hola, 2 gatos.", "es") == "Hola, dos gatos."  # other languages are unaffected


@pytest.mark.parametrize(
    "tag, language",
    [
        ("es", "es"),
        ("es-ES", "es"),
        ("ES-mx", "es"),
        ("fr-FR", "fr"),
        ("fr_CA", "fr"),
        ("pt-BR", "pt-br"),
        ("pt", "pt-br"),
        ("en-GB", "en-gb"),
        ("en-US", "en-us"),
        ("ja-JP", "ja"),
        ("hi-IN", "hi"),
        ("it", "it"),
        ("zh-CN", "zh"),
        ("zh-Hans", "zh"),
    ],
)
def test_an_xml_lang_tag_is_one_of_kokoros_languages(tag, language):
    assert kokoro_language(tag) == language


def test_english_without_a_region_keeps_the_voices_accent_and_no_tag_is_none():
    assert kokoro_language("en", "en-gb") == "en-gb" and kokoro_language("en") == "en-us"
    assert kokoro_language(None) is None and kokoro_language("") is None


@pytest.mark.parametrize("tag", ["ko-KR", "de", "klingon", "x"])
def test_a_language_kokoro_does_not_speak_is_refused_naming_it_and_kokoros(tag):
    with pytest.raises(ValueError) as refused:
        kokoro_language(tag)
    message = str(refused.value)
    assert repr(tag) in message and "Spanish (es)" in message and "Japanese (ja)" in message


def test_a_requests_lang_sets_the_rows_language():
    french = KokoroParams.from_request({"lang": "fr-FR"}, {"builtin": "af_heart"}, seed=0)
    assert french.language == "fr" and french.reading == "fr" and french.english == "en-us"
    british = KokoroParams.from_request({"lang": "en-GB"}, {"builtin": "ef_dora"}, seed=0)
    assert british.reading == "en-gb" and british.english == "en-gb"
    with pytest.raises(ValueError, match="'ko'"):
        KokoroParams.from_request({"lang": "ko"}, {"builtin": "af_heart"}, seed=0)


def test_without_lang_or_with_the_voices_own_the_row_reads_in_the_voices_language():
    plain = KokoroParams.from_request({}, {"builtin": "ef_dora"}, seed=0)
    assert plain.language == "" and plain.reading == "es"
    assert KokoroParams.from_request({"lang": "es-ES"}, {"builtin": "ef_dora"}, seed=0) == plain  # one cache key
    assert KokoroParams.from_request({}, {"builtin": "bf_emma"}, seed=0).reading == "en-gb"
    assert KokoroParams.from_request({}, {"builtin": "jf_alpha"}, seed=0).reading == "ja"
    mix = KokoroParams.from_request({}, {"mix": [["pf_dora", 3], ["af_heart", 1]]}, seed=0)
    assert mix.reading == "pt-br" and mix.english == "en-us"  # the heaviest voice's language
    with pytest.raises(ValueError):
        KokoroParams(voice=(("af_heart", 1.0),), language="de")


def test_the_spec_lists_kokoro_v1s_54_voices_and_their_languages():
    ids = [v.id for v in SPEC.voices]
    assert len(ids) == 54 and len(set(ids)) == 54
    others = [v for v in SPEC.voices if v.id[0] in "efhijp"]
    assert sorted(v.id for v in others) == sorted(
        "ef_dora em_alex em_santa ff_siwis hf_alpha hf_beta hm_omega hm_psi if_sara im_nicola jf_alpha "
        "jf_gongitsune jf_nezumi jf_tebukuro jm_kumo pf_dora pm_alex pm_santa".split()
    )
    assert {v.language for v in SPEC.voices} == set(LANGUAGES)
    assert SPEC.voice("ff_siwis").description == "French, female (Siwis)."
    assert SPEC.languages == ("en", "zh", "es", "fr", "hi", "it", "ja", "pt")


def test_the_web_accepts_kana_and_devanagari_for_kokoro_and_still_refuses_korean():
    assert SPEC.prepare("こんにちは").segments == ("こんにちは",)
    assert SPEC.prepare("नमस्ते, आप कैसे हैं?").segments
    with pytest.raises(TextError, match="Korean"):
        SPEC.prepare("안녕하세요")
