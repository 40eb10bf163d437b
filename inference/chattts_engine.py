"""The ChatTTS engine: the one module that talks to the `chattts` package.

Model source: `model_dir` (a local directory in the official layout, either ChatTTS's released
weights or a checkpoint made by `inference.checkpoint`), else ChatTTS's own Hugging Face download.
Loaded once per worker process, on `device` (cuda when present).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from . import checkpoint
from .engine import ModelUnavailable, SynthesisParams, SynthesisRequest, fade_edges, fade_in, pause, ramp_down
from .text import SAMPLE_RATE, SAMPLES_PER_TOKEN, token_budget

logger = logging.getLogger(__name__)

MAX_BATCH = 4  # segments per model call; streaming misbehaves above 4 (CHATTTS_NOTES.md)


class ChatTTSEngine:
    sample_rate = SAMPLE_RATE

    def __init__(self, chat, device, model_version: str, random_weights: bool, fixed_length: bool = False):
        self.chat = chat
        # Benchmarks only: every generation runs to its token budget (no early end token), so
        # runs compare equal work.
        self.fixed_length = fixed_length
        self.device = device
        self.model_version = model_version
        self.random_weights = random_weights
        self._speakers: dict[int, str] = {}

    @classmethod
    def load(
        cls, model_dir: str = "", device: str = "", hf_cache_dir: str = "", fixed_length: bool = False
    ) -> ChatTTSEngine:
        import ChatTTS  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
        import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        from .checkpoint import build_config  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        chat = ChatTTS.Chat(logging.getLogger("ChatTTS"))
        random_weights = False
        if model_dir:
            problem = check_model_dir(model_dir)
            if problem:
                raise ModelUnavailable(problem)
            manifest = checkpoint.read_manifest(model_dir)
            if manifest is not None:
                chat.config = build_config(manifest["config"])
                chat.sha256_map = manifest["sha256"]
                random_weights = bool(manifest.get("random_weights"))
            fingerprint = json.dumps(chat.sha256_map, sort_keys=True)
            # "custom" verifies every file against the SHA-256 map; never "local" (it renames files).
            ok = chat.load(source="custom", custom_path=model_dir, device=dev)
            if not ok:
                raise ModelUnavailable(
                    f"ChatTTS could not load the model in TTS_MODEL_DIR={model_dir}: a file's SHA-256 "
                    "does not match (a partial copy?). See the worker log for the file."
                )
        else:
            ok = chat.load(source="huggingface", custom_path=hf_cache_dir or None, device=dev)
            if not ok:
                raise ModelUnavailable(
                    "ChatTTS could not download its weights from Hugging Face (2Noise/ChatTTS). Check the "
                    "network, or download them elsewhere and set TTS_MODEL_DIR to that directory."
                )
            fingerprint = json.dumps(chat.sha256_map, sort_keys=True)
        digest = hashlib.sha256(fingerprint.encode()).hexdigest()[:12]
        version = f"chattts-{digest}{'-random' if random_weights else ''}"
        logger.info("model loaded: %s on %s, %d torch threads", version, dev, torch.get_num_threads())
        return cls(chat, dev, version, random_weights, fixed_length)

    def speaker(self, voice_seed: int) -> str:
        """The voice's speaker embedding, sampled from the model's speaker statistics."""
        import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        if voice_seed not in self._speakers:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(voice_seed)
                self._speakers[voice_seed] = self.chat.sample_random_speaker()
        return self._speakers[voice_seed]

    def _params(self, p: SynthesisParams, max_tokens: int):
        import ChatTTS  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        code = ChatTTS.Chat.InferCodeParams(
            prompt=f"[speed_{p.speed}]",
            spk_emb=self.speaker(p.voice_seed),
            temperature=p.temperature,
            top_P=p.top_p,
            top_K=p.top_k,
            max_new_token=max_tokens,
            min_new_token=max_tokens if self.fixed_length else 0,
            manual_seed=p.seed,
            show_tqdm=False,
        )
        refine = ChatTTS.Chat.RefineTextParams(prompt=p.refine_prompt, manual_seed=p.seed, show_tqdm=False)
        return code, refine

    def synthesize(
        self,
        request: SynthesisRequest,
        should_stop: Callable[[], bool] | None = None,
        on_segment: Callable[[int], None] | None = None,
    ) -> Iterator[np.ndarray]:
        p = request.params
        budgets = request.max_tokens or [token_budget(s) for s in request.segments]
        first = True
        for start in range(0, len(request.segments), MAX_BATCH):
            if should_stop is not None and should_stop():
                return
            texts = list(request.segments[start : start + MAX_BATCH])
            limits = budgets[start : start + MAX_BATCH]
            code, refine = self._params(p, max(limits))
            wavs = self.chat.infer(
                texts,
                split_text=False,
                skip_refine_text=not p.refine_text,
                use_decoder=p.use_decoder,
                do_text_normalization=True,  # text is normalised already; this maps leftovers
                params_infer_code=code,
                params_refine_text=refine,
            )
            for wav, limit in zip(wavs, limits, strict=True):
                # One batch shares one max_new_token: hold every segment to its own budget.
                audio = np.asarray(wav, dtype=np.float32).reshape(-1)[: limit * SAMPLES_PER_TOKEN]
                if not first:
                    yield pause()
                first = False
                yield fade_edges(audio)
            if on_segment is not None:
                on_segment(start + len(texts))

    def stream(
        self,
        request: SynthesisRequest,
        should_stop: Callable[[], bool] | None = None,
        chunk_tokens: int = 24,
        on_segment: Callable[[int], None] | None = None,
    ) -> Iterator[np.ndarray]:
        """Yield audio while it is generated: about `chunk_tokens` tokens (24 ≈ 0.5 s) at a time.

        Segments run one after another (the first audio matters more than batch throughput).
        ChatTTS's stream defaults are tuned here: no skipped first yields (pass_first_n_batches=0)
        and a chunk size that keeps up with generation (stream_speed = chunk_tokens × 512).
        """
        p = request.params
        budgets = request.max_tokens or [token_budget(s) for s in request.segments]
        for index, (segment, limit) in enumerate(zip(request.segments, budgets, strict=True)):
            if index:
                yield pause()
            code, refine = self._params(p, limit)
            code.stream_batch = chunk_tokens
            code.stream_speed = chunk_tokens * SAMPLES_PER_TOKEN
            code.pass_first_n_batches = 0
            chunks = self.chat.infer(
                [segment],
                stream=True,
                split_text=False,
                skip_refine_text=not p.refine_text,
                use_decoder=p.use_decoder,
                params_infer_code=code,
                params_refine_text=refine,
            )
            left = limit * SAMPLES_PER_TOKEN
            first, last = True, 0.0
            try:
                for wavs in chunks:
                    audio = np.asarray(wavs, dtype=np.float32).reshape(-1)[:left]
                    if audio.size == 0:
                        continue
                    left -= audio.size
                    if first:
                        audio = fade_in(audio)
                        first = False
                    last = float(audio[-1])
                    yield audio
                    if should_stop is not None and should_stop():
                        return
            finally:
                chunks.close()  # stops ChatTTS's generation loop
            if last:
                yield ramp_down(last)
            if on_segment is not None:
                on_segment(index + 1)

    def warm_up(self) -> None:
        """The first inference compiles numba code (~1.3 s): pay it at start, not on a request."""
        params = SynthesisParams(voice_seed=1, seed=0)
        for _ in self.synthesize(SynthesisRequest(segments=["warm up."], params=params, max_tokens=[8])):
            pass


def check_model_dir(model_dir: str) -> str | None:
    """A clear message if `model_dir` cannot hold a model; cheap (no hashing, no torch)."""
    path = Path(model_dir)
    if not path.is_dir():
        return f"TTS_MODEL_DIR={model_dir} does not exist or is not a directory."
    missing = checkpoint.missing_files(path)
    if missing:
        return f"TTS_MODEL_DIR={model_dir} is not a ChatTTS model directory: missing {', '.join(missing)}."
    if not os.access(path / "asset", os.R_OK):
        return f"TTS_MODEL_DIR={model_dir} is not readable."
    return None
