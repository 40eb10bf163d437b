"""Pronunciation lexicon matching (synthesis.lexicon): whole words, case rules, longest first in
one pass, CJK entries matched anywhere, precedence when lexicons are merged, entry validation."""

from __future__ import annotations

import time

from voices.lexicon import Entry, Matcher, apply, merged, problem


def test_whole_words_only():
    entries = [Entry("SQL", "sequel"), Entry("3M", "three em")]
    assert apply("SQL, (SQL) and MySQL", entries) == "sequel, (sequel) and MySQL"
    assert apply("3M's 13M 3Ms", entries) == "three em's 13M 3Ms"


def test_case_insensitive_unless_the_entry_says_otherwise():
    entries = [Entry("nginx", "engine x"), Entry("Tsinghua", "Ching-hwa", case_sensitive=True)]
    assert apply("NGINX, Nginx and nginx", entries) == "engine x, engine x and engine x"
    assert apply("Tsinghua, not tsinghua", entries) == "Ching-hwa, not tsinghua"


def test_the_longest_entry_wins_and_aliases_are_not_matched_again():
    entries = [Entry("New York", "NY"), Entry("New York City", "the big apple"), Entry("NY", "New York")]
    assert apply("New York City, New York, NY", entries) == "the big apple, NY, New York"


def test_cjk_entries_match_inside_cjk_text():
    assert apply("我在北京工作", [Entry("北京", "首都")]) == "我在首都工作"


def test_entries_with_symbols_are_literal():
    entries = [Entry("C++", "C plus plus"), Entry("v2.0", "version two"), Entry("a.b", "x")]
    assert apply("C++ and v2.0, not v2x0 or aXb", entries) == "C plus plus and version two, not v2x0 or aXb"


def test_the_first_lexicon_wins_for_the_same_text():
    first = [Entry("Acme", "ack-me")]
    default = [Entry("acme", "ak-mee"), Entry("GIF", "jif")]
    assert apply("ACME GIF", merged([first, default])) == "ack-me jif"


def test_entry_validation():
    assert problem("Acme", "ack-me") is None
    assert problem("", "x") and problem(" Acme", "x") and problem("Acme", "  ")
    assert problem("a" * 101, "x") and problem("Acme", "x" * 201)
    assert problem("Ac\nme", "x") and problem(5, "x")


def test_latin_entries_match_between_cjk_characters_and_symbol_edges_respect_words():
    entries = [Entry("SQL", "sequel"), Entry(".NET", "dot net"), Entry("C++", "C plus plus")]
    assert apply("我用SQL查询", entries) == "我用sequel查询"
    assert apply("use .NET, not ASP.NET", entries) == "use dot net, not ASP.NET"
    assert apply("C++ and C++x", entries) == "C plus plus and C++x"


def test_runs_of_white_space_match_any_white_space():
    assert apply("New\n  York", [Entry("New York", "NY")]) == "NY"


def test_thousands_of_entries_cost_time_in_the_text_not_in_the_entries():
    entries = [Entry(f"term{i}", f"alias {i}") for i in range(20_000)]
    text = "Some words with term123 and TERM19999 in them. " * 90  # ~4,300 characters
    started = time.perf_counter()
    spoken = Matcher(entries).apply(text)
    assert time.perf_counter() - started < 1.0  # a regex of 20,000 alternatives took minutes
    assert spoken.count("alias 123") == 90 and spoken.count("alias 19999") == 90
