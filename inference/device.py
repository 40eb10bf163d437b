"""The device an engine runs on: torch's threads on a CPU, and what an accelerator is doing (memory
held and, where the driver tells, utilisation; empty on a CPU)."""

from __future__ import annotations


def device_stats(device) -> dict[str, float | str]:
    import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

    if getattr(device, "type", "") != "cuda" or not torch.cuda.is_available():
        return {}
    stats: dict[str, float | str] = {"device": str(device), "memory_bytes": float(torch.cuda.memory_reserved(device))}
    try:
        stats["utilisation"] = torch.cuda.utilization(device) / 100.0
    except Exception:  # needs the NVML bindings (pynvml); memory is still known
        pass
    return stats


def set_threads(device, threads: int | None, spare_core: bool = True) -> None:
    """Torch's intra-op threads. None keeps torch's default (one per core). 0 is a worker's "auto",
    which depends on the engine's work (`spare_core`), measured on 2 cores (docs/benchmarks.md):
    - an engine of many small steps (ChatTTS: a token step is a few ms of small matrix products)
      leaves one core to the web process, Redis and the worker's own threads: a step whose thread
      loses its core stalls at every OpenMP barrier ("Concurrent clients": 1 thread matched the
      two-thread engine in-process, 2 threads lost 25 %);
    - an engine of few large operations (Kokoro: convolutions of ~100 ms) takes every core: the web
      side costs ~3 % of a request's CPU, and a second thread makes a request 1.8x faster ("Kokoro
      against a peer server": one request 2.2 -> 1.9 s, 4 clients 8.8 -> 6.3 s through the service).
    On a GPU torch's default."""
    import torch  # noqa: PLC0415  (torch: worker processes only)

    if threads == 0 and getattr(device, "type", "") == "cpu":
        threads = max(1, torch.get_num_threads() - 1) if spare_core else torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
