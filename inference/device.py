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


def set_threads(device, threads: int | None) -> None:
    """Torch's intra-op threads. None keeps torch's default (one per core). 0 is a worker's "auto":
    on a CPU one core fewer, since the web process, Redis and the worker's own threads share the
    machine, and a step whose thread loses its core stalls at every barrier (measured:
    docs/benchmarks.md, "Concurrent clients"); on a GPU torch's default."""
    import torch  # noqa: PLC0415  (torch: worker processes only)

    if threads == 0 and getattr(device, "type", "") == "cpu":
        threads = max(1, torch.get_num_threads() - 1)
    if threads:
        torch.set_num_threads(threads)
