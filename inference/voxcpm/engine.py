"""The VoxCPM2 engine: the one module (with `checkpoint`) that talks to `voxcpm`.

Model source: `model_dir` (a local directory in the official layout: the real download or a random
checkpoint from `checkpoint.make_checkpoint`), else Hugging Face (`openbmb/VoxCPM2`, through
`huggingface_hub.snapshot_download`). Loaded once per worker process with the package's own
`VoxCPM2Model.from_local` (no torch.compile, no denoiser: nothing is fetched at run time), in the
dtype its config.json names (the real weights: bfloat16; the random checkpoints: float32), and
every tensor checked against the files (the package loads non-strictly).

Rows run one after another through the package's generation with a voice design
(`VoxCPMParams.prompt`), each under its own seed, streaming one patch (160 ms at 48 kHz) per
language-model step; `chunk_tokens` patches make one `Audio` event, and `more()` between rows gives
the rows that join. The package keeps a static KV cache for one row, so rows do not share a step
yet (the spec says `batching: False`). A `speed` other than 1 is a time-stretch that keeps the pitch
(`inference.stretch`).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from .. import numbers
from ..base import BatchEngine, model_version, pick_device, pick_precision
from ..batch import Audio, BatchRow, Done, Event
from ..checkpoints import mismatched, read_manifest, sha256_file
from ..device import set_threads
from ..engine import ModelUnavailable, fade_in
from ..spec import SAMPLE_RATE as RECORDING_RATE  # the rate a recording reaches a worker at
from ..stretch import TimeStretch
from ..text import TextError, estimate_seconds, has_words, normalize_segment, normalizer_version
from .checkpoint import ALTERNATES, ENV, FILES, check_model_dir, unloaded
from .params import VoxCPMParams
from .references import ReferenceError, References, pack, unpack
from .spec import PATCHES_PER_SECOND, SPEC

logger = logging.getLogger(__name__)

REPO = "openbmb/VoxCPM2"
CODE_VERSION = "rows-one-by-one/1"  # our row loop over the package's generation: part of the version
MIN_PATCHES = 2  # the package's own min_len: no end before this many patches


def _no_progress_bar(iterable, *args, **kwargs):
    return iterable


class VoxCPMEngine(BatchEngine):
    spec = SPEC
    check_model_dir = staticmethod(check_model_dir)

    def __init__(self, model, device, model_version: str, random_weights: bool, fixed_length: bool = False):
        self.model = model
        self.device = device
        self.model_version = model_version
        self.random_weights = random_weights
        self.fixed_length = fixed_length  # benchmarks: every row runs to its budget
        self.references = References()  # cloned voices' decoded references, by digest
        # The package's language models keep one row's cache: one row at a time, whichever thread
        # (the batcher's rows, a task's designed voice) runs it.
        self._busy = threading.RLock()

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

        voxcpm2.tqdm = _no_progress_bar  # its generation loop draws a progress bar on stderr, every row

        if precision != "auto":  # TTS_PRECISION is every worker's: the other engines' values pass, unapplied
            pick_precision(precision, ("fp32", "bf16"))
            logger.warning(
                "VoxCPM2 runs in its checkpoint's dtype (config.json); TTS_PRECISION=%s is not applied", precision
            )
        dev = pick_device(device)
        set_threads(dev, threads)
        path = cls._files(model_dir, hf_cache_dir)
        # Every file the package's loader may read (it prefers the safetensors of each pair).
        sha = {rel: sha256_file(path / rel) for rel in FILES + ALTERNATES if (path / rel).is_file()}
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
        logger.info("model loaded: %s on %s, %d torch threads", version, dev, torch.get_num_threads())
        return cls(model.eval(), dev, version, random_weights, fixed_length)

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

    def read(self, segment: str) -> str:
        """What VoxCPM2 reads: the segment with its numbers, money, percentages, times and dates
        spelled out in Spanish, French, German or Japanese where it is in one of them
        (`inference.numbers`), with the English and Chinese grammars every engine uses where it is
        English or Chinese, and as written in its other languages (the model reads digits itself)."""
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
        limit = self.model.config.max_length // 4
        tokens = len(self.model.text_tokenizer(params.prompt("")))
        if tokens > limit:
            return (
                f"The voice design (instructions) is {tokens} tokens long; VoxCPM2 takes at most {limit}: shorten it."
            )
        if params.reference:
            try:
                patches = self._reference(params.reference)
            except ReferenceError as e:
                return str(e)
            steps = len(patches) + len(self.model.text_tokenizer(params.reference_text)) + tokens
            if steps > self.model.config.max_length // 2:
                return f"The voice's reference takes {steps} of VoxCPM2's {self.model.config.max_length} steps."
        return None

    def _reference(self, text: str):
        """A clone's patches as the model's tensor (decoded once, then kept)."""
        import torch  # noqa: PLC0415  (torch/voxcpm: worker processes only)

        def decode(packed: str):
            return torch.from_numpy(unpack(packed, self.model.patch_size, self.model.audio_vae.latent_dim))

        return self.references.get(text, decode)

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
        with self._busy:
            row = BatchRow("design", read, params, self.row_budget(read, params))
            audio = [e.samples for e in self._row(row, lambda key: False, 24) if isinstance(e, Audio)]
        if not audio:
            raise ValueError("the design made no audio")
        return self.voice_from_recording(np.concatenate(audio), text, rate=SPEC.sample_rate)  # 48 kHz: once to 16

    def _prompt_cache(self, p: VoxCPMParams) -> dict | None:
        """The package's prompt cache for the row's voice: none for a design, the reference's
        patches (both as reference and as the continued prompt, the package's closest cloning)."""
        if p.mode == "design":
            return None
        patches = self._reference(p.reference)
        if p.mode == "reference":
            return {"mode": "reference", "ref_audio_feat": patches}
        return {
            "mode": "ref_continuation",
            "ref_audio_feat": patches,
            "audio_feat": patches,
            "prompt_text": p.reference_text + " ",
        }

    def run_rows(
        self,
        rows: list[BatchRow],
        stop: Callable[[str], bool],
        chunk_tokens: int = 24,
        more: Callable[[int], list[BatchRow]] | None = None,
    ) -> Iterator[Event]:
        """`generate_batch` as an iterator of events: each row in turn (the rows `more` returns
        join the queue), its audio every `chunk_tokens` patches and its end (`Done.tokens`: patches)."""
        if len({r.key for r in rows}) != len(rows):
            raise ValueError("the rows' keys must be unique within a batch")
        if chunk_tokens < 1:
            raise ValueError("chunk_tokens must be at least 1")
        queue, seen = list(rows), {r.key for r in rows}
        while queue:
            row = queue.pop(0)
            with self._busy:
                yield from self._row(row, stop, chunk_tokens)
            for joining in more(len(queue)) if more is not None else []:
                if joining.key in seen:
                    raise ValueError("the rows' keys must be unique within a batch")
                seen.add(joining.key)
                queue.append(joining)

    def _row(self, row: BatchRow, stop: Callable[[str], bool], chunk_tokens: int) -> Iterator[Event]:
        import torch  # noqa: PLC0415  (torch/voxcpm: worker processes only)

        p: VoxCPMParams = row.params
        if stop(row.key):
            yield Done(row.key, 0, np.zeros(0, dtype=np.int64))
            return
        budget = max(1, row.max_tokens)
        stretch = TimeStretch(SPEC.sample_rate, p.speed) if p.speed != 1.0 else None
        patches, pending, first = 0, [], True
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # the row's own noise: same seed, same audio
            torch.manual_seed(p.seed)
            steps = self.model._generate_with_prompt_cache(
                target_text=p.prompt(row.text),
                prompt_cache=self._prompt_cache(p),
                min_len=budget if self.fixed_length else min(MIN_PATCHES, budget),
                max_len=budget,
                inference_timesteps=p.inference_timesteps,
                cfg_value=p.cfg_value,
                streaming=True,
            )
            try:
                for wav, _, _ in self._guarded(steps, row.key):
                    patches += 1
                    pending.append(wav.reshape(-1).float().numpy())
                    if stop(row.key):
                        break
                    if len(pending) >= chunk_tokens:
                        audio = self._out(pending, stretch, first)
                        first, pending = False, []
                        if len(audio):
                            yield Audio(row.key, audio)
            finally:
                steps.close()
        tail = self._out(pending, stretch, first) if pending else np.zeros(0, dtype=np.float32)
        if stretch is not None:
            tail = np.concatenate([tail, stretch.finish()])
        if len(tail):
            yield Audio(row.key, tail)
        yield Done(row.key, patches, np.zeros(0, dtype=np.int64))

    @staticmethod
    def _guarded(steps, key: str):
        """The package's steps; a row that outgrows the language model's static cache ends where it
        is (what it made is kept), instead of failing every row of the batch."""
        try:
            yield from steps
        except ValueError as e:
            if "KV cache is full" not in str(e):
                raise
            logger.warning("row %s ended early: the language model's cache is full", key)

    @staticmethod
    def _out(pending: list[np.ndarray], stretch: TimeStretch | None, first: bool) -> np.ndarray:
        audio = np.concatenate(pending)
        if first:
            audio = fade_in(audio, SPEC.sample_rate)  # a row starts from silence, not mid-wave
        return stretch.feed(audio) if stretch is not None else audio

    def warm_up(self) -> None:
        """A first generation: the allocator's and kernels' first-use costs at start, not on a request."""
        params = VoxCPMParams(design="", seed=0)
        for _ in self.run_rows([BatchRow("warm", "Hi.", params, 4)], lambda key: False):
            pass
