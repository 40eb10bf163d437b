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
        # Dates month first, as written (the grammars said "the first of january , two thousand").
        ("On Jan. 1, 2000, the clocks kept working.", "On January first, two thousand, the clocks kept working."),
        ("She was born on March 3rd, 1987.", "She was born on March third, nineteen eighty-seven."),
        ("The vote is on Nov. 8 this year.", "The vote is on November eighth this year."),
        ("The deadline is 12/24/2026.", "The deadline is December twenty-fourth, twenty twenty-six."),
        ("It opened on 24/12/2005.", "It opened on December twenty-fourth, two thousand five."),
        # Grouped thousands whole (the grammars dropped the "one"), no "and" inside numbers.
        ("The building has 1,200 windows.", "The building has one thousand two hundred windows."),
        ("The road is 1,500 km long.", "The road is one thousand five hundred kilometers long."),  # with its unit
        ("He paid 350 pounds for 101 days.", "He paid three hundred fifty pounds for one hundred one days."),
        ("A hundred and fifty came, then 150 more.", "A hundred and fifty came, then one hundred and fifty more."),
        ("Overnight it fell to -5°C.", "Overnight it fell to minus five degrees Celsius."),
        (
            "Bake it at 180°C, or 356 °F.",
            "Bake it at one hundred eighty degrees Celsius, or three hundred fifty-six degrees Fahrenheit.",
        ),
        ("Use a brush, e.g. a paintbrush.", "Use a brush, for example a paintbrush."),
        ("I.e. the short one.", "That is the short one."),
        ("Bring snacks, drinks, etc.", "Bring snacks, drinks, et cetera."),
        ("Bring drinks, etc. to the park.", "Bring drinks, et cetera to the park."),
        ("Queen Elizabeth II visited.", "Queen Elizabeth the second visited."),
        (
            "Henry VIII had six wives; Pope John Paul II too.",
            "Henry the eighth had six wives; Pope John Paul the second too.",
        ),
        ("World War II ended in 1945.", "World War two ended in nineteen forty five."),
        ("Louis I think so.", "Louis I think so."),
        # Phone numbers digit by digit in their groups; a range of pages stays a range.
        ("Call us at 555-0100 for help.", "Call us at five five five, zero one zero zero for help."),
        ("Call 1-800-555-0199 today.", "Call one, eight zero zero, five five five, zero one nine nine today."),
        ("Her number is (212) 555-7890.", "Her number is two one two, five five five, seven eight nine zero."),
        ("Dial +44 20 7946 0958.", "Dial plus four four, two zero, seven nine four six, zero nine five eight."),
        ("Read pages 100-1000.", "Read pages one hundred to one thousand."),
        ("We expect 500-1000 people.", "We expect five hundred to one thousand people."),  # no phone nearby
        ("My number is 555-0100.", "My number is five five five, zero one zero zero."),
        ("Born between 1999-2000.", "Born between nineteen ninety-nine and two thousand."),
        # Ranges of years, hours and minutes, dates written day first.
        ("The years 1990-2000 were good.", "The years nineteen ninety to two thousand were good."),
        ("It lasts 10 hrs on a charge.", "It lasts ten hours on a charge."),
        ("Wait 1 hr, then 30 secs.", "Wait one hour, then thirty seconds."),
        ("We moved here on 5 May 2019.", "We moved here on the fifth of May, twenty nineteen."),
        ("Open until 5 May.", "Open until the fifth of May."),
        ("I saw 5 May flowers.", "I saw five May flowers."),
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
