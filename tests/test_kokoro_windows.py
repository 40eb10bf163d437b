"""A live request's first sentence on Kokoro, decoded in windows (`inference.kokoro.forward`) on a
tiny random checkpoint: its first window goes out before the rest is decoded, a middle window only
where the rest would come late, the row's length,
durations and word timings are the whole sentence's, a stop between windows ends it, and with the
sentence's own instance-norm statistics the windows' audio is the whole decode's (the joins, the
context and the harmonic source's slices are exact; only the statistics differ, which
tests/test_kokoro_real_weights.py and bench/intelligibility.py check by ear)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from torch import nn

from inference.batch import Audio, BatchRow, Done
from inference.kokoro import forward as windows
from inference.kokoro import g2p, model
from inference.kokoro.engine import KokoroEngine, edges
from inference.kokoro.forward import (
    CROSSFADE_SAMPLES,
    FIRST_WINDOW_FRAMES,
    MIDDLE_WINDOW_FRAMES,
    SAMPLES_PER_FRAME,
    decode,
    forward,
)
from inference.kokoro.model import RowInput
from inference.kokoro.params import KokoroParams
from inference.kokoro.text import pieces
from tests.test_kokoro_engine import checkpoint, offline, run  # noqa: F401  (fixtures)

pytestmark = pytest.mark.long

HEART = KokoroParams(voice=(("af_heart", 1.0),))
TEXT = "The old lighthouse keeper painted the railings blue every spring before the storms arrived."


@pytest.fixture(scope="module")
def engine(checkpoint) -> KokoroEngine:  # noqa: F811
    return KokoroEngine.load(str(checkpoint), device="cpu")


@pytest.fixture
def slow(monkeypatch) -> None:
    """A machine too slow to make the rest of a sentence alone within its first window's audio (the
    tiny checkpoint's generator is full width: whether it is in time depends on the machine's cores):
    a listener served alone gets a middle window."""
    monkeypatch.setattr(windows, "AHEAD", 0.0)


def row_input(engine: KokoroEngine, text: str = TEXT) -> RowInput:
    (piece,) = pieces(g2p.phonemize(engine.read(text)))
    ids = [engine.model.vocab[c] for c in piece.phonemes]
    return RowInput(ids, engine.style(HEART.voice, len(ids)), 1.0)


def test_the_first_window_goes_out_before_the_rest_is_decoded(engine, monkeypatch, slow):
    generated = []
    real = windows.generate
    monkeypatch.setattr(windows, "generate", lambda *a, **k: generated.append(1) or real(*a, **k))
    events, done = [], None
    for event in engine.run_rows([BatchRow("live", engine.read(TEXT), HEART, 0, early=True)], lambda key: False):
        events.append((type(event), len(generated), len(event.samples) if isinstance(event, Audio) else None))
        done = event
    # The first window starts after the model's opening silence (trimmed anyway): all of it speech.
    first = FIRST_WINDOW_FRAMES * SAMPLES_PER_FRAME - CROSSFADE_SAMPLES // 2
    assert edges(done.ids)[0] > 0
    assert events[0] == (Audio, 1, first)  # sent after the first window's generator, before the second's
    # Then the middle window (1.2 s, sent before the rest is decoded), then the rest.
    middle = MIDDLE_WINDOW_FRAMES * SAMPLES_PER_FRAME
    assert events[1:] == [(Audio, 2, middle), (Audio, 3, events[2][2]), (Done, 3, None)]


def test_the_row_is_as_long_as_the_whole_sentence_with_its_durations_and_words(engine):
    text = engine.read(TEXT)
    live = run(engine, [BatchRow("live", text, HEART, 0, early=True)])["live"]
    whole = run(engine, [BatchRow("whole", text, HEART, 0)])["whole"]
    assert len(live["audio"]) == len(whole["audio"]) and live["frames"] == whole["frames"]
    np.testing.assert_array_equal(live["durations"], whole["durations"])
    assert live["words"] == whole["words"]
    assert np.isfinite(live["audio"]).all() and np.abs(live["audio"]).max() > 0


def test_every_awaited_rows_first_window_comes_before_any_rows_second(engine, slow):
    # Streams arriving together: each listener's sentence begins a window apart, not a sentence apart;
    # then each one's rest in one window (no middle window: it re-decodes the sentence's start, work
    # taken from the other listener).
    rows = [row_input(engine), row_input(engine, "Please remember to bring your notebook to the meeting tomorrow.")]
    order = [(d.row, d.last) for d in decode(engine.model, rows, early=[0, 1])]
    alone = [[d.audio for d in decode(engine.model, [row], early=[0])] for row in rows]
    assert [len(a) for a in alone] == [3, 3]  # alone: first, middle, rest
    assert order == [(0, False), (1, False), (0, True), (1, True)]
    together = {i: [d.audio for d in decode(engine.model, rows, early=[0, 1]) if d.row == i] for i in (0, 1)}
    for i in (0, 1):
        first, rest = together[i]
        assert len(first) == len(alone[i][0]) and np.abs(first - alone[i][0]).max() <= 1e-5 * np.abs(first).max()
        assert len(first) + len(rest) == sum(len(a) for a in alone[i])  # the same sentence, joined once less


def test_a_listener_alone_gets_a_middle_window_only_where_the_rest_would_come_late(engine, monkeypatch):
    row = row_input(engine)
    with monkeypatch.context() as fast:  # a machine that makes any rest in time
        fast.setattr(windows, "AHEAD", 1e9)
        in_time = [d.audio for d in decode(engine.model, [row], early=[0])]
    real = windows.generate

    def late(*args, **kwargs):  # the first window's ~40 frames in over 0.3 s: the rest's ~80 or more
        time.sleep(0.3)  # frames would take over 0.6 s, more than AHEAD of the first's 0.6 s of audio
        return real(*args, **kwargs)

    monkeypatch.setattr(windows, "generate", late)
    late_rest = [d.audio for d in decode(engine.model, [row], early=[0])]
    assert len(in_time) == 2 and len(late_rest) == 3
    assert np.array_equal(in_time[0], late_rest[0])
    assert len(in_time[1]) == len(late_rest[1]) + len(late_rest[2])  # the same sentence, joined once less


def test_a_forward_taking_turns_with_another_makes_no_middle_window(engine, slow):
    row = row_input(engine)
    alone = [d.audio for d in decode(engine.model, [row], early=[0])]
    shared = [d.audio for d in decode(engine.model, [row], early=[0], crowded=lambda: True)]
    assert len(alone) == 3 and len(shared) == 2
    assert np.array_equal(shared[0], alone[0])
    assert len(shared[1]) == len(alone[1]) + len(alone[2])


def test_a_short_sentence_is_not_windowed(engine):
    row = row_input(engine, "Hi there.")
    assert len(list(decode(engine.model, [row], early=[0]))) == 1


def test_a_stop_between_windows_ends_the_row_with_no_more_audio(engine):
    sent = []

    def stop(key):
        return bool(sent)

    events = []
    for event in engine.run_rows([BatchRow("live", engine.read(TEXT), HEART, 0, early=True)], stop):
        events.append(event)
        if isinstance(event, Audio):
            sent.append(event)
    assert [type(e) for e in events] == [Audio, Done] and events[1].tokens == 0


def test_a_stop_while_a_window_decodes_ends_its_compute_within_a_block(engine, monkeypatch):
    # A barge-in during the second window: the generator asks before each of its 8 high-rate blocks,
    # so the window is dropped a block after the stop, not decoded to its end (~1.3 s on this CPU).
    blocks = []
    real = model._resblock1
    monkeypatch.setattr(model, "_resblock1", lambda *a: blocks.append(1) or real(*a))
    per_window = 2 * (1 + engine.model.decoder.generator.num_kernels)
    events = list(
        engine.run_rows(
            [BatchRow("live", engine.read(TEXT), HEART, 0, early=True)], lambda key: len(blocks) >= per_window + 3
        )
    )
    assert len(blocks) == per_window + 3  # the first window whole, three blocks of the second
    assert [type(e) for e in events] == [Audio, Done] and events[1].tokens == 0


def test_a_row_stopped_while_another_is_decoded_is_never_decoded(engine, monkeypatch):
    # On a CPU the decoder takes one row at a time: a stop (a barge-in) is seen before each row, so
    # the compute after it is at most the row being decoded, not the rest of the forward.
    generated = []
    real = windows.run_decoder
    monkeypatch.setattr(windows, "run_decoder", lambda *a, **k: generated.append(1) or real(*a, **k))
    rows = [BatchRow(k, engine.read(t), HEART, 0) for k, t in (("a", TEXT), ("b", "A second sentence here."))]
    ended, events = set(), []
    for event in engine.run_rows(rows, lambda key: key == "b" and "a" in ended):  # b stopped once a is out
        events.append(event)
        if isinstance(event, Done):
            ended.add(event.key)
    done = {e.key: e for e in events if isinstance(e, Done)}
    assert len(generated) == 1 and done["b"].tokens == 0 and done["a"].tokens > 0
    assert {e.key for e in events if isinstance(e, Audio)} == {"a"}


def test_with_the_sentences_statistics_the_windows_are_the_whole_decode(engine, monkeypatch, slow):
    """Each of the generator's instance norms replays the mean and variance it took over the whole
    sentence: the windowed decode then equals the whole one (measured: ~110 dB apart on the real
    weights, float rounding)."""
    norms = [m for m in engine.model.decoder.generator.modules() if isinstance(m, nn.InstanceNorm1d)]
    assert norms
    taken: dict[int, list] = {}
    replay: dict[int, int] | None = None

    def norm(k, m, x):
        if replay is None:
            taken.setdefault(k, []).append((x.mean(-1, keepdim=True), x.var(-1, keepdim=True, unbiased=False)))
            mean, var = taken[k][-1]
        else:
            mean, var = taken[k][replay[k]]
            replay[k] += 1
        return (x - mean) / (var + m.eps).sqrt() * m.weight[None, :, None] + m.bias[None, :, None]

    for k, m in enumerate(norms):
        monkeypatch.setattr(m, "forward", lambda x, k=k, m=m: norm(k, m, x))
    row = row_input(engine)
    whole = forward(engine.model, [row])[0].audio
    chunks = []
    replay = dict.fromkeys(range(len(norms)), 0)
    for d in decode(engine.model, [row], early=[0]):
        replay = dict.fromkeys(range(len(norms)), 0)  # the next window: the sentence's statistics again
        chunks.append(d.audio)
    windowed = np.concatenate(chunks)
    assert len(chunks) == 3 and len(windowed) == len(whole)
    assert np.abs(windowed - whole).max() <= 1e-4 * np.abs(whole).max()


def test_a_first_sentence_arriving_while_another_decodes_starts_between_its_windows(engine):
    """On a CPU a forward takes seconds: a live request's first sentence that arrives meanwhile runs in a
    forward of its own, taking turns with the running one a window at a time, instead of waiting for it."""
    asked: list[bool] = []
    late = BatchRow("late", engine.read(TEXT), HEART, 0, early=True)

    def more(live: int, urgent: bool = False) -> list[BatchRow]:
        asked.append(urgent)
        return [late] if urgent and asked.count(True) == 1 else []

    first = BatchRow("first", engine.read(TEXT), HEART, 0, early=True)
    order = [(type(e).__name__, e.key) for e in engine.run_rows([first], lambda key: False, more=more)]
    assert order[0] == ("Audio", "first") and order[1] == ("Audio", "late")  # its first window, next
    assert order.index(("Done", "first")) > order.index(("Audio", "late"))  # before the running one ends
    assert {k for _, k in order if _ == "Done"} == {"first", "late"} and asked[-1] is False  # then the next forward


def test_whole_rows_go_to_the_decoder_earliest_deadline_first(engine, monkeypatch):
    decoded = []
    real = windows.run_decoder

    def spy(decoder, asr, *args, **kwargs):
        decoded.append(asr.shape[-1])
        return real(decoder, asr, *args, **kwargs)

    monkeypatch.setattr(windows, "run_decoder", spy)
    short, long = row_input(engine, "A short one."), row_input(engine)
    list(decode(engine.model, [long, short], 1))  # no deadlines: longest first
    by_length = list(decoded)
    decoded.clear()
    list(decode(engine.model, [long, short], 1, deadlines=[None, 12.5]))  # the short one's listener waits
    assert by_length[0] > by_length[1] and decoded == by_length[::-1]
