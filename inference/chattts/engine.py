"""The ChatTTS engine: the one module (with `prompts` and `checkpoint`) that talks to `chattts`.

Model source: `model_dir` (a local directory in the official layout, either ChatTTS's released
weights or a checkpoint made by `inference.checkpoint`), else ChatTTS's own Hugging Face download.
Loaded once per worker process, on `device` (cuda when present), at a `precision` for the GPT.

Everything runs through `generate_batch`/`run_rows`: rows with their own texts, voices, seeds and
sampling settings in one batch (`inference.batch`), our own token loop over ChatTTS's GPT
(`generation`) and windowed decoding (`runner`). ChatTTS's own generation runs
only for text refinement (`refine_text`), one row at a time.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..base import BatchEngine, model_version, pick_device, pick_precision
from ..batch import BatchRow, Event, Joining
from ..checkpoints import read_manifest
from ..device import set_threads
from ..engine import ModelUnavailable, SynthesisRequest
from ..text.preparation import as_written, normalize_segment, normalizer_version
from . import prompts
from .checkpoint import check_model_dir, set_precision
from .params import ChatTTSParams, token_budget
from .spec import INLINE_TAGS, SPEC

if TYPE_CHECKING:
    from .generation import GPTParts

logger = logging.getLogger(__name__)

GENERATION = "per-row-sampling/2"  # inference.generation's loop and windowed decoding (2: one head product)
PRECISIONS = ("fp32", "bf16", "int8")  # the GPT's: bfloat16, or int8 dynamic quantization (CPU only)


SPEAKERS_KEPT = 256  # decoded speaker embeddings a worker keeps (organizations' voices)


class ChatTTSEngine(BatchEngine):
    spec = SPEC
    check_model_dir = staticmethod(check_model_dir)

    def __init__(
        self,
        chat,
        device,
        model_version: str,
        random_weights: bool,
        fixed_length: bool = False,
        precision: str = "fp32",
    ):
        self.chat = chat
        # Benchmarks only: every generation runs to its token budget (no early end token), so
        # runs compare equal work.
        self.fixed_length = fixed_length
        self.device = device
        self.model_version = model_version
        self.random_weights = random_weights
        self.precision = precision
        self._speakers: dict[int, str] = {}
        self._decoded: OrderedDict[str, object] = OrderedDict()  # embedding string -> tensor (LRU)
        self._parts: GPTParts | None = None

    @classmethod
    def load(
        cls,
        model_dir: str = "",
        device: str = "",
        hf_cache_dir: str = "",
        fixed_length: bool = False,
        precision: str = "fp32",
        threads: int | None = None,
    ) -> ChatTTSEngine:
        import ChatTTS  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
        import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        from .checkpoint import build_config  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        dev = pick_device(device)
        set_threads(dev, threads)
        precision = pick_precision(precision, PRECISIONS)
        if precision == "int8" and dev.type != "cpu":
            raise ValueError("int8 (dynamic quantization of the GPT's Linear layers) runs on CPU only")
        chat = ChatTTS.Chat(logging.getLogger("ChatTTS"))
        random_weights = False
        if model_dir:
            problem = check_model_dir(model_dir)
            if problem:
                raise ModelUnavailable(problem)
            manifest = read_manifest(model_dir)
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
        set_precision(chat, precision)
        # The generation loop is part of the version: another loop gives other audio for a seed.
        # So is the normalisation of the text, which the worker does (cache keys hash the text as given).
        # Another precision gives other audio: it is another model version (cache keys include it).
        version = model_version("chattts", [fingerprint, GENERATION, normalizer_version()], precision, random_weights)
        logger.info("model loaded: %s on %s, %d torch threads", version, dev, torch.get_num_threads())
        return cls(chat, dev, version, random_weights, fixed_length, precision)

    def read(self, segment: str, params: ChatTTSParams | None = None) -> str:
        """What ChatTTS reads: the segment spelled out (it deletes what it cannot say), or as written
        where the request turned that off (`params.spell_out`)."""
        if params is not None and not params.spell_out:
            return as_written(segment, INLINE_TAGS, SPEC.name)
        return normalize_segment(segment, INLINE_TAGS, SPEC.name)

    def row_budget(self, text: str, params: ChatTTSParams) -> int:
        return token_budget(text)

    def voice_problem(self, params: ChatTTSParams) -> str | None:
        return self.speaker_problem(params.speaker) if params.speaker else None

    def row_speaker(self, p: ChatTTSParams) -> str | None:
        """The row's speaker embedding string: its voice's own, or sampled with its voice seed; None
        for a voice made from a recording (the recording's codes are its speaker)."""
        if p.speaker:
            return p.speaker
        return None if p.sample else self.speaker(p.voice_seed)

    def voice_from_recording(self, recording: np.ndarray, transcript: str) -> dict:
        """A voice of a reference recording (mono float32, 24 kHz) and what it says: the recording's
        codes (`spk_smp`) and the transcript spelled out (`txt_smp`), as the voice row keeps them."""
        return {"sample_text": self.read(transcript), "sample": self.sample_speaker(recording)}

    def sample_speaker(self, recording: np.ndarray) -> str:
        """A recording's codes for ChatTTS's zero-shot speaker (`spk_smp`): the DVAE's encoder over
        mono float32 audio at 24 kHz."""
        import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        with torch.inference_mode():
            return self.chat.sample_audio_speaker(np.ascontiguousarray(recording, dtype=np.float32))

    def speaker_problem(self, speaker: str) -> str | None:
        """Why this model cannot use an embedding string (its size), or None."""
        try:
            values = len(self.chat.speaker._decode(speaker))
        except Exception:
            return "The voice's speaker embedding cannot be decoded."
        if values != self.chat.speaker.dim:
            return (
                f"The voice's speaker embedding has {values} values; this model's speakers have "
                f"{self.chat.speaker.dim}. Make the voice from an embedding of this model."
            )
        return None

    def speaker_tensor(self, speaker: str):
        """The decoded embedding, kept for the next rows of this voice (the last SPEAKERS_KEPT)."""
        import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        tensor = self._decoded.pop(speaker, None)
        if tensor is None:
            tensor = torch.from_numpy(self.chat.speaker._decode(speaker))
        self._decoded[speaker] = tensor
        while len(self._decoded) > SPEAKERS_KEPT:
            self._decoded.popitem(last=False)
        return tensor

    def speaker(self, voice_seed: int) -> str:
        """The voice's speaker embedding, sampled from the model's speaker statistics."""
        import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        if voice_seed not in self._speakers:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(voice_seed)
                self._speakers[voice_seed] = self.chat.sample_random_speaker()
        return self._speakers[voice_seed]

    def chattts_params(self, p: ChatTTSParams, max_tokens: int):
        """ChatTTS's own parameters for `p`: for `Chat.infer` (refinement; comparisons in tests)."""
        import ChatTTS  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        code = ChatTTS.Chat.InferCodeParams(
            prompt=f"[speed_{p.speed}]",
            spk_emb=self.row_speaker(p),
            spk_smp=p.sample or None,
            txt_smp=p.sample_text or None,
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

    # The batch path.

    def run_rows(
        self,
        rows: list[BatchRow],
        stop: Callable[[str], bool],
        chunk_tokens: int = 24,
        more: Joining | None = None,
    ) -> Iterator[Event]:
        """`generate_batch` as an iterator of events (what `synthesize` and `stream` consume)."""
        from . import runner  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
        from .generation import RowPlan  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        if len({r.key for r in rows}) != len(rows):
            raise ValueError("the rows' keys must be unique within a batch")
        if chunk_tokens < 1:
            raise ValueError("chunk_tokens must be at least 1")
        if not rows:
            return

        def planned(batch: list[BatchRow]):
            emb, attention_mask = self._prompts(batch)
            plans = [
                RowPlan(
                    key=r.key,
                    seed=r.params.seed,
                    temperature=r.params.temperature,
                    top_p=r.params.top_p,
                    top_k=r.params.top_k,
                    max_tokens=r.max_tokens,
                    min_tokens=r.max_tokens if self.fixed_length else 0,
                )
                for r in batch
            ]
            return emb, attention_mask, plans, [r.params.use_decoder for r in batch]

        def admit(live: int):
            joining = more(live) if more is not None else []
            return planned(joining) if joining else None

        emb, attention_mask, plans, use_decoder = planned(rows)
        parts = self._gpt_parts()
        yield from runner.run(
            parts, self._decode, emb, attention_mask, plans, use_decoder, chunk_tokens, stop, admit if more else None
        )

    def _prompts(self, rows: list[BatchRow]):
        return prompts.embed_prompts(self, rows)

    def kv_row_bytes(self, columns: int = 2048) -> int:
        """One row's keys and values for `columns` positions in every layer, at the GPT's precision
        (240 MiB in float32 for the full-size GPT at 2,048)."""
        config = self.chat.gpt.gpt.config
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        element = self._gpt_parts().dtype.itemsize
        return 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * columns * element

    def row_bytes(self) -> int:
        """Twice a row's cache at the GPT's 2,048 positions: the static cache grows by whole
        allocations, and a step's activations and the decoder's windows come on top (measured on an
        H200: 64 rows of 215 tokens peaked at 4.35 GiB allocated with the model)."""
        return 2 * self.kv_row_bytes()

    def _gpt_parts(self) -> GPTParts:
        import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        from .generation import GPTParts  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        if self._parts is None:
            gpt = self.chat.gpt
            with torch.no_grad():  # the weight-normed heads, computed once: weights do not change
                heads = torch.cat([head.weight for head in self.chat.embed.head_code]).detach().float()
            dtype = next(p.dtype for p in gpt.gpt.parameters() if p.is_floating_point())
            self._parts = GPTParts(
                llama=gpt.gpt,
                emb_code=gpt.emb_code,
                heads=heads,
                num_audio_tokens=gpt.num_audio_tokens,
                device=self.chat.device,
                device_gpt=self.chat.device_gpt,
                dtype=dtype,
                cache_name="cache" if "cache" in inspect.signature(gpt.gpt.forward).parameters else "past_key_values",
            )
        return self._parts

    def _decode(self, features, use_decoder: bool) -> np.ndarray:
        """Features (rows, channels, tokens) to audio (rows, samples), as `Chat._decode_to_wavs`."""
        decoder = self.chat.decoder if use_decoder else self.chat.dvae
        return self.chat._vocos_decode(decoder(features.to(self.chat.device)))

    def warm_up(self) -> None:
        """The first inference compiles numba code (~1.3 s): pay it at start, not on a request."""
        params = ChatTTSParams(voice_seed=1, seed=0)
        for _ in self.synthesize(SynthesisRequest(segments=["warm up."], params=params, max_tokens=[8])):
            pass
