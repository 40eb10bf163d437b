"""AudioVAE V2's streaming decoder for rows that come and go.

The package's `StreamingVAEDecoder` carries each causal convolution's last input columns from one
patch to the next (the state that makes patch-by-patch decoding equal to decoding at once), for a
fixed batch. Here the state has a row per live row: a row that joins starts from zeros (what the
package's first call pads with), a row that leaves takes its state with it. The package's patches
of the convolutions' `forward` are installed for one decode call at a time (under the engine's
lock), so that two batches of the same model never see each other's state.

Imports torch and voxcpm at module level: reached only through the engine (worker processes).
"""

from __future__ import annotations

import torch
from voxcpm.modules.audiovae.audio_vae_v2 import StreamingVAEDecoder


class RowDecoder(StreamingVAEDecoder):
    def reset(self) -> None:
        self._states.clear()

    def join(self, rows: int) -> None:
        """`rows` new rows after the live ones, each from silence."""
        for key, state in self._states.items():
            fresh = state.new_zeros(rows, *state.shape[1:])
            self._states[key] = torch.cat((state, fresh))

    def keep(self, index: torch.Tensor) -> None:
        """Only the rows at `index` (in that order) stay."""
        for key, state in self._states.items():
            self._states[key] = state.index_select(0, index)

    @torch.inference_mode()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """The rows' next patches (rows, latent_dim, patch_size), float32 -> audio (rows, 1, samples)."""
        self._install()
        try:
            return self._vae.decode(latents)
        finally:
            self._restore()
