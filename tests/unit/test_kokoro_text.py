"""Kokoro's text side without a model: what it reads (numbers spelled out as for ChatTTS, phoneme
links kept), its G2P (English, Chinese, both mixed, phoneme links) with no network at all, its
vocabulary, pieces of at most 510 phonemes and word timings as KPipeline computes them."""

from __future__ import annotations

import contextlib
import importlib.resources
import ipaddress
import itertools
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
import spacy.cli
import torch
from kokoro.pipeline import KPipeline
from misaki import data
from misaki.token import MToken
from misaki.zh import ZHG2P
from pypinyin import Style, lazy_pinyin
from pypinyin.constants import PINYIN_DICT

from inference.chattts.spec import INLINE_TAGS
from inference.kokoro import g2p
from inference.kokoro.g2p import Token, phonemize
from inference.kokoro.phonemes import N_TOKEN, VOCAB
from inference.kokoro.text import MAX_PHONEMES, assemble, pieces, read, words
from inference.text.preparation import TextError, normalize_segment

ROOT = Path(__file__).resolve().parents[2]


class NetworkBlocked(OSError):
    pass


def _loopback(host) -> bool:
    if not isinstance(host, str):
        return True  # a Unix socket's path
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False  # a name to resolve: the network


@contextlib.contextmanager
def no_network():
    """No connection (nor name lookup) off this machine: each raises NetworkBlocked; Hugging Face's
    client is told it is offline, and spaCy's model download (a pip subprocess) raises too."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def guarded(real):
        def connect(self, address):
            if self.family != getattr(socket, "AF_UNIX", None) and not _loopback(address[0]):
                raise NetworkBlocked(f"a test tried to reach {address}")
            return real(self, address)

        return connect

    def getaddrinfo(host, *args, **kwargs):
        if not _loopback(host if not isinstance(host, bytes) else host.decode()):
            raise NetworkBlocked(f"a test tried to look up {host}")
        return real_getaddrinfo(host, *args, **kwargs)

    def download(*args, **kwargs):
        raise NetworkBlocked(f"a test tried to download a spaCy model {args}")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(socket.socket, "connect", guarded(real_connect))
        mp.setattr(socket.socket, "connect_ex", guarded(real_connect_ex))
        mp.setattr(socket, "getaddrinfo", getaddrinfo)
        mp.setattr(spacy.cli, "download", download)
        yield


@pytest.fixture(scope="module", autouse=True)
def offline():
    with no_network():
        yield


def test_the_guard_blocks_the_network_but_not_loopback():
    with pytest.raises(NetworkBlocked):
        socket.create_connection(("192.0.2.1", 443), timeout=1)
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("huggingface.co", 443)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    with socket.create_connection(server.getsockname(), timeout=1):
        pass
    server.close()


def test_a_fresh_process_phonemizes_english_and_chinese_offline():
    """Nothing cached: misaki's dictionaries, spaCy's pipeline, espeak-ng and jieba all load with
    the network blocked (the English pipeline is never downloaded)."""
    code = (
        "import json\n"
        "from tests.unit.test_kokoro_text import no_network\n"
        "with no_network():\n"
        "    from inference.kokoro import g2p\n"
        "    out = [[t.phonemes for t in g2p.phonemize(s)] for s in ('Hello Zyxwvut world.', '你好，世界。')]\n"
        "    print(json.dumps([g2p.english_pipeline(), out]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    pipeline, (english, chinese) = json.loads(result.stdout.strip().splitlines()[-1])
    assert pipeline in ("en_core_web_sm", "blank")
    assert len(english) == 4 and all(english[:3])  # the made-up word read by espeak-ng, not dropped
    assert chinese[0] and chinese[2] and "↓" in chinese[0]  # 你好: third tones


def test_the_english_pipeline_is_the_installed_model_or_blank():
    expected = "en_core_web_sm" if spacy.util.is_package("en_core_web_sm") else "blank"
    assert g2p.english_pipeline() == expected
    assert f"spacy-{expected}" in g2p.versions() and "misaki-0.9.4" in g2p.versions()


def test_english_words_keep_their_text_phonemes_and_spaces():
    tokens = phonemize("Hello, brave new world.")
    assert [t.text for t in tokens] == ["Hello", ",", "brave", "new", "world", "."]
    assert [t.whitespace for t in tokens] == [False, True, True, True, False, False]
    assert tokens[0].phonemes == "həlˈO" and tokens[1].phonemes == "," and tokens[-1].phonemes == "."
    phonemes = assemble(tokens).phonemes  # a space where the text has one: "həlˈO, bɹˈAv nˈu wˈɜɹld."
    assert phonemes.startswith("həlˈO, ") and phonemes.endswith("ld.") and phonemes.count(" ") == 3


def test_british_english_is_read_with_a_british_accent():
    us = phonemize("tomato", "en-us")[0].phonemes
    gb = phonemize("tomato", "en-gb")[0].phonemes
    assert us != gb and "Q" in gb  # misaki's British "əʊ"


def test_every_phoneme_is_one_of_kokoros_inputs():
    for text in ("Ça va? Naïve façade, Zyxwvut!", "我用SQL查询了三次。", "[x](/kˈO☃X/) ok"):
        for token in phonemize(text):
            assert set(token.phonemes) <= set(VOCAB), token


def test_chinese_is_read_word_by_word_with_tones():
    tokens = phonemize("你好，世界。")
    assert [t.text for t in tokens] == ["你好", ",", "世界", "."]
    assert tokens[0].phonemes == "ni↓xau↓" and tokens[2].phonemes == "ʂɨ↘ʨje↘"


def test_english_words_inside_chinese_are_read_as_english():
    tokens = phonemize("我用SQL查询")
    text = assemble(tokens).phonemes
    english = assemble(phonemize("SQL")).phonemes
    assert english and english in text
    assert "SQL" not in text and "❓" not in text
    assert [t.text for t in tokens][:3] == ["我用", "SQL", "查询"]
    assert f"{tokens[0].phonemes} {english} " in text  # a space keeps the languages' phonemes apart


def test_phoneme_links_give_a_words_phonemes_in_english_and_chinese():
    english = phonemize("[Kokoro](/kˈOkəɹO/) is nice.")
    assert english[0] == Token("Kokoro", "kˈOkəɹO", True)
    chinese = phonemize("我喜欢[Kokoro](/kˈOkəɹO/)模型。")
    assert Token("Kokoro", "kˈOkəɹO", True) in chinese


def test_phoneme_link_symbols_kokoro_lacks_are_dropped():
    assert phonemize("[snow](/snˈO☃/) falls")[0].phonemes == "snˈO"


def test_the_vocabulary_covers_what_misakis_english_and_chinese_can_say():
    assert len(set(VOCAB.values())) == len(VOCAB) and max(VOCAB.values()) < N_TOKEN and 0 not in VOCAB.values()
    symbols: set[str] = set()
    for name in ("us_gold.json", "us_silver.json", "gb_gold.json", "gb_silver.json"):
        for value in json.loads(importlib.resources.files(data).joinpath(name).read_text()).values():
            for phonemes in value.values() if isinstance(value, dict) else [value]:
                symbols |= set(phonemes or "")
    syllables = set(
        itertools.chain.from_iterable(
            lazy_pinyin(chr(c), style=Style.TONE3, neutral_tone_with_five=True, errors="ignore") for c in PINYIN_DICT
        )
    )
    for syllable in syllables:
        symbols |= set(ZHG2P.py2ipa(syllable).replace(chr(815), ""))
    assert symbols - set(VOCAB) == set()


def test_kokoro_reads_numbers_money_and_dates_as_chattts_does():
    for text in ("I paid $5.50 on 3/4/2024 for 2 apples.", "我用SQL查询了3次，花了100元。"):
        assert read(text) == normalize_segment(text, INLINE_TAGS, "chattts")
    assert read("I paid $5.") == "I paid five dollars."


def test_phoneme_links_are_read_as_written():
    assert read("Say [Kokoro](/kˈOkəɹO/) 2 times.") == "Say [Kokoro](/kˈOkəɹO/) two times."


@pytest.mark.parametrize("text", ["Hello [laugh] there.", "[uv_break]"])
def test_inline_tags_are_refused_naming_kokoro(text):
    with pytest.raises(TextError, match="kokoro"):
        read(text)


def test_text_with_nothing_to_say_is_refused():
    with pytest.raises(TextError):
        read("... !!! ---")


def test_a_long_row_is_cut_into_pieces_at_sentence_ends():
    sentence = [Token("word", "wˈɜɹd", True)] * 40 + [Token(".", ".", True)]  # 40 words and spaces, ".": 241
    cut = pieces(sentence * 3)  # 725 phonemes: two sentences (and the space between) fit in one piece
    assert [len(p.phonemes) for p in cut] == [483, 241]
    assert all(p.phonemes.endswith(".") for p in cut)
    assert sum(len(p.tokens) for p in cut) == 123


def test_a_row_with_no_sentence_end_is_cut_between_words():
    cut = pieces([Token("word", "wˈɜɹd", True)] * 200)
    assert all(len(p.phonemes) <= MAX_PHONEMES for p in cut) and len(cut) == 3
    assert all(t.text == "word" for p in cut for t in p.tokens) and sum(len(p.tokens) for p in cut) == 200


def test_word_timings_are_kpipelines():
    tokens = phonemize("Hello, brave new world.")
    piece = assemble(tokens)
    durations = [5] + [(i % 4) + 2 for i in range(len(piece.phonemes))] + [7]
    ours = words(piece, durations, offset=1.0)
    theirs = [MToken(t.text, "", " " if t.whitespace else "", t.phonemes) for t in tokens]
    KPipeline.join_timestamps(theirs, torch.tensor(durations))
    spoken = [t for t in theirs if t.text[0].isalpha()]
    assert [w.text for w in ours] == [t.text for t in spoken] == ["Hello", "brave", "new", "world"]
    assert [(w.start, w.end) for w in ours] == [pytest.approx((1 + t.start_ts, 1 + t.end_ts)) for t in spoken]
