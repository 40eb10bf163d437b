"""VoxCPM2's official file layout (huggingface.co/openbmb/VoxCPM2), and the checks a worker makes
of a model directory: that it holds the layout (cheap, before loading), and that every tensor the
model has came from its files (after loading: the package's loader is not strict)."""

from __future__ import annotations

import json
import os
from pathlib import Path

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
VAE = "audiovae.pth"
TOKENIZER = ("tokenizer.json", "tokenizer_config.json")
FILES = (CONFIG, WEIGHTS, VAE) + TOKENIZER
ALTERNATES = ("pytorch_model.bin", "audiovae.safetensors", "special_tokens_map.json")  # also read by its loader
ENV = "TTS_VOXCPM_MODEL_DIR"


def check_model_dir(model_dir: str) -> str | None:
    """A clear message if `model_dir` cannot hold VoxCPM2's files; cheap (no hashing, no torch)."""
    path = Path(model_dir)
    if not path.is_dir():
        return f"{ENV}={model_dir} does not exist or is not a directory."
    # Each file, or the other name the package's loader also reads.
    choices = [(CONFIG,), (WEIGHTS, "pytorch_model.bin"), (VAE, "audiovae.safetensors"), (TOKENIZER[0],)]
    found = [next((name for name in names if (path / name).is_file()), None) for names in choices]
    missing = [
        " (or ".join(names) + (")" if len(names) > 1 else "")
        for names, f in zip(choices, found, strict=True)
        if f is None
    ]
    if missing:
        return (
            f"{ENV}={model_dir} is not a VoxCPM2 model directory: missing {', '.join(missing)} "
            "(the layout of huggingface.co/openbmb/VoxCPM2)."
        )
    config_file, weights, vae = found[0], found[1], found[2]
    unreadable = [rel for rel in (config_file, weights, vae) if rel and not os.access(path / rel, os.R_OK)]
    if unreadable:
        return f"{ENV}={model_dir} is not readable: {', '.join(unreadable)}."
    try:
        config = json.loads((path / CONFIG).read_text())
    except (OSError, ValueError) as e:
        return f"{ENV}={model_dir}: {CONFIG} is not readable JSON ({e})."
    if not isinstance(config, dict) or str(config.get("architecture", "")).lower() != "voxcpm2":
        return f'{ENV}={model_dir}: {CONFIG} does not say "architecture": "voxcpm2" (VoxCPM 1.x is another model).'
    return None


def unloaded(model, model_dir: Path) -> list[str]:
    """What of `model` did not come from the files: each tensor missing from them, or different."""
    import torch  # noqa: PLC0415  (torch/voxcpm: worker processes only)
    from safetensors.torch import load_file  # noqa: PLC0415  (as above)

    def read(safetensors: str, pickled: str) -> dict:  # the loader's order: safetensors first
        path = model_dir / safetensors
        state: dict = (
            load_file(str(path))
            if path.is_file()
            else torch.load(model_dir / pickled, map_location="cpu", weights_only=True)
        )
        return state.get("state_dict", state)

    saved = read("model.safetensors", "pytorch_model.bin")
    saved |= {f"audio_vae.{k}": v for k, v in read("audiovae.safetensors", "audiovae.pth").items()}
    problems = []
    for key, tensor in model.state_dict().items():
        if key not in saved:
            problems.append(f"{key} missing")
        elif saved[key].shape != tensor.shape or not torch.equal(saved[key].to(tensor.dtype), tensor.cpu()):
            problems.append(f"{key} differs")
    return problems
