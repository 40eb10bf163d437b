"""The Kokoro engine on a tiny random checkpoint (kokoro's own classes and loader, no network):
every tensor really loads, rows batched together sound as they do alone (and as kokoro's own
forward), voice mixes, word timings, Chinese with English in it, determinism, streaming, stops,
continuous batching and rows longer than Kokoro's context."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from kokoro.model import KModel

from inference.batch import Audio, BatchRow
from inference.checkpoints import MANIFEST
from inference.engine import ModelUnavailable, SynthesisRequest
from inference.kokoro import fused as fused_ops
from inference.kokoro import g2p, model
from inference.kokoro.checkpoint import CONFIG, MODULES, WEIGHTS, check_model_dir, complete, make_checkpoint
from inference.kokoro.engine import EDGE_FRAMES, KokoroEngine, edges
from inference.kokoro.forward import forward
from inference.kokoro.model import PADDING_ALLOWED, SEED, RowInput
from inference.kokoro.params import KokoroParams
from inference.kokoro.quantized import Int8Conv1d
from inference.kokoro.spec import SPEC
from inference.kokoro.text import MAX_PHONEMES, SAMPLES_PER_FRAME, pieces, words
from inference.spec import SAMPLE_RATE
from tests.unit.test_kokoro_text import no_network

pytestmark = pytest.mark.long

# A row batched with others differs from the same row alone by float rounding only: measured at
# most ~1e-6 of the row's peak (tiny checkpoint, CPU); this bound leaves room for other CPUs.
BATCH_TOLERANCE = 1e-5

HEART = KokoroParams(voice=(("af_heart", 1.0),))


@pytest.fixture(scope="module", autouse=True)
def offline():
    with no_network():
        yield


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> Path:
    ready = os.environ.get("TTS_TEST_KOKORO_CHECKPOINT", "")
    if ready and complete(ready):  # with a pack for every voice of the spec
        return Path(ready)
    return make_checkpoint("tiny", tmp_path_factory.mktemp("kokoro") / "tiny")


@pytest.fixture(scope="module")
def engine(checkpoint) -> KokoroEngine:
    return KokoroEngine.load(str(checkpoint), device="cpu")


def run(engine, rows, stop=lambda key: False, more=None) -> dict[str, dict]:
    """Each row's audio (joined), frames, durations and words, by key."""
    out: dict[str, dict] = {r.key: {"audio": []} for r in rows}
    for event in engine.run_rows(rows, stop, more=more):
        row = out.setdefault(event.key, {"audio": []})
        if isinstance(event, Audio):
            row["audio"].append(event.samples)
        else:
            row |= {"frames": event.tokens, "durations": event.ids, "words": event.words}
    for row in out.values():
        row["audio"] = np.concatenate(row["audio"]) if row["audio"] else np.zeros(0, dtype=np.float32)
    return out


def test_the_checkpoint_has_kokoros_official_layout(checkpoint):
    config = json.loads((checkpoint / CONFIG).read_text())
    assert config["n_token"] == 178 and config["hidden_dim"] == 512 and config["style_dim"] == 128
    assert max(config["vocab"].values()) < config["n_token"] and config["istftnet"]["upsample_rates"] == [10, 6]
    state = torch.load(checkpoint / WEIGHTS, map_location="cpu", weights_only=True)
    assert sorted(state) == sorted(MODULES)
    for voice in SPEC.voices:
        assert torch.load(checkpoint / "voices" / f"{voice.id}.pt", weights_only=True).shape == (510, 1, 256)
    manifest = json.loads((checkpoint / MANIFEST).read_text())
    assert manifest["engine"] == "kokoro" and manifest["random_weights"] is True
    assert set(manifest["sha256"]) == {CONFIG, WEIGHTS} | {f"voices/{v.id}.pt" for v in SPEC.voices}
    assert check_model_dir(str(checkpoint)) is None


def test_a_directory_without_the_files_is_refused_naming_the_setting(tmp_path):
    message = check_model_dir(str(tmp_path))
    assert "TTS_KOKORO_MODEL_DIR" in message and "kokoro-v1_0.pth" in message
    with pytest.raises(ModelUnavailable, match="TTS_KOKORO_MODEL_DIR"):
        KokoroEngine.load(str(tmp_path), device="cpu")


def test_the_engine_reports_a_random_model_version(engine):
    assert engine.random_weights and engine.sample_rate == SAMPLE_RATE
    name, digest, random = engine.model_version.split("-")
    assert name == "kokoro" and len(digest) == 12 and random == "random"


def folded(saved: dict) -> dict:
    """The file's tensors as the loaded model holds them: each weight-normed convolution's weight
    computed from its direction and norm (the engine folds them: weights.fold_weight_norm)."""
    out = dict(saved)
    for norm in [k for k in saved if k.endswith(".weight_g")]:
        stem = norm.removesuffix("_g")
        out[stem] = torch._weight_norm(out.pop(stem + "_v"), out.pop(norm), 0)
    return out


def test_every_parameter_and_buffer_comes_from_the_file(engine, checkpoint):
    state = torch.load(checkpoint / WEIGHTS, map_location="cpu", weights_only=True)
    compared = 0
    for name in MODULES:
        saved = folded({k.removeprefix("module."): v for k, v in state[name].items()})
        own = getattr(engine.model, name).state_dict()
        assert set(own) == set(saved), name
        for key, tensor in own.items():
            assert torch.equal(tensor.cpu(), saved[key]), f"{name}.{key}"
            compared += 1
    assert compared == sum(len(getattr(engine.model, n).state_dict()) for n in MODULES) > 400


@pytest.mark.filterwarnings("ignore:dropout option adds dropout", "ignore:.*weight_norm")
def test_a_checkpoint_with_a_renamed_key_is_refused_not_half_loaded(checkpoint, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken, ignore=shutil.ignore_patterns(WEIGHTS, MANIFEST))
    state = torch.load(checkpoint / WEIGHTS, map_location="cpu", weights_only=True)
    key = next(k for k in state["decoder"] if k.endswith("encode.conv1.weight_v"))
    state["decoder"][key.replace("conv1", "conv_one")] = state["decoder"].pop(key)
    torch.save(state, broken / WEIGHTS)
    # kokoro's own loader takes it silently, leaving that weight random...
    KModel(repo_id="hexgrad/Kokoro-82M", config=str(broken / CONFIG), model=str(broken / WEIGHTS))
    # ...the engine refuses it, naming the tensor.
    with pytest.raises(ModelUnavailable, match=r"decoder\.encode\.conv1\.weight_v missing"):
        KokoroEngine.load(str(broken), device="cpu")


def test_an_unknown_precision_is_refused(checkpoint):
    with pytest.raises(ValueError, match="fp32, bf16, int8"):
        KokoroEngine.load(str(checkpoint), device="cpu", precision="fp8")


def test_int8_keeps_the_durations_and_is_another_model_version_close_to_fp32(engine, checkpoint):
    """The generator's resblocks' convolutions in int8 on a CPU (an operator's choice): the text side
    stays float32, so durations (and word timings) are float32's exactly; the audio within 8 bits'
    rounding; every other convolution (the frame-rate blocks, the harmonic source's, the generator's
    last) stays float32."""
    low = KokoroEngine.load(str(checkpoint), device="cpu", precision="int8", fused="off")
    decoder = low.model.decoder
    int8 = [name for name, m in decoder.named_modules() if isinstance(m, Int8Conv1d)]
    floats = [name for name, m in decoder.named_modules() if type(m) is torch.nn.Conv1d]
    assert len(int8) > 20 and "generator.resblocks.0.convs1.0" in int8 and "generator.noise_res.1.convs2.2" in int8
    assert all(name.startswith(("generator.resblocks.", "generator.noise_res.")) for name in int8)
    assert not [name for name in floats if name.startswith(("generator.resblocks.", "generator.noise_res."))]
    assert {"generator.conv_post", "encode.conv1", "F0_conv"} <= set(floats)
    ids = [engine.model.vocab[c] for c in "hˈI ðˈɛɹ, hˌW ɑɹ jˈu?"]
    style = engine.style(HEART.voice, len(ids))
    exact = forward(engine.model, [RowInput(ids, style)])[0]
    rounded = forward(low.model, [RowInput(ids, style)])[0]
    np.testing.assert_array_equal(exact.durations, rounded.durations)
    error = np.sqrt(np.mean((exact.audio - rounded.audio) ** 2)) / np.sqrt(np.mean(exact.audio**2))
    assert 0 < error < 0.1, error
    assert low.model_version.endswith("-int8-random") and low.model_version != engine.model_version


def test_bf16_is_another_model_version_close_to_fp32(engine, checkpoint):
    """The decoder's resblocks in bfloat16 (an operator's choice): the same durations, audio within
    a few percent of float32's (RMS), and another model version, so the cache never mixes them."""
    low = KokoroEngine.load(str(checkpoint), device="cpu", precision="bf16")
    ids = [engine.model.vocab[c] for c in "hˈI"]  # short: bfloat16 convolutions on a CPU are ~50× slower
    style = engine.style(HEART.voice, len(ids))
    exact = forward(engine.model, [RowInput(ids, style)])[0]
    rounded = forward(low.model, [RowInput(ids, style)], dtype=low.dtype)[0]
    np.testing.assert_array_equal(exact.durations, rounded.durations)
    error = np.sqrt(np.mean((exact.audio - rounded.audio) ** 2)) / np.sqrt(np.mean(exact.audio**2))
    assert 0 < error < 0.05, error
    assert low.model_version != engine.model_version and low.precision == "bf16"


@pytest.mark.parametrize(
    "decoder_rows, padding",
    [(1, PADDING_ALLOWED), (0, PADDING_ALLOWED), (0, float("inf"))],
    ids=["decoder-row-by-row", "decoder-grouped", "decoder-one-padded-group"],
)
def test_rows_batched_together_sound_as_they_do_alone(engine, monkeypatch, decoder_rows, padding):
    # On a CPU the decoder takes one row at a time (the text side is batched); a GPU groups rows of
    # similar lengths; "inf" pads every row to the longest, the hardest case.
    monkeypatch.setattr(engine, "decoder_rows", decoder_rows)
    monkeypatch.setattr(model, "PADDING_ALLOWED", padding)
    rows = [
        BatchRow("short", engine.read("Hi there."), HEART, 0),
        BatchRow(
            "long",
            engine.read("The quick brown fox jumps over the lazy dog, then naps in the warm afternoon sun."),
            KokoroParams(voice=(("bm_george", 1.0),), speed=0.8, english="en-gb"),
            0,
        ),
        BatchRow("mixed", engine.read("我用SQL查询了数据。"), KokoroParams(voice=(("zf_xiaobei", 1.0),), speed=1.5), 0),
    ]
    together = run(engine, rows)
    assert len({len(r["audio"]) for r in together.values()}) == 3  # clearly different lengths
    for row in rows:
        alone = run(engine, [row])[row.key]
        batched = together[row.key]
        np.testing.assert_array_equal(batched["durations"], alone["durations"])
        assert batched["audio"].shape == alone["audio"].shape
        peak = np.abs(alone["audio"]).max()
        assert np.abs(batched["audio"] - alone["audio"]).max() <= BATCH_TOLERANCE * peak, row.key


def test_the_fused_adain_and_snake_give_the_same_audio(engine, monkeypatch):
    # A GPU runs the generator's AdaIN + Snake as one compiled expression (`fused.adain_snake`);
    # here its formula runs uncompiled, in a padded group and alone, against kokoro's ops.
    monkeypatch.setattr(engine, "decoder_rows", 0)
    monkeypatch.setattr(model, "PADDING_ALLOWED", float("inf"))
    rows = [
        BatchRow("short", engine.read("Hi there."), HEART, 0),
        BatchRow("long", engine.read("The quick brown fox jumps over the lazy dog."), HEART, 0),
    ]
    plain = run(engine, rows)
    monkeypatch.setattr(fused_ops, "_FUSED", None)
    fused_ops.use_fused("eager")
    fused, alone = run(engine, rows), run(engine, rows[:1])["short"]
    for key, row in fused.items():
        peak = np.abs(plain[key]["audio"]).max()
        assert row["audio"].shape == plain[key]["audio"].shape
        assert np.abs(row["audio"] - plain[key]["audio"]).max() <= BATCH_TOLERANCE * peak, key
    assert np.abs(alone["audio"] - plain["short"]["audio"]).max() <= BATCH_TOLERANCE * np.abs(alone["audio"]).max()


def test_a_row_alone_is_kokoros_own_forward(engine):
    """Our padded forward of one row against KModel.forward_with_tokens, its noise seeded alike."""
    ids = [engine.model.vocab[c] for c in "həlˈO wˈɜɹld, ðɪs ɪz kˈOkəɹO."]
    style = engine.style(HEART.voice, len(ids))
    ours = forward(engine.model, [RowInput(ids, style, 1.2)])[0]
    torch.manual_seed(SEED)
    theirs, durations = engine.model.forward_with_tokens(torch.tensor([[0, *ids, 0]]), style[None], 1.2)
    np.testing.assert_array_equal(ours.durations, durations.numpy())
    assert np.abs(ours.audio - theirs.numpy()).max() <= BATCH_TOLERANCE * np.abs(ours.audio).max()


def test_a_voice_mix_is_the_weighted_sum_of_its_voices(engine, checkpoint):
    mix = (("af_bella", 0.3), ("am_adam", 0.7))
    packs = {v: torch.load(checkpoint / "voices" / f"{v}.pt", weights_only=True) for v, _ in mix}
    n = 20
    expected = 0.3 * packs["af_bella"][n - 1, 0] + 0.7 * packs["am_adam"][n - 1, 0]
    torch.testing.assert_close(engine.style(mix, n), expected)
    text = engine.read("A voice of two voices.")
    mixed = run(engine, [BatchRow("m", text, KokoroParams(voice=mix), 0)])["m"]["audio"]
    for voice, _ in mix:
        alone = run(engine, [BatchRow("v", text, KokoroParams(voice=((voice, 1.0),)), 0)])["v"]["audio"]
        assert alone.shape != mixed.shape or not np.allclose(alone, mixed, atol=1e-3)


def test_word_timings_follow_the_words_and_scale_with_speed(engine):
    text = engine.read("Seven quiet ships sailed past the old harbour wall.")
    result = {}
    for speed in (1.0, 0.5):
        result[speed] = run(engine, [BatchRow("w", text, KokoroParams(voice=HEART.voice, speed=speed), 0)])["w"]
    normal = result[1.0]
    assert [w.text for w in normal["words"]] == "Seven quiet ships sailed past the old harbour wall".split()
    seconds = len(normal["audio"]) / SAMPLE_RATE
    assert normal["frames"] * SAMPLES_PER_FRAME == len(normal["audio"])
    for before, word in zip(normal["words"], normal["words"][1:], strict=False):
        assert before.start < before.end <= word.start + 1e-9 < word.end
    assert 0 <= normal["words"][0].start and normal["words"][-1].end <= seconds
    slow = result[0.5]
    ratio = slow["words"][-1].end / normal["words"][-1].end
    assert 1.7 < ratio < 2.3 and 1.7 < len(slow["audio"]) / len(normal["audio"]) < 2.3


def test_chinese_with_english_words_speaks_the_english_words(engine):
    params = KokoroParams(voice=(("zf_xiaoxiao", 1.0),))
    result = run(engine, [BatchRow("zh", engine.read("我用SQL查询。"), params, 0)])["zh"]
    assert [w.text for w in result["words"]] == ["我用", "SQL", "查询"]
    sql = result["words"][1]
    assert sql.end - sql.start > 0.1  # it is spoken, with the English G2P's phonemes
    english = "".join(t.phonemes for t in g2p.english("SQL"))
    assert len(english) >= 5 and english in "".join(t.phonemes for t in g2p.phonemize("我用SQL查询。"))


def test_spanish_and_japanese_are_spoken_by_their_voices_word_by_word(engine):
    spanish = KokoroParams.from_request({}, {"builtin": "ef_dora"}, seed=0)
    japanese = KokoroParams.from_request({}, {"builtin": "jf_alpha"}, seed=0)
    rows = [
        BatchRow("es", engine.read("Tengo 3 gatos.", spanish), spanish, 0),
        BatchRow("ja", engine.read("猫が3匹います。", japanese), japanese, 0),
    ]
    assert [r.text for r in rows] == ["Tengo tres gatos.", "猫が三匹います。"]  # spelled in their language
    result = run(engine, rows)
    assert [w.text for w in result["es"]["words"]] == ["Tengo", "tres", "gatos"]
    assert [w.text for w in result["ja"]["words"]] == ["猫", "が", "三", "匹", "います"]
    for row in rows:
        out = result[row.key]
        assert out["frames"] * SAMPLES_PER_FRAME == len(out["audio"]) > 0
        assert all(a.start < a.end <= b.start + 1e-9 for a, b in zip(out["words"], out["words"][1:], strict=False))
        # Every input the model read is one of the row's language's phonemes (+ start and end).
        language = row.params.reading
        phonemes = pieces(g2p.phonemize(row.text, "en-us", language))[0].phonemes
        assert len(out["durations"]) == len(phonemes) + 2
        assert engine.row_budget(row.text, row.params) == (len(phonemes) + 2) * engine.max_dur


def test_kana_with_an_english_voice_is_read_as_japanese_and_lang_switches_latin_text(engine):
    result = run(engine, [BatchRow("kana", engine.read("こんにちは、世界。", HEART), HEART, 0)])["kana"]
    assert [w.text for w in result["words"]] == ["こんにちは", "世界"]
    french = KokoroParams.from_request({"lang": "fr-FR"}, {"builtin": "af_heart"}, seed=0)
    text = engine.read("J'ai 2 chats.", french)
    assert text == "J'ai deux chats."
    as_french = run(engine, [BatchRow("fr", text, french, 0)])["fr"]
    as_english = run(engine, [BatchRow("en", text, HEART, 0)])["en"]
    assert [w.text for w in as_french["words"]] == ["J'ai", "deux", "chats"]
    assert len(as_french["durations"]) == len(pieces(g2p.phonemize(text, "en-us", "fr"))[0].phonemes) + 2
    assert not np.array_equal(as_french["durations"], as_english["durations"])


def test_the_same_text_voice_and_speed_give_the_same_audio(engine):
    request = SynthesisRequest(["Same again, please.", "And once more."], KokoroParams(voice=HEART.voice, speed=1.1))
    first = np.concatenate(list(engine.synthesize(request)))
    torch.rand(100)  # the global RNG moves on: the audio must not depend on it
    run(engine, [BatchRow("other", engine.read("Something else entirely."), HEART, 0)])
    second = np.concatenate(list(engine.synthesize(request)))
    assert first.dtype == np.float32 and first.ndim == 1 and len(first) > SAMPLE_RATE
    np.testing.assert_array_equal(first, second)


def test_stream_gives_the_first_segment_before_generating_the_others(engine, monkeypatch):
    forwards: list[list[str]] = []
    real = engine._forward

    def recording(rows, stop, crowded):
        forwards.append([r.key for r in rows])
        return real(rows, stop, crowded)

    monkeypatch.setattr(engine, "_forward", recording)
    segments = [engine.read(s) for s in ("First things first.", "Then the second.", "And a third.")]
    chunks = engine.stream(SynthesisRequest(segments, HEART))
    first = next(chunks)
    assert len(first) > 0.3 * SAMPLE_RATE and forwards == [["0"]]
    rest = list(chunks)
    assert forwards == [["0"], ["1", "2"]] and sum(len(c) for c in rest) > len(first)


def test_a_stop_request_ends_a_row_and_the_others_go_on(engine):
    rows = [BatchRow(k, engine.read("Keep going."), HEART, 0) for k in ("keep", "stop")]
    result = run(engine, rows, stop=lambda key: key == "stop")
    assert len(result["keep"]["audio"]) > 0 and result["keep"]["frames"] > 0
    assert len(result["stop"]["audio"]) == 0 and result["stop"]["frames"] == 0


def test_a_stopped_stream_yields_nothing_more(engine):
    segments = [engine.read(s) for s in ("One.", "Two.", "Three.")]
    stopped = False
    chunks = engine.stream(SynthesisRequest(segments, HEART), should_stop=lambda: stopped)
    next(chunks)
    stopped = True
    assert list(chunks) == []


def test_rows_joining_between_forwards_are_run(engine):
    waiting = [[BatchRow("late", engine.read("I came later."), HEART, 0)], []]
    asked = []

    def more(live, urgent=False):
        if urgent:  # between two windows: only a live request's first sentence would start (none here)
            return []
        asked.append(live)
        return waiting.pop(0) if waiting else []

    result = run(engine, [BatchRow("early", engine.read("I was first."), HEART, 0)], more=more)
    assert asked == [0, 0] and len(result["early"]["audio"]) > 0 and len(result["late"]["audio"]) > 0
    assert [w.text for w in result["late"]["words"]] == ["I", "came", "later"]


def test_a_row_over_510_phonemes_is_split_and_keeps_every_word(engine):
    names = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november".split()
    text = engine.read(" ".join(names * 6))  # ~590 phonemes, no sentence end
    phonemes = sum(len(t.phonemes) + 1 for t in g2p.phonemize(text))
    assert phonemes > MAX_PHONEMES
    result = run(engine, [BatchRow("long", text, HEART, 0)])["long"]
    assert [w.text for w in result["words"]] == names * 6
    starts = [w.start for w in result["words"]]
    assert starts == sorted(starts) and result["words"][-1].end <= len(result["audio"]) / SAMPLE_RATE
    cut = pieces(g2p.phonemize(text))
    assert len(cut) == 2 and len(result["durations"]) == sum(len(p.phonemes) + 2 for p in cut)
    assert engine.row_budget(text, HEART) >= result["frames"]


def test_an_unknown_voice_is_a_voice_problem(engine):
    assert engine.voice_problem(HEART) is None
    assert "af_nobody" in engine.voice_problem(KokoroParams(voice=(("af_nobody", 1.0),)))


def test_the_models_edge_silence_is_trimmed_and_the_words_follow(engine):
    """Each piece keeps EDGE_FRAMES of the model's silence before its first phoneme and after its
    end input: sentence joins, a long row's pieces and SSML breaks are as long as asked."""
    text = engine.read("Keep the edges short, please.")
    result = run(engine, [BatchRow("row", text, HEART, 0)])["row"]
    lead, tail = edges(result["durations"])
    assert lead == max(0, int(result["durations"][0]) - EDGE_FRAMES)
    assert len(result["audio"]) == (int(result["durations"].sum()) - lead - tail) * SAMPLES_PER_FRAME
    untrimmed = words(pieces(g2p.phonemize(text))[0], result["durations"].tolist())
    assert [w.text for w in result["words"]] == [w.text for w in untrimmed]
    for ours, theirs in zip(result["words"], untrimmed, strict=True):
        assert ours.end == pytest.approx(max(0.0, theirs.end - lead / 40), abs=1e-3)
