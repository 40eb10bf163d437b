"""CUDA only: the decode step's transformer replayed from CUDA graphs, one per batch-size bucket.

A step of the full-size GPT is ~700 kernel launches, which on a large GPU take longer to launch
than to run. With the static cache (`kvcache`) a step has fixed shapes: the rows run are a bucket
(1, 2, 4, … slots of the cache), the keys every column of the cache, the write column a device
tensor. So the transformer's forward is captured once per (bucket, allocation of the cache) and
replayed: one launch. The inputs are copied into the graph's own buffers; the mask and positions
are the cache's (same addresses for its whole allocation). Sampling is not captured: it runs
after, on the device, without host synchronisation.

Never used on a CPU (`uses_graphs`). Not tested here on a GPU: bench/gpu.sh runs the batch tests
with TTS_TEST_DEVICE=cuda, which take this path. A capture that fails (an operator that syncs
with the host, say) is logged once and the loop runs the same step eagerly from then on.

Imports torch at module level: reached only through the engine's methods (worker processes).
"""

from __future__ import annotations

import logging
from typing import Any

import torch

from .kvcache import StaticKV
from .sampling import GPTParts

logger = logging.getLogger(__name__)


def uses_graphs(parts: GPTParts) -> bool:
    return parts.cuda_graphs and parts.static_cache and parts.device_gpt.type == "cuda"


def bucket(rows: int) -> int:
    """The slots a captured step runs for `rows` live rows: the next power of two."""
    return 1 << max(rows - 1, 0).bit_length()


class DecodeGraphs:
    """The captured steps of one batch run (one static cache), by bucket."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, torch.Tensor, torch.Tensor]] = {}
        self._pool: Any = None  # the graphs' shared memory pool
        self.failed = False

    @torch.inference_mode()
    def step(self, parts: GPTParts, kv: StaticKV, emb: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor | None:
        """The step's last hidden states (rows, hidden) in float32 on `parts.device`, or None when
        capture failed (the caller runs the step eagerly)."""
        rows = emb.size(0)
        key = (rows, kv.generation)
        if key not in self._graphs:
            self._graphs = {k: g for k, g in self._graphs.items() if k[1] == kv.generation}
            if not self._graphs:
                # A pool lives while a graph holds it: once every graph that shared it is gone, its
                # handle must not be passed again (torch 2.11 asserts: "use_count > 0").
                self._pool = None
            try:
                self._graphs[key] = self._capture(parts, kv, emb, mask)
            except Exception:  # a capture failure must not fail the batch: the eager step is the same
                logger.warning("CUDA graph capture failed: decoding without graphs", exc_info=True)
                self.failed = True
                return None
        graph, inputs, output = self._graphs[key]
        inputs.copy_(emb.to(parts.device_gpt, parts.dtype))
        kv.column.fill_(kv.write)
        graph.replay()
        return output.to(parts.device, torch.float32, copy=True)

    def _capture(self, parts: GPTParts, kv: StaticKV, emb: torch.Tensor, mask: torch.Tensor | None):
        rows = emb.size(0)
        inputs = emb.to(parts.device_gpt, parts.dtype).clone()
        kv.column.fill_(kv.write)

        def forward() -> torch.Tensor:
            out = parts.llama(
                inputs_embeds=inputs,
                attention_mask=mask,
                position_ids=kv.position[:rows, None],
                use_cache=True,
                **{parts.cache_name: kv},
            )
            return out.last_hidden_state[:, -1]

        side = torch.cuda.Stream(device=parts.device_gpt)
        side.wait_stream(torch.cuda.current_stream(parts.device_gpt))
        with torch.cuda.stream(side):  # warm-up (lazy initialisations); the replay rewrites its column
            forward()
        torch.cuda.current_stream(parts.device_gpt).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            output = forward()
        self._pool = graph.pool()
        return graph, inputs, output
