"""What the accelerator the model runs on is doing: memory held and, where the driver tells,
utilisation. Empty on a CPU."""

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
