"""Kokoro's forward pass over a batch of rows (`decode`, `forward`): the text side for every row at
once (ALBERT, the encoders, durations, each row's alignment), then the decoder over padded rows in
groups of similar length (`model`).

A row whose first audio is awaited (`early`: a live request's first sentence) is decoded in
windows (`_windows`) and its first goes out as soon as it is decoded. Its text side, durations, F0/N
curves, harmonic source and the decoder's frame-rate blocks are the whole sentence's; the generator
(iSTFTNet's upsampling and resblocks: nearly all of the decoder's work) runs over FIRST_WINDOW_FRAMES
frames of the alignment from the end of the model's opening silence (~0.3 s that the engine trims
anyway: `silence`), then over MIDDLE_WINDOW_FRAMES more, then over the rest, each with
WINDOW_CONTEXT_FRAMES of the alignment on either side (decoded, discarded; the middle window from
frame 0), joined by CROSSFADE_SAMPLES crossfades. One utterance: its intonation and pauses are the
sentence's own (cutting the text instead made two). The first window is all speech (0.6 s at speed
1), not half silence; the windows grow (0.6 s, 1.2 s, the rest) so that each is made about when
the audio before it has played (a player on a 2-core CPU waited 0.1-0.55 s once, not 1.2-1.4 s).

Convolution alone would make the windows' audio the sentence's exactly (8 frames of context cover
the generator's receptive field), but its 48 instance norms take their statistics over the time
they see: with the whole sentence's statistics replayed a windowed decode equals the whole one to
~110 dB; with each window's own it differs (~5-15 dB SNR), and more the shorter the window. Heard
by Whisper base on 32 read sentences (real weights): whole 9.1 % WER; a first window of 0.8 s then
the rest 9.5 % (0.6 s with 1 s of right context: 8.8 %); windows that kept doubling after the first
(0.8, 1.6, 3.2 s: the statistics of short middle windows) 13.0 %. Hence the first window short for
its latency, the middle one decoded from the sentence's start (statistics over 2.3 s, at the cost
of re-decoding 0.9 s), the rest long for its statistics: REST heard at 8.6 % against 8.8 % for the
sentences decoded whole (docs/benchmarks.md).

The middle window is for a listener served alone on a machine too slow to make the rest in time.
Where other listeners' audio is being made too (`crowded`: other rows awaited in the same forward,
or other forwards taking turns), it is not made: the rest follows the first window at once, with
context on either side as the first. The middle window re-decodes the sentence from frame 0 (~40 %
more generator work for a 3.7 s sentence), which only pays while the machine has time to spare;
when it is shared, that work is taken from the other listeners (8 clients at once:
docs/benchmarks.md). Nor is it made where the rest, at the pace the first window was decoded (per
frame, its context included: a little slow for the longer rest), is made within AHEAD of the first
window's audio: the listener is fed without it (int8 on this project's 2-core CPU: sentences up to
~6 s; a GPU: every sentence).
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .model import (
    STYLE_DIM,
    Abandoned,
    RowInput,
    RowOutput,
    decoder_features,
    decoder_groups,
    f0_n,
    generate,
    harmonics,
    lstm,
    run_decoder,
)
from .text import FRAMES_PER_SECOND, SAMPLES_PER_FRAME

FIRST_WINDOW_FRAMES = 24  # an early row's first window: 0.6 s of speech at speed 1, after the opening silence
WINDOW_CONTEXT_FRAMES = 8  # of the alignment on either side of a window, decoded and discarded (0.2 s)
CROSSFADE_SAMPLES = 480  # 20 ms across each join of two windows
# An early row's second window (1.2 s at speed 1): made within the first's 0.6 s of audio here, it
# keeps the listener fed while the third (the rest) decodes. It is decoded from frame 0 (its
# statistics over the sentence so far; decoded alone they were heard at 11.9 % WER, against 8.6 %).
MIDDLE_WINDOW_FRAMES = 48
# A listener served alone gets no middle window either where the rest, at the pace the first window
# was decoded, is made within this share of the first window's audio: the middle one only keeps a
# listener fed on a machine too slow to make the rest in time (and costs ~40 % more generator work).
AHEAD = 0.75


@dataclass(frozen=True)
class Decoded:
    """Audio of row `row`, in order: a window of an early row (`last` False until its final one), or
    a row whole."""

    row: int
    audio: np.ndarray  # float32
    durations: np.ndarray  # the row's frames per input (the same in each of its chunks)
    last: bool
    skipped: int = 0  # frames of the row's opening silence not decoded into its first chunk


def _windows(frames: int, skip: int = 0, first: int = FIRST_WINDOW_FRAMES) -> list[tuple[int, int]]:
    """An early row's windows, [start, end) in frames: `first` frames from `skip` (the opening
    silence that is trimmed anyway: the window is speech, not silence), MIDDLE_WINDOW_FRAMES, then the
    rest; the middle one left out where the rest would be under 1.5 first windows, and a row within
    1.5 first windows of speech whole (from frame 0)."""
    if frames - skip <= 1.5 * first:
        return [(0, frames)]
    middle = skip + first + MIDDLE_WINDOW_FRAMES
    if MIDDLE_WINDOW_FRAMES and frames - middle > 1.5 * first:
        return [(skip, skip + first), (skip + first, middle), (middle, frames)]
    return [(skip, skip + first), (skip + first, frames)]


@dataclass(frozen=True)
class _Sentences:
    """The text side of a batch: each row's alignment, prosody input, styles and durations."""

    asr: torch.Tensor  # (rows, 512, frames): the text encoder's features, aligned
    en: torch.Tensor  # (rows, channels, frames): the prosody encoder's, aligned
    ref_s: torch.Tensor  # (rows, 256): decoder style, prosody style
    frames: torch.Tensor  # (rows,)
    durations: list[np.ndarray]  # frames per input of each row


def _text_side(model, rows: Sequence[RowInput]) -> _Sentences:
    device = model.device
    lengths = torch.tensor([len(r.ids) + 2 for r in rows])  # + the start and end inputs (id 0)
    if int(lengths.max()) > model.context_length:
        longest, limit = int(lengths.max()) - 2, model.context_length - 2
        raise ValueError(f"a row has {longest} phonemes; Kokoro reads at most {limit}")
    width = int(lengths.max())
    input_ids = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        input_ids[i, 1 : len(r.ids) + 1] = torch.tensor(list(r.ids), dtype=torch.long)
    input_ids = input_ids.to(device)
    text_mask = (torch.arange(width)[None, :] >= lengths[:, None]).to(device)  # True: padding
    ref_s = torch.stack([r.style.reshape(-1) for r in rows]).to(device)
    s = ref_s[:, STYLE_DIM:]
    speed = torch.tensor([float(r.speed) for r in rows], device=device)

    bert = model.bert(input_ids, attention_mask=(~text_mask).int())
    d_en = model.bert_encoder(bert).transpose(-1, -2)
    d = model.predictor.text_encoder(d_en, s, lengths, text_mask)
    x = lstm(model.predictor.lstm, d, lengths)
    duration = torch.sigmoid(model.predictor.duration_proj(x)).sum(dim=-1) / speed[:, None]
    pred_dur = torch.round(duration).clamp(min=1).long().masked_fill(text_mask, 0)
    frames = pred_dur.sum(dim=1)

    # Each row's alignment: input t covers pred_dur[t] consecutive frames.
    alignment = torch.zeros(len(rows), width, int(frames.max()), device=device)
    for i in range(len(rows)):
        n = int(frames[i])
        index = torch.repeat_interleave(torch.arange(width, device=device), pred_dur[i])
        alignment[i, index, torch.arange(n, device=device)] = 1
    en = d.transpose(-1, -2) @ alignment
    asr = model.text_encoder(input_ids, lengths, text_mask) @ alignment
    durations = [pred_dur[i, : int(lengths[i])].cpu().numpy() for i in range(len(rows))]
    return _Sentences(asr, en, ref_s, frames, durations)


def _windowed(
    model,
    side: _Sentences,
    i: int,
    dtype: torch.dtype | None,
    stopped: Callable[[int], bool],
    skip: int,
    crowded: Callable[[], bool] = lambda: False,
) -> Iterator[Decoded]:
    """Row `i` decoded in `_windows`, each window's audio as soon as it is made (module docstring);
    its first `skip` frames (opening silence) not in its audio, where it is windowed. Once the first
    window is out the rest is one window (no middle one) where it is made within AHEAD of the first
    window's audio at the first window's pace, or else where `crowded()`."""
    n = int(side.frames[i])
    frames = side.frames[i : i + 1]
    s, ref = side.ref_s[i : i + 1, STYLE_DIM:], side.ref_s[i : i + 1, :STYLE_DIM]
    f0, noise = f0_n(model.predictor, side.en[i : i + 1, :, :n], s, frames)
    har = harmonics(model.decoder.generator, f0, frames)
    features = decoder_features(model.decoder, side.asr[i : i + 1, :, :n], f0, noise, ref, frames)
    windows = _windows(n, min(skip, n))
    half, held = CROSSFADE_SAMPLES // 2, None
    ramp = np.linspace(0.0, 1.0, 2 * half, dtype=np.float32)
    pace = 0.0  # seconds a decoded frame took in the first window
    for k in itertools.count():
        if k == len(windows):
            break
        if k == 1 and len(windows) == 3:
            rest = n - max(0, windows[0][1] - WINDOW_CONTEXT_FRAMES)  # frames the rest would decode
            in_time = rest * pace <= AHEAD * (windows[0][1] - windows[0][0]) / FRAMES_PER_SECOND
            if in_time or crowded():
                windows = [windows[0], (windows[0][1], n)]
        start, end = windows[k]
        middle = 0 < k < len(windows) - 1  # from frame 0: the sentence's statistics so far
        lo, hi = 0 if middle else max(0, start - WINDOW_CONTEXT_FRAMES), min(n, end + WINDOW_CONTEXT_FRAMES)
        began = time.perf_counter()
        try:
            (audio,) = generate(
                model.decoder.generator,
                features[:, :, 2 * lo : 2 * hi],
                ref,
                f0[:, 2 * lo : 2 * hi],
                torch.tensor([hi - lo], device=frames.device),
                dtype,
                har[:, :, 120 * lo : 120 * hi + 1],
                abandon=lambda: stopped(i),
            )
        except Abandoned:  # stopped while this window decoded: nothing more of the row
            return
        first = (start - lo) * SAMPLES_PER_FRAME - (half if k else 0)
        last = (end - lo) * SAMPLES_PER_FRAME + (half if end < n else 0)
        chunk = audio.float().cpu().numpy()[first:last].copy()
        pace = pace or (time.perf_counter() - began) / (hi - lo)  # after the copy: a GPU has finished
        if held is not None:
            chunk[: 2 * half] = held * ramp[::-1] + chunk[: 2 * half] * ramp
        final = k == len(windows) - 1
        if not final:
            held, chunk = chunk[-2 * half :].copy(), chunk[: -2 * half]
        yield Decoded(i, chunk, side.durations[i], final, windows[0][0])
        if not final and stopped(i):
            return


def _all_stopped(stopped: Callable[[int], bool], rows: Sequence[int]) -> bool:
    return all(stopped(i) for i in rows)


@torch.inference_mode()
def decode(
    model,
    rows: Sequence[RowInput],
    decoder_rows: int = 0,
    dtype: torch.dtype | None = None,
    early: Collection[int] = (),
    stopped: Callable[[int], bool] = lambda i: False,
    silence: Callable[[np.ndarray], int] = lambda durations: 0,
    deadlines: Sequence[float | None] = (),
    crowded: Callable[[], bool] = lambda: False,
) -> Iterator[Decoded]:
    """`rows` through `model` (a loaded `kokoro.KModel`) in one padded batch: each row's audio
    (float32, 24 kHz) and its predicted durations. The rows in `early` come first, in windows as they
    are decoded: every one's first window, then each one's rest (`stopped(i)` ends row i's between
    windows, its last chunk not `last`); the others whole, in decoder groups (`decoder_rows`: the most
    rows the decoder runs at once, 0: any; one on a CPU), a row stopped before its group is decoded
    yielding nothing. `silence(durations)`: the frames of an early row's opening silence its first
    window may start after (`Decoded.skipped` says how many it did).
    `deadlines`: each row's (`BatchRow.deadline`, None: none): the decoder groups go earliest first,
    then longest first. `dtype`: the generator's resblocks in it (bfloat16), else float32.
    `crowded()`: whether other listeners are being served beside this forward (another forward
    taking turns with it); with it, or with more than one early row here, an early row's rest follows
    its first window whole (no middle window: module docstring)."""
    if not rows:
        return
    side = _text_side(model, rows)
    shared = lambda: len(early) > 1 or crowded()  # noqa: E731
    windowed = [_windowed(model, side, i, dtype, stopped, silence(side.durations[i]), shared) for i in sorted(early)]
    for chunks in windowed:  # every awaited row's first window before any row's second: each
        first = next(chunks, None)  # listener's sentence begins one window apart, not a sentence
        if first is not None:
            yield first
    for chunks in windowed:
        yield from chunks
    rest = [i for i in range(len(rows)) if i not in early]
    frame_counts = side.frames.tolist()
    s = side.ref_s[:, STYLE_DIM:]
    groups = [[rest[j] for j in g] for g in decoder_groups([frame_counts[i] for i in rest], decoder_rows)]
    if deadlines:  # whose listener runs out first (a stable sort: longest first among the rest)
        groups.sort(key=lambda g: min((d for i in g if (d := deadlines[i]) is not None), default=math.inf))
    for group in groups:
        group = [i for i in group if not stopped(i)]  # a stop is seen before each group
        if not group:
            continue
        index = torch.tensor(group, device=model.device)
        span = max(frame_counts[i] for i in group)
        f0, n = f0_n(model.predictor, side.en[index, :, :span], s[index], side.frames[index])
        try:
            decoded = run_decoder(
                model.decoder,
                side.asr[index, :, :span],
                f0,
                n,
                side.ref_s[index, :STYLE_DIM],
                side.frames[index],
                dtype,
                abandon=functools.partial(_all_stopped, stopped, group),
            )
        except Abandoned:  # every row of the group stopped while it decoded
            continue
        for i, samples in zip(group, decoded, strict=True):
            yield Decoded(i, samples.float().cpu().numpy(), side.durations[i], True)


def forward(
    model, rows: Sequence[RowInput], decoder_rows: int = 0, dtype: torch.dtype | None = None
) -> list[RowOutput]:
    """`decode`'s rows, each whole, in their order: its audio and its durations."""
    out = {d.row: RowOutput(d.audio, d.durations) for d in decode(model, rows, decoder_rows, dtype)}
    return [out[i] for i in range(len(rows))]
