"""The VoxCPM2 engine: loading, text, voices; with `rows` (its batch loop over the package's modules,
`slots` and `decoder`) and `checkpoint`, the modules that talk to `voxcpm`.

Model source: `model_dir` (a local directory in the official layout: the real download or a random
checkpoint from `checkpoint.make_checkpoint`), else Hugging Face (`openbmb/VoxCPM2`, through
`huggingface_hub.snapshot_download`). Loaded once per worker process with the package's own
`VoxCPM2Model.from_local` (no torch.compile, no denoiser: nothing is fetched at run time), in the
dtype its config.json names (the real weights: bfloat16; the random checkpoints: float32), and
every tensor checked against the files (the package loads non-strictly).

Rows of different requests generate together (`rows.RowBatch`: per-row static slots in both
language models, one patch — 160 ms at 48 kHz — per row a step, rows joining between steps from
`more()` and leaving when they end), each with its voice (a design read before the text, or a
clone's reference whose key/value prefix is kept, `references.Prompts`) and its own seed;
`chunk_tokens` patches make one `Audio` event. A `speed` other than 1 is a time-stretch that keeps
the pitch (`inference.stretch`).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..base import BatchEngine, model_version, pick_device, pick_precision
from ..batch import Audio, BatchRow, Event, Joining
from ..checkpoints import mismatched, read_manifest, sha256_file
from ..device import set_threads
from ..engine import ModelUnavailable
from ..spec import SAMPLE_RATE as RECORDING_RATE  # the rate a recording reaches a worker at
from ..text import numbers
from ..text.preparation import (
    TextError,
    as_written,
    estimate_seconds,
    has_words,
    normalize_segment,
    normalizer_version,
)
from .files import ALTERNATES, ENV, FILES, check_model_dir, unloaded
from .params import VoxCPMParams
from .references import Prompt, Prompts, ReferenceError, pack, unpack
from .spec import PATCHES_PER_SECOND, SPEC
from .voices import VOICES_FILE, read_voices

if TYPE_CHECKING:
    from .rows import RowBatch

logger = logging.getLogger(__name__)

REPO = "openbmb/VoxCPM2"
CODE_VERSION = "rows-batched/1"  # our row loop over the package's modules (`rows`): part of the version


class VoxCPMEngine(BatchEngine):
    spec = SPEC
    check_model_dir = staticmethod(check_model_dir)
    # Measured on an H200 in bfloat16: 64 rows of 32 patches (5.1 s) peaked 1.57 GiB above the
    # model (~25 MiB a row) with 4.5 MiB of KV slots a row; four times that for longer rows.
    ROW_BYTES = 128 * 2**20

    def __init__(
        self,
        model,
        device,
        model_version: str,
        random_weights: bool,
        fixed_length: bool = False,
        builtin: dict[str, dict] | None = None,
    ):
        self.model = model
        self.builtin = builtin  # the built-in voices' references (`voices.VOICES_FILE`), or None
        self.device = device
        self.model_version = model_version
        self.random_weights = random_weights
        self.fixed_length = fixed_length  # benchmarks: every row runs to its budget
        self.prompts = Prompts()  # cloned voices' references and prefixes, by digest
        # The model's modules are shared by the batcher's rows and a task's designed voice: one
        # step at a time (`RowBatch` takes it), each batch with its own slots.
        self._busy = threading.RLock()
        self._idle: list[RowBatch] = []

    @classmethod
    def load(
        cls,
        model_dir: str = "",
        device: str = "",
        hf_cache_dir: str = "",
        fixed_length: bool = False,
        precision: str = "auto",
        threads: int | None = None,
    ) -> VoxCPMEngine:
        import torch  # noqa: PLC0415  (torch/voxcpm: worker processes only)
        from voxcpm.model import voxcpm2  # noqa: PLC0415  (as above)

        if precision != "auto":  # TTS_PRECISION is every worker's: the other engines' values pass, unapplied
            pick_precision(precision, ("fp32", "bf16"))
            logger.warning(
                "VoxCPM2 runs in its checkpoint's dtype (config.json); TTS_PRECISION=%s is not applied", precision
            )
        dev = pick_device(device)
        set_threads(dev, threads)
        path = cls._files(model_dir, hf_cache_dir)
        # Every file the package's loader may read (it prefers the safetensors of each pair).
        sha = {rel: sha256_file(path / rel) for rel in FILES + ALTERNATES + (VOICES_FILE,) if (path / rel).is_file()}
        manifest = read_manifest(path)
        wrong = mismatched(manifest, sha)
        if wrong:
            raise ModelUnavailable(f"{ENV}={path}: {', '.join(wrong)} do not match checkpoint.json's SHA-256.")
        random_weights = bool(manifest and manifest.get("random_weights"))
        dtype = str(json.loads((path / "config.json").read_text()).get("dtype", "bfloat16"))
        precision = "fp32" if dtype in ("float32", "fp32") else "bf16"  # the real weights': bfloat16
        try:
            model = voxcpm2.VoxCPM2Model.from_local(str(path), optimize=False, device=str(dev))
        except Exception as e:  # a shape that does not fit, a file the loader cannot read
            raise ModelUnavailable(f"VoxCPM2 could not load the model in {path}: {e}") from e
        problems = unloaded(model, path)
        if problems:
            raise ModelUnavailable(
                f"VoxCPM2's weights in {path} do not fit its config: {'; '.join(problems[:5])}"
                + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
                + ". The model would run with random weights there."
            )
        version = model_version(
            "voxcpm",
            # The files, our row loop and the spelling-out: each changes the audio of a text.
            [json.dumps(sha, sort_keys=True), CODE_VERSION, normalizer_version(), numbers.version()],
            precision,
            random_weights,
        )
        builtin = cls._builtin_voices(path, model)
        # Our rows keep their own slots (`rows`): the package's one-row caches (8192 positions) go.
        model.base_lm.kv_cache = model.residual_lm.kv_cache = None
        logger.info("model loaded: %s on %s, %d torch threads", version, dev, torch.get_num_threads())
        return cls(model.eval(), dev, version, random_weights, fixed_length, builtin)

    @staticmethod
    def _builtin_voices(path: Path, model) -> dict[str, dict] | None:
        """The built-in voices' references kept beside the model (checked against its shapes), or
        None: the written descriptions then, which vary with the seed (said once, here)."""
        try:
            voices = read_voices(path)
            for voice in (voices or {}).values():
                unpack(voice["sample"], model.patch_size, model.audio_vae.latent_dim)
        except (ValueError, ReferenceError) as e:
            raise ModelUnavailable(
                f"{path / VOICES_FILE} does not fit this model ({e}): make it again with manage.py make_builtin_voices."
            ) from e
        if voices is None:
            logger.warning(
                "no %s beside the model: built-in voices are their written designs, which change with the seed; "
                "make them fixed once with manage.py make_builtin_voices",
                VOICES_FILE,
            )
        return voices

    @staticmethod
    def _files(model_dir: str, hf_cache_dir: str) -> Path:
        if model_dir:
            problem = check_model_dir(model_dir)
            if problem:
                raise ModelUnavailable(problem)
            return Path(model_dir)
        from huggingface_hub import snapshot_download  # noqa: PLC0415  (only when no model directory is set)

        try:
            return Path(snapshot_download(repo_id=REPO, cache_dir=hf_cache_dir or None))
        except Exception as e:
            raise ModelUnavailable(
                f"VoxCPM2 could not download its weights from Hugging Face ({REPO}): {e}. Check the network, or "
                f"download them elsewhere and set {ENV} to that directory."
            ) from e

    def read(self, segment: str, params: VoxCPMParams | None = None) -> str:
        """What VoxCPM2 reads: the segment with its numbers, money, percentages, times and dates
        spelled out in Spanish, French, German or Japanese where it is in one of them
        (`inference.text.numbers`, told from the text), with the English and Chinese grammars every
        engine uses where it is English or Chinese, and as written in its other languages (the model
        reads digits itself); as written wherever the request turned that off (`params.spell_out`)."""
        if params is not None and not params.spell_out:
            return as_written(segment, frozenset(), SPEC.name)
        who = numbers.reading(segment)
        if who == "grammars":
            return normalize_segment(segment, frozenset(), SPEC.name)
        spoken = numbers.spell_out(segment, who) if who else re.sub(r"[ \t]+", " ", segment).strip()
        if not has_words(spoken):
            raise TextError("The input has nothing to say once spelled out (only spaces or symbols).")
        return spoken

    def row_budget(self, text: str, params: VoxCPMParams) -> int:
        """The most patches a row may make: proportional to its text (the package's own cap is six
        patches a text token, plus ten), so a runaway generation stops."""
        seconds = 1.0 + 2.0 * estimate_seconds(text)
        return max(8, math.ceil(seconds * PATCHES_PER_SECOND))

    def voice_problem(self, params: VoxCPMParams) -> str | None:
        """A design is text: any design is a voice, if it leaves the language model room for speech
        (its static cache holds `max_length` steps: the design or the reference, its transcript, the
        text and the audio patches). A clone's reference must be one of this model's."""
        params = params.with_builtin(self.builtin)
        limit = self.model.config.max_length // 4
        tokens = len(self.model.text_tokenizer(params.prompt("")))
        if tokens > limit:
            return (
                f"The voice design (instructions) is {tokens} tokens long; VoxCPM2 takes at most {limit}: shorten it."
            )
        if params.reference:
            try:
                patches = self._prompt(params.reference).patches
            except ReferenceError as e:
                return str(e)
            steps = len(patches) + len(self.model.text_tokenizer(params.reference_text)) + tokens
            if steps > self.model.config.max_length // 2:
                return f"The voice's reference takes {steps} of VoxCPM2's {self.model.config.max_length} steps."
        return None

    def _prompt(self, text: str) -> Prompt:
        """A clone's prompt: its patches as the model's tensor, decoded once, then kept (with the
        prefix its first row builds) while it is among the recently used (`Prompts`)."""
        import torch  # noqa: PLC0415  (torch/voxcpm: worker processes only)

        def decode(packed: str):
            return torch.from_numpy(unpack(packed, self.model.patch_size, self.model.audio_vae.latent_dim))

        return self.prompts.get(text, decode)

    def voice_from_recording(self, recording: np.ndarray, transcript: str, rate: int = RECORDING_RATE) -> dict:
        """A cloned voice from a reference recording (mono float32 at `rate`: 24 kHz as a worker
        receives one) and what it says ("" when not given): AudioVAE V2's latent patches of it at
        16 kHz (padded at the start to whole patches, as the package pads a prompt), and the
        transcript as the model reads it."""
        import librosa  # noqa: PLC0415  (a dependency of voxcpm: worker processes only)
        import torch  # noqa: PLC0415  (as above)

        encoded = self.model._encode_sample_rate
        audio = librosa.resample(np.asarray(recording, dtype=np.float32), orig_sr=rate, target_sr=encoded)
        patch = self.model.patch_size * self.model.chunk_size
        audio = np.pad(audio, ((-len(audio)) % patch, 0))
        with torch.inference_mode():
            feat = self.model.audio_vae.encode(torch.from_numpy(audio)[None].to(self.device), encoded).cpu().float()
        patches = feat.view(self.model.audio_vae.latent_dim, -1, self.model.patch_size).permute(1, 2, 0)
        return {"sample": pack(patches.numpy()), "sample_text": self.read(transcript) if transcript else ""}

    def voice_from_design(self, design: str, seed: int, text: str) -> dict:
        """A designed voice made fixed: `text` spoken once in the design under `seed`, and that
        sample kept as the voice's reference with what it says (`voice_from_recording`), so every
        later request sounds like it (a design alone varies from run to run)."""
        read = self.read(text)
        params = VoxCPMParams(design=design, seed=seed)
        row = BatchRow("design", read, params, self.row_budget(read, params))
        audio = [e.samples for e in self.run_rows([row], lambda key: False) if isinstance(e, Audio)]
        if not audio:
            raise ValueError("the design made no audio")
        return self.voice_from_recording(np.concatenate(audio), text, rate=SPEC.sample_rate)  # 48 kHz: once to 16

    def run_rows(
        self,
        rows: list[BatchRow],
        stop: Callable[[str], bool],
        chunk_tokens: int = 24,
        more: Joining | None = None,
    ) -> Iterator[Event]:
        """`generate_batch` as an iterator of events: the rows generate together, one patch each a
        step (`rows.RowBatch`), the rows `more` returns joining between steps; each row's audio
        every `chunk_tokens` patches and its end (`Done.tokens`: patches)."""
        if len({r.key for r in rows}) != len(rows):
            raise ValueError("the rows' keys must be unique within a batch")
        if chunk_tokens < 1:
            raise ValueError("chunk_tokens must be at least 1")
        batch = self._idle.pop() if self._idle else self._new_batch()

        def joining(live: int, urgent: bool = False) -> list[BatchRow]:
            joined = (more(live, urgent=True) if urgent else more(live)) if more is not None else []
            return [self._resolved(r) for r in joined]

        try:
            yield from batch.run([self._resolved(r) for r in rows], stop, chunk_tokens, joining, self._prompt)
        finally:
            self._idle.append(batch)  # its slots stay allocated for the next batch

    def _resolved(self, row: BatchRow) -> BatchRow:
        """The row with its built-in voice resolved (its kept reference, else its description)."""
        return replace(row, params=row.params.with_builtin(self.builtin)) if row.params.builtin else row

    def keep_voice_prompts(self, max_bytes: int) -> None:
        self.prompts.max_bytes = max_bytes
        self.prompts.trim()

    def voice_prompt_counts(self) -> tuple[int, int]:
        return self.prompts.built, self.prompts.bytes

    def _new_batch(self) -> RowBatch:
        from .rows import RowBatch  # noqa: PLC0415  (torch/voxcpm: worker processes only)

        return RowBatch(self.model, self.device, self.prompts, self._busy, self.fixed_length)

    def warm_up(self) -> None:
        """A first generation: the allocator's and kernels' first-use costs at start, not on a request."""
        params = VoxCPMParams(design="", seed=0)
        for _ in self.run_rows([BatchRow("warm", "Hi.", params, 4)], lambda key: False):
            pass
