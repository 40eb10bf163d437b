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


def test_the_rules_are_part_of_the_model_version():
    assert g2p.english_pipeline() == "blank"  # what this suite runs: en_core_web_sm is not on PyPI
    assert f"spacy-blank-{heteronyms.VERSION}" in g2p.versions()
