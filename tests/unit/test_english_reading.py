"""English read right where WeTextProcessing's grammars read it wrong (`inference.text.english`):
what the worker gives the model to read, for the cases listening found."""

from __future__ import annotations

import pytest

from inference.text.english import before
from inference.text.preparation import normalize, split_sentences


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("She lives on Elm St. near the park.", "She lives on Elm Street near the park."),
        ("Turn left at 5th St. and stop.", "Turn left at fifth Street and stop."),
        ("St. Louis is a city.", "Saint Louis is a city."),
        ("We met Dr. Smith on Oak Dr. today.", "We met doctor Smith on Oak Drive today."),
        (
            "The price is $1,299.99 today.",
            "The price is one thousand two hundred ninety-nine dollars and ninety-nine cents today.",
        ),
        ("A coffee is $1.01.", "A coffee is one dollar and one cent."),
        ("It costs €3.50 or £2.05.", "It costs three euros and fifty cents or two pounds and five pence."),
        ("It costs $5.00.", "It costs five dollars."),
        ("Meet me at 9:30 a.m. tomorrow.", "Meet me at nine thirty A.M. tomorrow."),
        ("Mr. and Mrs. Jones arrived at 3 p.m.", "Mister and Misses Jones arrived at three P.M."),
    ],
)
def test_what_the_grammars_misread_is_read_as_people_say_it(text, read):
    assert normalize(text) == read


def test_a_saint_or_a_street_by_what_stands_around_it():
    assert before("Visit St. Paul's on Main St. today.") == "Visit Saint Paul's on Main Street today."
    assert before("the st. is quiet") == "the st. is quiet"  # neither: left to the grammars


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("She lives on Elm St. near the park. It is nice.", ["She lives on Elm St. near the park.", "It is nice."]),
        ("We met Dr. Smith at 9 a.m. Then we left.", ["We met Dr. Smith at 9 a.m.", "Then we left."]),
        ("J. R. R. Tolkien wrote it. Yes!", ["J. R. R. Tolkien wrote it.", "Yes!"]),
        ("Use a brush, e.g. a soft one. Done.", ["Use a brush, e.g. a soft one.", "Done."]),
        ("No. It is not.", ["No.", "It is not."]),
        ("你好。再见。", ["你好。", "再见。"]),
    ],
)
def test_a_full_stop_after_a_title_or_an_initial_or_before_a_lowercase_word_ends_no_sentence(text, sentences):
    assert split_sentences(text) == sentences
