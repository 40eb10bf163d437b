"""A cloned VoxCPM2 voice's reference, as the voice row keeps it and the rows read it (no torch).

A worker encodes the recording once (AudioVAE V2's encoder at 16 kHz: latent patches of shape
(patches, patch_size, latent_dim)); the patches travel as text (`pack`: float16 in NumPy's own
`.npy` layout, base64), so any worker of the engine speaks with the voice without encoding it again.
`Prompts` keeps, for the voices a worker used last, their decoded patches and the key/value prefix
they give the language models, bounded by bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

MAX_BYTES = 256 * 1024 * 1024  # prompts a worker keeps (a 30 s reference: ~0.2 MB, its full-size prefix ~14 MB)


class ReferenceError(ValueError):
    """A stored reference that is not one this model can read (another model's, a damaged row)."""


def pack(patches: np.ndarray) -> str:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(patches, dtype=np.float16), allow_pickle=False)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unpack(text: str, patch_size: int, latent_dim: int) -> np.ndarray:
    """The patches (float32) of a packed reference, checked against the model's shapes."""
    try:
        patches = np.load(io.BytesIO(base64.b64decode(text, validate=True)), allow_pickle=False)
    except (binascii.Error, ValueError, OSError, EOFError) as exc:
        raise ReferenceError("The voice's reference cannot be read.") from exc
    if patches.ndim != 3 or patches.shape[1:] != (patch_size, latent_dim) or not len(patches):
        raise ReferenceError(
            f"The voice's reference has the shape {tuple(patches.shape)}; this model's are (n, {patch_size}, "
            f"{latent_dim}). Make the voice again from its recording on this model."
        )
    if not np.isfinite(patches).all():
        raise ReferenceError("The voice's reference holds values that are not numbers.")
    return patches.astype(np.float32)


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("ascii", "replace")).hexdigest()[:32]


def affinity(params: Mapping) -> str:
    """A job's voice as workers keep it: its reference's digest (`Prompts`' key), "" for a design."""
    reference = params.get("reference") or ""
    return digest(reference) if reference else ""


class Prompt:
    """A cloned voice as a worker holds it: the reference's patches (a tensor) and, once a row has
    used it, the key/value prefix the reference gives each language model (`slots.Slots.prefix_of`):
    a later row with the voice starts from it instead of running the reference again."""

    def __init__(self, patches: Any) -> None:
        self.patches = patches
        self.prefix: tuple[Any, Any] | None = None  # (text LM's (keys, values), residual LM's)

    @property
    def nbytes(self) -> int:
        tensors = [self.patches, *(t for pair in self.prefix or () for t in pair)]
        return sum(t.numel() * t.element_size() for t in tensors)


class Prompts:
    """Cloned voices' prompts by their reference's digest, the least recently used dropped past
    `max_bytes` (a prompt grows when its prefix is built: sizes are read again at each use)."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = max_bytes
        self._kept: OrderedDict[str, Prompt] = OrderedDict()
        self._lock = threading.Lock()  # task threads check voices while the batcher's rows use them
        self.decoded = 0  # references decoded (not found kept)
        self.built = 0  # prefixes built (a reference run through the language models)

    def get(self, text: str, decode) -> Prompt:
        """The voice's prompt, its reference decoded by `decode(text)` when not kept."""
        key = digest(text)
        with self._lock:
            found = self._kept.pop(key, None)
        if found is None:
            found = Prompt(decode(text))
            with self._lock:
                self.decoded += 1
        with self._lock:
            self._kept[key] = found
        self.trim()
        return found

    def trim(self) -> None:
        """Drop the least recently used past `max_bytes`, never the last one used."""
        with self._lock:
            while len(self._kept) > 1 and self.bytes > self.max_bytes:
                self._kept.popitem(last=False)

    @property
    def bytes(self) -> int:
        return sum(p.nbytes for p in self._kept.values())

    def __len__(self) -> int:
        return len(self._kept)
