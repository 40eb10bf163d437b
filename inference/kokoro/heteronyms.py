"""English heteronyms read by the words before them, where no part-of-speech tagger is installed.

misaki reads a heteronym by its spaCy tag ("lives": the noun /lIvz/ by default, the verb /lɪvz/ for
a verb tag; "read": /ɹid/, or /ɹɛd/ for a past tense). The blank spaCy pipeline (what runs where
`en_core_web_sm` cannot be installed: it is not on PyPI) tags nothing, so every heteronym took its
default reading: "He lives here" was read with the noun's vowel. These rules tag the heteronyms
misaki knows from the word before them: after a subject pronoun, "to", a modal or a negation a verb;
after a determiner or a possessive a noun; "read" and "wound" after a form of "have" or "be" a past
participle. Anything else keeps misaki's default. Measured in tests/unit/test_kokoro_heteronyms.py
(what is read) and by ear with bench/intelligibility.py.

Function words misaki also reads by their tag: the article "a" is /ɐ/ only when tagged a determiner,
else the letter's name, stressed (/ˈA/, "ay"): untagged, every "a" was said "ay" ("on ay full charge",
heard "on A4 charge"). It is the article where a word follows it, lowercase anywhere, capital at a
sentence's start ("Plan A is", "vitamin A" stay letters). "in" before a word is a preposition, said
without stress (untagged, every "in" was stressed).
"""

from __future__ import annotations

VERSION = "heteronyms-3"  # part of the model version (g2p.versions): change it with a rule

VERB_BEFORE = frozenset(
    "i you we they he she it who to will would can could should shall must may might not never "
    "don't doesn't didn't won't can't cannot also often always usually".split()
)
NOUN_BEFORE = frozenset("the a an this that these those my your his her its our their no any some every each".split())
PARTICIPLE_BEFORE = frozenset("have has had having was were been be is are am being".split())
# misaki's heteronyms whose readings split by verb or noun (its gold lexicon's tag-keyed entries).
BY_VERB = frozenset(
    "lives live record records present presents close closes use uses wind winds tear tears object objects "
    "permit permits project projects desert deserts refuse conduct increase increases produce content".split()
)
BY_TENSE = frozenset({"read", "wound"})
HETERONYMS = BY_VERB | BY_TENSE


def tag(mtokens) -> None:
    """Give the heteronyms and the function words among misaki's tokens a tag from the words around
    them (in place)."""
    previous = ""  # the word before, lowercase ("" at a sentence's start)
    for i, tk in enumerate(mtokens):
        word = tk.text.lower()
        if not tk.tag and word in HETERONYMS:
            if word in BY_TENSE and previous in PARTICIPLE_BEFORE:
                tk.tag = "VBN"
            elif word in BY_VERB and previous in VERB_BEFORE:
                tk.tag = "VBZ" if word.endswith("s") and previous not in ("i", "you", "we", "they") else "VB"
            elif word in BY_VERB and previous in NOUN_BEFORE:
                tk.tag = "NNS" if word.endswith("s") else "NN"
        elif not tk.tag and word in ("a", "in") and _word_follows(mtokens, i):
            if tk.text == "a" or (tk.text == "A" and not previous):
                tk.tag = "DT"
            elif word == "in" and previous not in PARTICLE_VERBS:  # "log in to", "came in at": stressed
                tk.tag = "IN"
        if any(c.isalnum() for c in tk.text):
            previous = word
        elif tk.text in SENTENCE_ENDS:
            previous = ""


SENTENCE_ENDS = frozenset([".", "!", "?", "…", "..."])
# Verbs whose "in" is a particle, stressed ("log in", "sign in", "check in", "came in").
PARTICLE_VERBS = frozenset(
    "log logs logged logging sign signs signed signing check checks checked checking plug plugs plugged "
    "come comes came coming give gives gave giving break breaks broke fill fills filled fit fits fitted "
    "move moves moved drop drops dropped tune tuned turn turns turned hand hands handed".split()
)


def _word_follows(mtokens, i: int) -> bool:
    """Whether the token after `i` is a word (not punctuation, not the end)."""
    return i + 1 < len(mtokens) and any(c.isalpha() for c in mtokens[i + 1].text)
