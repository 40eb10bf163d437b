"""Kokoro v1.0's phoneme inputs: its vocabulary, and a word as the G2P gives it (pure Python).

Every G2P (`g2p` for English and Chinese, `espeak` for Spanish, French, Hindi, Italian and
Portuguese, `japanese`) gives `Token`s whose phonemes hold only symbols of `VOCAB` (`known`): each
phoneme left is exactly one model input.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kokoro v1.0's phoneme vocabulary (config.json "vocab"): StyleTTS 2's symbol table (pad "$" 0,
# punctuation, letters, IPA) with the symbols Kokoro does not use left out and a few slots given to
# misaki's own symbols (affricates ʣ ʥ ʦ ʨ ꭧ, diphthongs A I O Q W Y, flap T, ᵊ, ᵝ, tones ↓→↗↘).
_PUNCTUATION = {";": 1, ":": 2, ",": 3, ".": 4, "!": 5, "?": 6, "—": 9, "…": 10, '"': 11, "(": 12, ")": 13}
_QUOTES_SPACE = {"“": 14, "”": 15, " ": 16}
_MISAKI = dict(zip(["\u0303", "ʣ", "ʥ", "ʦ", "ʨ", "ᵝ", "\uab67"], range(17, 24), strict=True))
_CAPITALS = {"A": 24, "I": 25, "O": 31, "Q": 33, "S": 35, "T": 36, "W": 39, "Y": 41, "ᵊ": 42}
_LETTERS = {c: 43 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz") if c != "g"}  # g: ɡ (92)
_IPA_TABLE = "ɑɐɒæɓʙβɔɕçɗɖðʤəɘɚɛɜɝɞɟʄɡɠɢʛɦɧħɥʜɨɪʝɭɬɫɮʟɱɯɰŋɳɲɴøɵɸθœɶʘɹɺɾɻʀʁɽʂʃʈʧʉʊʋⱱʌɣɤʍχʎʏʑʐʒʔʡʕʢǀǁǂǃˈˌːˑʼʴʰʱʲʷˠˤ˞↓↑→↗↘"
_IPA_KEPT = frozenset("ɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗↘")
_IPA = {c: 69 + i for i, c in enumerate(_IPA_TABLE) if c in _IPA_KEPT}
VOCAB: dict[str, int] = {**_PUNCTUATION, **_QUOTES_SPACE, **_MISAKI, **_CAPITALS, **_LETTERS, **_IPA, "ᵻ": 177}
N_TOKEN = 178


@dataclass(frozen=True)
class Token:
    """A word (or punctuation) as written, the phonemes Kokoro reads for it, and whether a space
    follows it."""

    text: str
    phonemes: str
    whitespace: bool


def known(phonemes: str) -> str:
    """`phonemes` without the symbols Kokoro v1.0 has no input for."""
    return "".join(c for c in phonemes if c in VOCAB)


def punctuation(text: str) -> list[Token]:
    """What lies between words: punctuation Kokoro reads (a pause), spaces as whitespace flags."""
    tokens: list[Token] = []
    for ch in text:
        if ch.isspace():
            if tokens:
                tokens[-1] = Token(tokens[-1].text, tokens[-1].phonemes, True)
            continue
        if ch in VOCAB:
            tokens.append(Token(ch, ch, False))
    return tokens
