"""Inline control tags in `input`: exactly the documented ones pass (case-sensitive); every other
tag is refused by name, above all ChatTTS's own special tokens ([Stts], [spk_emb], ...), which
steer the model and must never come from a user, however they are written."""

from __future__ import annotations

import pytest

from inference.chattts.spec import INLINE_TAGS
from inference.chattts.spec import SPEC as CHATTTS
from inference.kokoro.spec import SPEC as KOKORO
from inference.text import preparation as text_module
from inference.text.preparation import TextError, normalize_segment

prepare = CHATTTS.prepare


def read(segment: str) -> str:
    """What ChatTTS reads of a segment (its engine's `read`, without loading the model)."""
    return normalize_segment(segment, INLINE_TAGS, "chattts")


# ChatTTS's tokenizer's special tokens that are not user tags.
CHATTTS_SPECIAL = [
    "[Sasr]",
    "[Pasr]",
    "[Easr]",
    "[Stts]",
    "[Ptts]",
    "[Etts]",
    "[Sbreak]",
    "[Pbreak]",
    "[Ebreak]",
    "[spk_emb]",
    "[empty_spk]",
    "[music]",
    "[pure]",
    "[undefine]",
]


@pytest.fixture(autouse=True)
def fresh_prepare():
    text_module.prepare.cache_clear()  # memoised: a test that patches normalize must not see another's result
    normalize_segment.cache_clear()
    yield
    text_module.prepare.cache_clear()
    normalize_segment.cache_clear()


@pytest.mark.parametrize("tag", CHATTTS_SPECIAL + ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
def test_the_models_special_tokens_are_refused_by_name(tag):
    with pytest.raises(TextError) as refused:
        prepare(f"Hello {tag} world.")
    assert tag in str(refused.value)


@pytest.mark.parametrize(
    "tag", ["[UV_BREAK]", "[Uv_break]", "[Break_1]", "[LAUGH]", "[Laugh_0]", "[ORAL_2]", "[V_break]", "[lBreak]"]
)
def test_tags_are_case_sensitive(tag):
    with pytest.raises(TextError, match=rf"\{tag[:-1]}\]"):
        prepare(f"Hello {tag} world.")


@pytest.mark.parametrize("tag", ["[break_10]", "[break_8]", "[laugh_3]", "[oral_10]", "[oral_99]", "[uv_break_1]"])
def test_numbers_outside_the_documented_ranges_are_refused(tag):
    with pytest.raises(TextError, match=rf"\{tag[:-1]}\]"):
        prepare(f"Hello {tag} world.")


@pytest.mark.parametrize(
    "written, seen",
    [
        ("\uff3bPtts\uff3d", "[Ptts]"),  # full-width brackets
        ("[\uff30tts]", "[Ptts]"),  # a full-width letter
        ("[P\u200btts]", "[Ptts]"),  # split by a zero-width space
        ("[\u200bStts\u200d]", "[Stts]"),
    ],
)
def test_a_special_token_in_disguise_is_refused(written, seen):
    with pytest.raises(TextError, match=rf"\{seen[:-1]}\]"):
        prepare(f"Hello {written} world.")


def test_the_refusal_lists_the_allowed_tags():
    with pytest.raises(TextError) as refused:
        prepare("Hello [Stts] world.")
    message = str(refused.value)
    assert all(tag in message for tag in INLINE_TAGS)
    assert "case-sensitive" in message


@pytest.mark.parametrize("tag", sorted(INLINE_TAGS))
def test_every_documented_tag_passes_verbatim(tag):
    (segment,) = prepare(f"Hello {tag} world.").segments
    assert tag in read(segment)  # what the model reads


def test_brackets_that_are_not_tags_stay_text():
    prepare("See note [1] and [the appendix], then go on.")


def test_a_tag_that_normalisation_would_produce_is_refused(monkeypatch):
    monkeypatch.setattr(text_module, "normalize", lambda text: "Hello [Stts] world.")
    (segment,) = prepare("Hello world.").segments
    with pytest.raises(TextError, match=r"\[Stts\]"):
        read(segment)


@pytest.mark.parametrize("tag", ["[laugh]", "[uv_break]", "[Stts]"])
def test_a_model_without_inline_tags_refuses_every_tag_naming_itself(tag):
    with pytest.raises(TextError) as refused:
        KOKORO.prepare(f"Hello {tag} world.")
    assert tag in str(refused.value) and "'kokoro'" in str(refused.value)


def test_a_phoneme_link_is_not_a_tag():
    (segment,) = KOKORO.prepare("Say [Kokoro](/kˈOkəɹO/) twice.").segments
    assert "[Kokoro](/kˈOkəɹO/)" in segment


def test_a_phoneme_link_stays_in_its_sentence():
    assert KOKORO.prepare("Say [Kokoro](/kˈOkəɹO/) twice. Then stop.").segments == (
        "Say [Kokoro](/kˈOkəɹO/) twice.",
        "Then stop.",
    )
