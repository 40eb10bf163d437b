"""glibc's allocator as the Kokoro decoder needs it: freed activations kept for the next forward
while the engine runs, handed back to the OS when it has nothing to run; and oneDNN's cache of
built convolutions kept small."""

from __future__ import annotations

import ctypes
import gc
import logging
import os

logger = logging.getLogger(__name__)

# oneDNN keeps every convolution it has built for a shape (its code, per layer and input length; 1,024
# by default), and each sentence's length is a new shape for each of the model's convolutions: a
# worker's memory grew with the variety of its requests. Measured (int8, 60 requests of varied
# lengths after warm-up, 2 cores, real weights): +91 MB and still growing with 1,024, +38 MB with
# 128, +36 MB with 16, at the same speed (building one is cheap beside running it).
KERNEL_CACHE = 128


def bound_kernel_cache() -> None:
    """oneDNN's cache of built convolutions at KERNEL_CACHE, unless the operator sized it
    (ONEDNN_PRIMITIVE_CACHE_CAPACITY, or its older name DNNL_…); before the first convolution is
    built (oneDNN reads it then, once)."""
    if not any(f"{prefix}_PRIMITIVE_CACHE_CAPACITY" in os.environ for prefix in ("ONEDNN", "DNNL")):
        os.environ["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] = str(KERNEL_CACHE)


def keep_freed_memory() -> None:
    """Tune glibc's allocator for the decoder's activations, once the model is loaded (what loading
    freed, the file's copy of the weights, is handed back first). By default glibc unmaps freed
    blocks over its mmap threshold and trims the heap's top, so the activations were faulted back
    in, page by page, at every layer; and each thread gets an arena of its own, each keeping its own
    peak. Measured on 2 cores, full checkpoint, 12 requests (36 rows) on a worker-like thread, three
    passes (RSS after, seconds a pass): glibc's defaults 3.6 GB, 40-43 s; one arena 1.6 GB, 41-45 s;
    one arena keeping up to 128 MB free and mapping only blocks over 64 MB 1.7-1.8 GB, 37 s;
    keeping everything under 1 GB 2.1-2.3 GB, 37 s. The third is used. Process-wide; glibc only."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    gc.collect()
    libc.malloc_trim(0)
    m_trim_threshold, m_mmap_threshold, m_arena_max = -1, -3, -8  # mallopt's parameters (malloc.h)
    tuned = (
        libc.mallopt(m_arena_max, 1)
        and libc.mallopt(m_mmap_threshold, 64 << 20)
        and libc.mallopt(m_trim_threshold, 128 << 20)
    )
    if not tuned:
        logger.warning("could not tune glibc's allocator (mallopt): the decoder will run slower")


def hand_back_freed_memory() -> None:
    """Hand the free pages of the heap back to the OS (glibc's malloc_trim), when the engine has
    nothing to run: while it runs, `keep_freed_memory` keeps them for the next forward's
    activations; between bursts a worker's resident memory returns to its model and dictionaries
    (the heap's free pages in the middle are not trimmed otherwise: a long-lived object above them
    pins them)."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass
