"""English heteronyms read by the word before them where no tagger is installed
(`inference.kokoro.heteronyms`): what misaki is given to read, in Kokoro's phonemes."""

from __future__ import annotations

import pytest

from inference.kokoro import g2p, heteronyms


def phonemes(text: str) -> str:
    return " ".join(t.phonemes for t in g2p.phonemize(text, "en-us", ""))


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("He lives here.", "lˈɪvz"),  # the verb
        ("Their lives changed.", "lˈIvz"),  # the noun
        ("I live in Paris.", "lˈɪv"),
        ("A live show.", "lˈIv"),
        ("I have read the book.", "ɹˈɛd"),  # past participle
        ("I like to read.", "ɹˈid"),
        ("We will present it.", "pɹizˈɛnt"),
        ("A present for you.", "pɹˈɛzᵊnt"),
        ("The use of force.", "jˈus"),
        ("Do not use it.", "jˈuz"),
        ("They object to it.", "əbʤˈɛkt"),
        ("The wound was deep.", "wˈund"),
        ("She had wound the clock.", "wˈWnd"),
    ],
)
def test_a_heteronym_is_read_by_the_word_before_it(text, reading):
    assert reading in phonemes(text).split()


@pytest.mark.parametrize(
    ("text", "word", "reading"),
    [
        ("I have a cat.", "a", "ɐ"),  # the article, not the letter's name "ay"
        ("A coffee at the station.", "A", "ɐ"),
        ("Plan A is good.", "A", "ˈA"),  # a letter
        ("Grade A students.", "A", "ˈA"),
        ("We live in Paris.", "in", "ɪn"),  # a preposition, unstressed
        ("Come in.", "in", "ˈɪn"),
        ("Log in to your account.", "in", "ˈɪn"),  # a particle: stressed
    ],
)
def test_the_article_and_a_preposition_are_read_as_function_words(text, word, reading):
    assert [t.phonemes for t in g2p.phonemize(text, "en-us", "") if t.text == word] == [reading]


def test_the_rules_are_part_of_the_model_version():
    assert g2p.english_pipeline() == "blank"  # what this suite runs: en_core_web_sm is not on PyPI
    assert f"spacy-blank-{heteronyms.VERSION}" in g2p.versions()
