"""Cross-request batches (`ChatTTSEngine.generate_batch`) on the tiny random checkpoint.

What is reproducible, and how exactly:
- Tokens: a row's tokens depend only on its text, voice, seed, sampling settings, speed and budget,
  not on its batch companions or its place in the batch (each row samples with its own noise), and
  a row alone gives the same tokens as ChatTTS's own `Chat.infer` with that seed. Asserted equal.
- Audio: equal within AUDIO_ATOL. A batch pads prompts and runs other matrix shapes, so a row's
  hidden states differ from its run alone by float32 rounding (measured ~1e-7 on audio peaking at
  ~0.1); the same batch run twice is bit-identical.
- Streaming: a row streamed in chunks equals the same row decoded whole, within AUDIO_ATOL (windows
  with left context, held-back tails, crossfades: see inference.batch).
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import replace

import numpy as np
import pytest
import torch

from inference.batch import Audio, BatchRow, Done
from inference.chattts import generation, kvcache
from inference.chattts.engine import ChatTTSEngine
from inference.chattts.generation import RowPlan, generate
from inference.chattts.params import ChatTTSParams
from inference.chattts.runner import LOADED_FIRST_CHUNK_TOKENS
from inference.chattts.voices import VOICES
from inference.chattts.windows import CROSSFADE_SAMPLES, FADE_SAMPLES, HOLD_SAMPLES, decoded_length
from inference.engine import PAUSE_SECONDS, SynthesisRequest
from inference.spec import SAMPLE_RATE

CHECKPOINT = os.environ.get("TTS_TEST_CHECKPOINT", "")
DEVICE = os.environ.get("TTS_TEST_DEVICE", "cpu")  # cuda: the same checks on a GPU (bench/gpu.sh runs them)
# float32 rounding of batched/padded matmuls through the decoders; ~100x the measured on a CPU. On a
# GPU cuDNN's convolutions run in TF32 (torch's default) with algorithms chosen by length, so a
# streamed window and the whole decode round apart: measured on an H200, 6 of 233,472 samples
# 1.0-1.25e-5 apart.
AUDIO_ATOL = 1e-5 if DEVICE == "cpu" else 5e-5

P1 = ChatTTSParams(voice_seed=1, seed=3)
P2 = ChatTTSParams(voice_seed=7, seed=11, temperature=0.5, top_p=0.9, top_k=10, speed=8)
P3 = ChatTTSParams(voice_seed=2, seed=5, temperature=0.1, top_p=0.5, top_k=40, speed=2, use_decoder=False)
ROWS = [
    BatchRow("a", "hello world, this is a test.", P1, 60),
    BatchRow("b", "A much longer second sentence with other words in it.", P2, 80),
    BatchRow("c", "short one", P3, 30),
]


@pytest.fixture(scope="module")
def engine():
    return ChatTTSEngine.load(CHECKPOINT, device=DEVICE)


class Recorder:
    """A BatchSink that keeps everything, in order; `stop(key, checks)` decides stops."""

    def __init__(self, stop=None):
        self.events: list[tuple[str, str]] = []
        self.chunks: dict[str, list[np.ndarray]] = defaultdict(list)
        self.tokens: dict[str, int] = {}
        self.checks: Counter[str] = Counter()
        self.checks_at_first_audio: dict[str, int] = {}
        self._stop = stop or (lambda key, checks: False)

    def audio(self, key: str, samples: np.ndarray) -> None:
        assert key not in self.tokens, "audio after done"
        assert samples.dtype == np.float32 and samples.ndim == 1
        self.checks_at_first_audio.setdefault(key, self.checks[key])
        self.events.append(("audio", key))
        self.chunks[key].append(samples)

    def done(self, key: str, tokens: int, words=()) -> None:
        assert key not in self.tokens, "done twice"
        self.events.append(("done", key))
        self.tokens[key] = tokens

    def stop_requested(self, key: str) -> bool:
        self.checks[key] += 1
        return self._stop(key, self.checks[key])

    def audio_of(self, key: str) -> np.ndarray:
        return np.concatenate(self.chunks[key]) if self.chunks[key] else np.zeros(0, dtype=np.float32)


def run(engine, rows, chunk_tokens=24, stop=lambda key: False, more=None):
    """The rows' audio and token ids, through the event iterator that generate_batch drives."""
    chunks: dict[str, list[np.ndarray]] = defaultdict(list)
    ids = {}
    for event in engine.run_rows(rows, stop, chunk_tokens, more):
        if isinstance(event, Audio):
            chunks[event.key].append(event.samples)
        else:
            assert isinstance(event, Done)
            ids[event.key] = event.ids
    keys = [r.key for r in rows] + [k for k in ids if k not in {r.key for r in rows}]  # and rows that joined
    audio = {k: np.concatenate(chunks[k]) if chunks[k] else np.zeros(0) for k in keys}
    return audio, ids


def test_a_row_alone_gives_the_tokens_of_chattts_infer(engine):
    chat = engine.chat
    for row in ROWS:
        code, _ = engine.chattts_params(row.params, row.max_tokens)
        text = chat.normalizer(row.text, True, True, None)
        reference = next(chat._infer_code([text], False, chat.device, True, code)).ids[0].cpu().numpy()
        _, ids = run(engine, [row])
        np.testing.assert_array_equal(ids[row.key], reference)


def test_a_row_gives_the_same_tokens_alone_and_in_any_batch(engine):
    batch_audio, batch_ids = run(engine, ROWS)
    reversed_audio, reversed_ids = run(engine, ROWS[::-1])
    for row in ROWS:
        audio, ids = run(engine, [row])
        assert len(ids[row.key]) > 0
        np.testing.assert_array_equal(batch_ids[row.key], ids[row.key])
        np.testing.assert_array_equal(reversed_ids[row.key], ids[row.key])
        np.testing.assert_allclose(batch_audio[row.key], audio[row.key], rtol=0, atol=AUDIO_ATOL)
        np.testing.assert_allclose(reversed_audio[row.key], audio[row.key], rtol=0, atol=AUDIO_ATOL)


def joining_at(steps: dict[int, list[BatchRow]]):
    """A `more` that hands the rows of `steps[n]` to the batch when asked for the n-th time."""
    asked = Counter()

    def more(live: int) -> list[BatchRow]:
        asked["n"] += 1
        return steps.get(asked["n"], [])

    return more


def test_rows_joining_a_running_batch_get_their_tokens_alone_and_leave_the_others_unchanged(engine):
    first, *later = ROWS
    alone = {row.key: run(engine, [row]) for row in ROWS}
    # One joins at step 5, the others together at step 12 (their prompts differ in length).
    audio, ids = run(engine, [first], more=joining_at({5: later[:1], 12: later[1:]}))
    assert set(ids) == {row.key for row in ROWS}
    for row in ROWS:
        alone_audio, alone_ids = alone[row.key]
        np.testing.assert_array_equal(ids[row.key], alone_ids[row.key])
        np.testing.assert_allclose(audio[row.key], alone_audio[row.key], rtol=0, atol=AUDIO_ATOL)


def test_a_joined_row_streams_and_ends_on_its_own(engine):
    first, second = ROWS[0], ROWS[1]
    sink = Recorder()
    engine.generate_batch([first], sink, chunk_tokens=8, more=joining_at({3: [second]}))
    assert set(sink.tokens) == {first.key, second.key}
    done = [key for kind, key in sink.events if kind == "done"]
    assert sorted(done) == sorted([first.key, second.key])
    assert len(sink.chunks[second.key]) > 1  # chunk by chunk, not at the end


def test_the_same_batch_twice_is_bit_identical_and_seeds_matter(engine):
    a, ids_a = run(engine, ROWS)
    b, ids_b = run(engine, ROWS)
    for row in ROWS:
        np.testing.assert_array_equal(a[row.key], b[row.key])
        np.testing.assert_array_equal(ids_a[row.key], ids_b[row.key])
    other = BatchRow("a", ROWS[0].text, ChatTTSParams(voice_seed=1, seed=4), 60)
    _, ids_other = run(engine, [other, *ROWS[1:]])
    assert not np.array_equal(ids_other["a"], ids_a["a"])


def test_each_row_is_done_when_it_ends_not_when_the_batch_does(engine):
    rows = [BatchRow("long", ROWS[1].text, P2, 80), BatchRow("short", ROWS[0].text, P1, 20)]
    sink = Recorder()
    engine.generate_batch(rows, sink, chunk_tokens=8)
    done_short = sink.events.index(("done", "short"))
    later_long = [i for i, e in enumerate(sink.events) if e == ("audio", "long") and i > done_short]
    assert sink.tokens["short"] == 20 and later_long, "the short row waited for the long one"
    # Audio and token counts agree: a decode of n tokens gives 512 n - 256 samples.
    for key, tokens in sink.tokens.items():
        assert len(sink.audio_of(key)) == decoded_length(tokens)


def test_the_first_chunk_comes_after_chunk_tokens_steps(engine):
    sink = Recorder()
    engine.generate_batch([ROWS[1]], sink, chunk_tokens=24)
    # stop_requested is asked once a step: the first chunk follows the 24th token.
    assert sink.checks_at_first_audio["b"] == 24
    assert len(sink.chunks["b"]) >= 3
    assert len(sink.chunks["b"][0]) == decoded_length(24) - HOLD_SAMPLES


def test_under_load_the_first_chunk_comes_sooner_and_the_audio_is_the_same(engine):
    # A step of several rows costs more than a lone row's: the first window comes after 16 tokens.
    sink = Recorder()
    engine.generate_batch([ROWS[1], ROWS[0]], sink, chunk_tokens=24)
    assert sink.checks_at_first_audio["b"] == LOADED_FIRST_CHUNK_TOKENS == 16
    assert len(sink.chunks["b"][0]) == decoded_length(16) - HOLD_SAMPLES  # 0.16 s, then the batch's rhythm
    assert sink.checks_at_first_audio.get("a", 0) <= 24  # "a" may end sooner on random weights
    alone, _ = run(engine, [ROWS[1]], chunk_tokens=ROWS[1].max_tokens)
    np.testing.assert_allclose(sink.audio_of("b"), alone["b"], rtol=0, atol=AUDIO_ATOL)
    again = Recorder()
    engine.generate_batch([ROWS[1], ROWS[0]], again, chunk_tokens=24)
    for key in ("a", "b"):  # the windows follow token counts, not time: the same every run
        np.testing.assert_array_equal(again.audio_of(key), sink.audio_of(key))


def test_stopping_one_row_leaves_the_others_unchanged(engine):
    full, full_ids = run(engine, ROWS)
    sink = Recorder(stop=lambda key, checks: key == "b" and checks > 30)
    engine.generate_batch(ROWS, sink, chunk_tokens=24)
    assert sink.tokens["b"] == 30
    stopped = sink.audio_of("b")
    assert stopped[-1] == 0.0 and len(stopped) < len(full["b"])  # it glides to silence
    for key in ("a", "c"):
        np.testing.assert_allclose(sink.audio_of(key), full[key], rtol=0, atol=AUDIO_ATOL)
    _, ids = run(engine, ROWS, stop=lambda key: key == "b" and sink.checks["b"] > 0)  # stopped at once
    for key in ("a", "c"):
        np.testing.assert_array_equal(ids[key], full_ids[key])


def find_zero_token_seed(engine) -> int:
    """A seed whose first token is the end token (noise makes it win; with top_p=1 and top_k=all,
    about one seed in 150 does)."""
    params = {"voice_seed": 1, "temperature": 1.0, "top_p": 1.0, "top_k": 626}
    rows = [BatchRow(str(s), "end at once.", ChatTTSParams(seed=s, **params), 1) for s in range(512)]
    zero = [int(e.key) for e in engine.run_rows(rows, lambda k: False) if isinstance(e, Done) and e.tokens == 0]
    assert zero, "no seed ends at its first step"
    return zero[0]


def test_a_row_that_ends_at_its_first_step_is_done_with_no_audio(engine):
    seed = find_zero_token_seed(engine)
    params = ChatTTSParams(voice_seed=1, seed=seed, temperature=1.0, top_p=1.0, top_k=626)
    rows = [BatchRow("zero", "end at once.", params, 40), BatchRow("no budget", "nothing.", P1, 0), *ROWS]
    sink = Recorder()
    engine.generate_batch(rows, sink)
    assert sink.tokens["zero"] == 0 and not sink.chunks["zero"]
    assert sink.tokens["no budget"] == 0 and not sink.chunks["no budget"]
    assert set(sink.events[:2]) == {("done", "zero"), ("done", "no budget")}
    alone, _ = run(engine, ROWS)
    for row in ROWS:
        np.testing.assert_allclose(sink.audio_of(row.key), alone[row.key], rtol=0, atol=AUDIO_ATOL)
    # On the request path too: an empty piece, no crash.
    pieces = list(engine.stream(SynthesisRequest(["end at once."], params, [40])))
    assert sum(len(p) for p in pieces) == 0


def test_streamed_chunks_equal_the_whole_decode_and_join_without_clicks(engine):
    for row in ROWS:
        sink = Recorder()
        engine.generate_batch([row], sink, chunk_tokens=24)
        whole, _ = run(engine, [row], chunk_tokens=row.max_tokens)
        streamed = sink.audio_of(row.key)
        assert len(sink.chunks[row.key]) > 1
        np.testing.assert_allclose(streamed, whole[row.key], rtol=0, atol=AUDIO_ATOL)
        # At every chunk boundary the step between two samples is no larger than the signal's own
        # steps around it (a click would be a jump far above them).
        steps = np.abs(np.diff(streamed))
        for b in np.cumsum([len(c) for c in sink.chunks[row.key]])[:-1]:
            around = np.concatenate([steps[b - 1 - CROSSFADE_SAMPLES : b - 1], steps[b : b + CROSSFADE_SAMPLES]])
            assert steps[b - 1] <= around.max() + AUDIO_ATOL


def test_every_row_fades_in_and_ends_at_zero(engine):
    sink = Recorder()
    engine.generate_batch(ROWS, sink, chunk_tokens=16)
    ramp = np.linspace(0.0, 1.0, FADE_SAMPLES, dtype=np.float32)
    for row in ROWS:
        audio = sink.audio_of(row.key)
        peak = np.abs(audio).max()
        assert peak > 1e-3 and audio[0] == 0.0 and audio[-1] == 0.0
        assert np.all(np.abs(audio[:FADE_SAMPLES]) <= ramp * peak + 1e-6)
        assert np.all(np.abs(audio[-FADE_SAMPLES:]) <= ramp[::-1] * peak + 1e-6)


def test_refined_rows_are_reproducible_alone_and_in_a_batch(engine):
    refined = BatchRow("r", "refine this text please.", ChatTTSParams(voice_seed=3, seed=9, refine_text=True), 40)
    plain = BatchRow("r", refined.text, ChatTTSParams(voice_seed=3, seed=9), 40)
    _, alone = run(engine, [refined])
    _, batched = run(engine, [ROWS[0], refined])
    _, unrefined = run(engine, [plain])
    np.testing.assert_array_equal(alone["r"], batched["r"])
    assert not np.array_equal(alone["r"], unrefined["r"])


def test_synthesize_and_stream_give_the_same_audio_with_pauses_and_progress(engine):
    segments = ["First part here.", "Second part, a little longer than the first.", "Third.", "Four.", "Five, the end."]
    request = SynthesisRequest(segments, P1)
    progress: dict[str, list[int]] = {"synthesize": [], "stream": []}
    whole = list(engine.synthesize(request, on_segment=progress["synthesize"].append))
    streamed = list(engine.stream(request, chunk_tokens=24, on_segment=progress["stream"].append))
    assert progress["synthesize"] == progress["stream"] == [1, 2, 3, 4, 5]
    assert len(whole) == 2 * len(segments) - 1
    pause = int(PAUSE_SECONDS * SAMPLE_RATE)
    assert sum(1 for p in streamed if len(p) == pause and not p.any()) == len(segments) - 1
    np.testing.assert_allclose(np.concatenate(streamed), np.concatenate(whole), rtol=0, atol=AUDIO_ATOL)


def test_should_stop_ends_a_stream_early(engine):
    request = SynthesisRequest(["First part here.", "Second part here."], P1, [60, 60])
    seen: list[np.ndarray] = []
    pieces = engine.stream(request, should_stop=lambda: len(seen) >= 1, chunk_tokens=8)
    for piece in pieces:
        seen.append(piece)
    total = sum(len(p) for p in seen)
    assert 0 < total < decoded_length(60)


def test_precisions_load_run_and_name_their_model_version():
    for precision in ("bf16", "int8"):
        engine = ChatTTSEngine.load(CHECKPOINT, device="cpu", precision=precision)
        assert engine.model_version.endswith(f"-{precision}-random")
        audio, ids = run(engine, ROWS[:2])
        assert all(np.isfinite(a).all() and np.abs(a).max() > 1e-3 for a in audio.values())
    with pytest.raises(ValueError, match="precision"):
        ChatTTSEngine.load(CHECKPOINT, device="cpu", precision="fp8")


def test_teacher_forcing_with_a_rows_own_tokens_gives_them_back(engine):
    """The benchmark's precision comparison feeds one model's tokens to another (generate(forced=))."""
    _, ids = run(engine, ROWS[:2])
    emb, mask = engine._prompts(ROWS[:2])
    plans = [
        RowPlan(r.key, r.params.seed, r.params.temperature, r.params.top_p, r.params.top_k, r.max_tokens)
        for r in ROWS[:2]
    ]
    forced = {k: torch.from_numpy(v) for k, v in ids.items()}
    sampled: dict[str, list[np.ndarray]] = defaultdict(list)
    for step in generate(engine._gpt_parts(), emb, mask, plans, lambda key: False, forced):
        for i, key in enumerate(step.keys):
            if step.kept[i]:
                sampled[key].append(step.tokens[i].cpu().numpy())
    for key, tokens in ids.items():
        np.testing.assert_array_equal(np.stack(sampled[key]), tokens)


def test_every_segment_of_a_voice_gets_the_voice_s_embedding_and_its_tokens_follow(engine):
    # An organization's voice carries its ChatTTS embedding string: what the engine writes at each
    # segment's [spk_emb] position is that embedding (normalised), in any batch; a voice made from
    # a built-in voice's embedding gives that voice's tokens for a fixed seed.
    import torch.nn.functional as F  # noqa: PLC0415  (this module's other tests need no torch functional)

    speaker = engine.speaker(VOICES["nova"].seed)
    custom = ChatTTSParams(voice_seed=0, seed=8, speaker=speaker)
    builtin = ChatTTSParams(voice_seed=VOICES["nova"].seed, seed=8)
    segments = ["The first segment of a long text.", "A second one, much the same.", "And a third."]
    rows = [BatchRow(f"s{i}", text, custom, 40) for i, text in enumerate(segments)]
    rows.append(BatchRow("other", "Another voice in the same batch.", P2, 40))
    emb, _ = engine._prompts(rows)
    ids, _, _ = engine.chat.tokenizer.encode(
        [
            engine.chat.speaker.decorate_code_prompts(
                [engine.chat.normalizer(r.text, True, True, None)],
                f"[speed_{r.params.speed}]",
                None,
                engine.row_speaker(r.params),
            )[0]
            for r in rows
        ],
        engine.chat.config.gpt.num_vq,
        device=engine.chat.device_gpt,
    )
    at = ids[..., 0].eq(engine.chat.tokenizer.spk_emb_ids)
    expected = F.normalize(torch.from_numpy(engine.chat.speaker._decode(speaker)).float(), dim=0)
    for i in range(len(segments)):
        (position,) = at[i].nonzero().flatten().tolist()
        torch.testing.assert_close(emb[i, position].float().cpu(), expected, rtol=0, atol=1e-3)
    (position,) = at[3].nonzero().flatten().tolist()
    assert not torch.allclose(emb[3, position].float().cpu(), expected, atol=1e-3)  # its own voice
    _, with_custom = run(engine, [BatchRow("c", segments[0], custom, 40)])
    _, with_builtin = run(engine, [BatchRow("c", segments[0], builtin, 40)])
    np.testing.assert_array_equal(with_custom["c"], with_builtin["c"])


def test_a_voice_from_a_recording_speaks_in_a_batch_without_changing_its_companions(engine):
    # ChatTTS's zero-shot speaker: the DVAE's encoder turns a recording into codes (spk_smp) that
    # follow the text, with what the recording says (txt_smp) before it. Random weights: a noise
    # recording and noise out; what holds is the mechanics and the batch invariance.
    rng = np.random.default_rng(4)
    recording = 0.3 * np.sin(np.arange(int(1.5 * SAMPLE_RATE)) * 0.05) + 0.05 * rng.standard_normal(36000)
    sample = engine.sample_speaker(recording.astype(np.float32))
    codes = engine.chat.speaker.decode_prompt(sample)
    assert codes.shape[0] == engine.chat.config.gpt.num_vq and 60 <= codes.shape[1] <= 80  # ~47 a second
    voice = ChatTTSParams(voice_seed=0, seed=6, sample=sample, sample_text="a short reference sentence")
    alone, alone_ids = run(engine, [BatchRow("v", "Spoken with the recorded voice.", voice, 40)])
    _, other_alone = run(engine, [ROWS[1]])
    mixed, mixed_ids = run(engine, [BatchRow("v", "Spoken with the recorded voice.", voice, 40), ROWS[1]])
    np.testing.assert_array_equal(mixed_ids["v"], alone_ids["v"])  # its own noise, in any batch
    np.testing.assert_array_equal(mixed_ids["b"], other_alone["b"])  # and its companion's unchanged
    assert len(alone["v"]) > 0
    plain, plain_ids = run(engine, [BatchRow("v", "Spoken with the recorded voice.", replace(voice, sample=""), 40)])
    assert not np.array_equal(plain_ids["v"], alone_ids["v"])  # the recording is what the row hears


# The static KV cache (inference.chattts.kvcache) against the cache that grows by concatenation
# (inference.chattts.growing, the loop before it): the same tokens for every row, in every way a
# row can be in a batch, and the same hidden states within float32 rounding.


def plans_for(rows, fixed_length=False):
    return [
        RowPlan(
            r.key,
            r.params.seed,
            r.params.temperature,
            r.params.top_p,
            r.params.top_k,
            r.max_tokens,
            r.max_tokens if fixed_length else 0,
        )
        for r in rows
    ]


def generated(engine, parts, rows, joins=None, stop=lambda key, step: False, fixed_length=False):
    """Each row's kept tokens (steps, num_vq) and hidden states, from `generate` on `parts`; rows of
    `joins[n]` join when the loop asks for the n-th time, `stop(key, step)` stops a row."""
    emb, mask = engine._prompts(rows)
    asked = Counter()

    def admit(live):
        asked["n"] += 1
        joining = (joins or {}).get(asked["n"])
        if not joining:
            return None
        new_emb, new_mask = engine._prompts(joining)
        return new_emb, new_mask, plans_for(joining, fixed_length)

    tokens: dict[str, list[np.ndarray]] = defaultdict(list)
    hiddens: dict[str, list[np.ndarray]] = defaultdict(list)
    steps = generate(parts, emb, mask, plans_for(rows, fixed_length), lambda key: stop(key, asked["n"]), admit=admit)
    for step in steps:
        for i, key in enumerate(step.keys):
            if step.kept[i]:
                tokens[key].append(step.tokens[i].cpu().numpy())
                hiddens[key].append(step.hiddens[i].cpu().numpy())
    return {k: np.stack(v) for k, v in tokens.items()}, {k: np.stack(v) for k, v in hiddens.items()}


FOURTH = BatchRow("d", "Yet another sentence, to make four rows.", ChatTTSParams(voice_seed=4, seed=21), 50)
BATCHES = {  # name: (rows, joins, stop)
    "alone": ([ROWS[1]], None, lambda key, step: False),
    "three rows (a free slot runs on CPU), leaving at their ends": (ROWS, None, lambda key, step: False),
    "one stopped midway": (ROWS, None, lambda key, step: key == "b" and step > 20),
    "joining a running batch, a longer prompt than the batch's": (
        [ROWS[2]],
        {3: [ROWS[1]], 9: [ROWS[0], FOURTH]},
        lambda key, step: False,
    ),
    "joining after others left": ([ROWS[2], FOURTH], {40: [ROWS[0], ROWS[1]]}, lambda key, step: False),
}


@pytest.mark.parametrize("name", list(BATCHES))
def test_the_static_cache_gives_the_growing_cache_s_tokens(engine, name):
    rows, joins, stop = BATCHES[name]
    parts = engine._gpt_parts()
    assert parts.static_cache
    static_tokens, static_hiddens = generated(engine, parts, rows, joins, stop)
    growing_tokens, growing_hiddens = generated(engine, replace(parts, static_cache=False), rows, joins, stop)
    every = {r.key for r in rows} | {r.key for joining in (joins or {}).values() for r in joining}
    assert set(static_tokens) == set(growing_tokens) == every
    for key, tokens in growing_tokens.items():
        np.testing.assert_array_equal(static_tokens[key], tokens)
        np.testing.assert_allclose(static_hiddens[key], growing_hiddens[key], rtol=0, atol=1e-4)


def test_a_cache_too_short_compacts_and_grows_and_gives_the_same_tokens(engine, monkeypatch):
    """Columns allocated for half of what the rows need: the loop shifts rows right for a longer
    prompt, drops the columns no row attends to when it is full, and grows when it cannot."""
    shifts: list[int] = []
    lengths: list[int] = []
    shift, allocate = kvcache.StaticKV._shift, kvcache.StaticKV._allocate

    def recorded_shift(self, by):
        shifts.append(by)
        shift(self, by)

    def recorded_allocate(self, like, capacity, length):
        lengths.append(length)
        allocate(self, like, capacity, length)

    monkeypatch.setattr(generation, "_IDLE", [])  # a new cache, not the previous batch's
    monkeypatch.setattr(kvcache, "_round_up", lambda n, quantum: n // 2)
    monkeypatch.setattr(kvcache.StaticKV, "_shift", recorded_shift)
    monkeypatch.setattr(kvcache.StaticKV, "_allocate", recorded_allocate)
    parts = engine._gpt_parts()
    rows, joins = [ROWS[2], FOURTH], {30: [ROWS[1]], 45: [ROWS[0]]}
    static_tokens, _ = generated(engine, parts, rows, joins, fixed_length=True)
    growing_tokens, _ = generated(engine, replace(parts, static_cache=False), rows, joins, fixed_length=True)
    assert any(by < 0 for by in shifts), "never compacted"
    assert any(by > 0 for by in shifts), "never made room for a longer prompt"
    assert len(lengths) > 1 and lengths[-1] > lengths[0], "never grew"
    for key, tokens in growing_tokens.items():
        assert len(tokens) == next(r.max_tokens for r in [*ROWS, FOURTH] if r.key == key)
        np.testing.assert_array_equal(static_tokens[key], tokens)


def test_the_next_batch_reuses_the_cache_and_gives_the_same_tokens(engine):
    parts = engine._gpt_parts()
    first, _ = generated(engine, parts, ROWS)
    (batch,) = generation._IDLE
    allocations, keys = batch.kv.generation, batch.kv.keys[0]
    again, _ = generated(engine, parts, [ROWS[2], ROWS[0]])  # fewer rows, shorter: no new allocation
    assert generation._IDLE == [batch] and batch.kv.generation == allocations and batch.kv.keys[0] is keys
    for key in ("a", "c"):
        np.testing.assert_array_equal(again[key], first[key])
