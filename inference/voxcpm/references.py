"""A cloned VoxCPM2 voice's reference, as the voice row keeps it and the rows read it (no torch).

A worker encodes the recording once (AudioVAE V2's encoder at 16 kHz: latent patches of shape
(patches, patch_size, latent_dim)); the patches travel as text (`pack`: float16 in NumPy's own
`.npy` layout, base64), so any worker of the engine speaks with the voice without encoding it again.
`References` keeps the decoded ones a worker used last, bounded by bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from collections import OrderedDict
from typing import Any

import numpy as np

MAX_BYTES = 256 * 1024 * 1024  # decoded references a worker keeps (a 30 s one: ~0.2 MB in float32)


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


class References:
    """Decoded references by digest, the least recently used dropped past `max_bytes`."""

    def __init__(self, max_bytes: int = MAX_BYTES):
        self.max_bytes = max_bytes
        self._kept: OrderedDict[str, tuple[Any, int]] = OrderedDict()
        self.bytes = 0
        self.decoded = 0  # how many times a reference was decoded (not found kept)

    def get(self, text: str, decode) -> Any:
        key = digest(text)
        found = self._kept.pop(key, None)
        if found is None:
            value = decode(text)
            self.decoded += 1
            found = (value, int(getattr(value, "nbytes", 0)) or len(text))
            self.bytes += found[1]
        self._kept[key] = found
        while self.bytes > self.max_bytes and len(self._kept) > 1:
            _, (_, size) = self._kept.popitem(last=False)
            self.bytes -= size
        return found[0]

    def __len__(self) -> int:
        return len(self._kept)
