"""The Kokoro worker's memory settings (inference/kokoro/allocator.py): oneDNN's cache of built
convolutions is bounded (a worker grew with the variety of its requests' lengths), unless the
operator set its size."""

from __future__ import annotations

import os

from inference.kokoro.allocator import KERNEL_CACHE, bound_kernel_cache

VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"


def test_the_kernel_cache_is_bounded_unless_the_operator_sized_it(monkeypatch):
    monkeypatch.setenv(VARIABLE, "1024")  # whatever the session had is put back after
    monkeypatch.delenv(VARIABLE)
    bound_kernel_cache()
    assert os.environ[VARIABLE] == str(KERNEL_CACHE) and KERNEL_CACHE < 1024  # oneDNN's default: 1,024
    monkeypatch.setenv(VARIABLE, "32")
    bound_kernel_cache()
    assert os.environ[VARIABLE] == "32"
    monkeypatch.delenv(VARIABLE)
    monkeypatch.setenv("DNNL_PRIMITIVE_CACHE_CAPACITY", "64")  # oneDNN's older name, read after the new one
    bound_kernel_cache()
    assert VARIABLE not in os.environ
