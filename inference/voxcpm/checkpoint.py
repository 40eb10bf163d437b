"""Randomly initialised VoxCPM2 checkpoints in the official layout (`files`), for tests and
benchmarks.

The official download (huggingface.co/openbmb/VoxCPM2) is `config.json` (`"architecture":
"voxcpm2"`, the language model's, encoder's, diffusion decoder's and AudioVAE's configs),
`model.safetensors` (every tensor but the AudioVAE's), `audiovae.pth` (the AudioVAE's state dict,
without its `audio_vae.` prefix) and a `LlamaTokenizerFast` (`tokenizer.json`,
`tokenizer_config.json`). Tests cannot reach it, so `make_checkpoint` instantiates the package's own
`VoxCPM2Model` and `AudioVAEV2` from a small config with random weights and writes them where
`VoxCPM2Model.from_local` reads them, with a byte-level tokenizer of its own, plus
`checkpoint.json` (size, seed, each file's SHA-256), and the built-in voices' references
(`voices.VOICES_FILE`, ours: designed by the tiny checkpoint's own model from their descriptions;
tones encoded by the full one's AudioVAE). Three things a working checkpoint needs: the
tokenizer has ids 101-104 (the audio and reference-audio markers the model inserts); the
AudioVAE's `decoder_dim` is at least 2^len(decoder_rates); the rope factor lists have
`kv_channels / 2` entries. Random weights make noise, not speech.

`tiny` (hidden 64, 2 layers: ~3 MB, loads in well under a second) keeps every part the model runs
and the official audio shapes: 16 kHz in, 48 kHz out, 4 latent frames a patch (160 ms of audio a
language-model step). `full` has the official config's shapes (2 B parameters: a 28-layer text LM of
2048, an 8-layer residual LM, 12-layer local encoder and diffusion decoder of 1024, AudioVAE V2 of
2048) in float32, for the benchmarks' real compute cost.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ..checkpoints import write_random_manifest
from .files import CONFIG, FILES, VAE, WEIGHTS
from .references import pack
from .voices import SAMPLE_TEXT, VOICES, VOICES_FILE, design_all, write_voices

FULL_VOCAB = 73448  # the official tokenizer's: the embedding table keeps its shape
AUDIO_MARKERS = (101, 102, 103, 104)  # audio start/end, reference audio start/end (VoxCPM2Model)


def _lm(hidden: int, layers: int, heads: int, kv_heads: int, vocab: int, ffn: int = 0, head: int = 0) -> dict:
    head = head or hidden // heads
    return {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_size": hidden,
        "intermediate_size": ffn or hidden * 2,
        "max_position_embeddings": 4096 if hidden < 1024 else 32768,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-5,
        "rope_scaling": {
            "type": "longrope",
            "long_factor": [1.0] * (head // 2),
            "short_factor": [1.0] * (head // 2),
            "original_max_position_embeddings": 4096 if hidden < 1024 else 32768,
        },
        "vocab_size": vocab,
        "use_mup": False,
        "scale_emb": 1.0,
        "dim_model_base": hidden,
        "scale_depth": 1.0,
        "rope_theta": 10000.0,
        "kv_channels": head,
    }


def _part(hidden: int, layers: int, heads: int, ffn: int = 0, head: int = 0) -> dict:
    return {
        "hidden_dim": hidden,
        "ffn_dim": ffn or hidden * 2,
        "num_heads": heads,
        "num_layers": layers,
        "kv_channels": head or hidden // heads,
    }


def config_for(size: str, vocab: int) -> dict:
    if size == "full":
        return _full()
    if size != "tiny":
        raise ValueError(f"unknown checkpoint size {size!r}; choose tiny or full")
    return {
        "architecture": "voxcpm2",
        "lm_config": _lm(64, 2, 4, 2, vocab),
        "patch_size": 4,
        "feat_dim": 64,
        "residual_lm_num_layers": 1,
        "residual_lm_no_rope": False,
        "scalar_quantization_latent_dim": 32,
        "scalar_quantization_scale": 9,
        "encoder_config": _part(64, 1, 4),
        "dit_config": {**_part(64, 1, 4), "dit_mean_mode": False, "cfm_config": {}},
        "audio_vae_config": {
            "encoder_dim": 16,
            "encoder_rates": [2, 5, 8, 8],
            "latent_dim": 64,
            "decoder_dim": 128,
            "decoder_rates": [8, 6, 5, 2, 2, 2],
            "depthwise": True,
            "sample_rate": 16000,
            "out_sample_rate": 48000,
            "use_noise_block": False,
            "sr_bin_boundaries": [20000, 30000, 40000],
            "cond_type": "scale_bias",
            "cond_dim": 16,
            "cond_out_layer": False,
        },
        "max_length": 4096,
        "device": "cpu",
        "dtype": "float32",
    }


def _full() -> dict:
    """openbmb/VoxCPM2's own config.json (2 B parameters; its rope factors aside, which change no
    shape), in float32: the dtype that runs fastest on a CPU without bfloat16 arithmetic."""
    return {
        "architecture": "voxcpm2",
        "lm_config": _lm(2048, 28, 16, 2, FULL_VOCAB, ffn=6144, head=128) | {"scale_emb": 12, "dim_model_base": 256},
        "patch_size": 4,
        "feat_dim": 64,
        "residual_lm_num_layers": 8,
        "residual_lm_no_rope": True,
        "scalar_quantization_latent_dim": 512,
        "scalar_quantization_scale": 9,
        "encoder_config": _part(1024, 12, 16, ffn=4096, head=128),
        "dit_config": {**_part(1024, 12, 16, ffn=4096, head=128), "dit_mean_mode": False, "cfm_config": {}},
        "audio_vae_config": {
            "encoder_dim": 128,
            "encoder_rates": [2, 5, 8, 8],
            "latent_dim": 64,
            "decoder_dim": 2048,
            "decoder_rates": [8, 6, 5, 2, 2, 2],
            "depthwise": True,
            "sample_rate": 16000,
            "out_sample_rate": 48000,
            "use_noise_block": False,
            "sr_bin_boundaries": [20000, 30000, 40000],
            "cond_type": "scale_bias",
            "cond_dim": 128,
            "cond_out_layer": False,
        },
        "max_length": 8192,
        "device": "cpu",
        "dtype": "float32",
    }


def _tokenizer():
    """A Llama-style tokenizer (SentencePiece BPE with byte fallback, as the official one) of the
    ASCII characters and every byte, no merges: any text tokenizes (a Chinese character as its
    three UTF-8 bytes), and ids 101-104 exist (byte tokens here; the model only needs the ids)."""
    import string  # noqa: PLC0415

    from transformers import LlamaTokenizerFast  # noqa: PLC0415  (tools only)

    pieces = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\u2581"]
    pieces += list(string.ascii_letters + string.digits + string.punctuation)
    vocab = {piece: i for i, piece in enumerate(pieces)}
    return LlamaTokenizerFast(
        vocab=vocab, merges=[], bos_token="<s>", eos_token="</s>", unk_token="<unk>", add_bos_token=False
    )


def make_checkpoint(size: str, out: str | Path, seed: int = 0) -> Path:
    """Write a random VoxCPM2 checkpoint of `size` ("tiny", or "full": the official shapes, ~9 GB)
    under `out`; returns `out`. Random weights: the audio is noise, not speech."""
    import torch  # noqa: PLC0415  (torch/voxcpm: worker processes and tools only)
    from safetensors.torch import save_file  # noqa: PLC0415  (as above)
    from voxcpm.model.voxcpm2 import VoxCPM2Model, VoxCPMConfig  # noqa: PLC0415  (as above)
    from voxcpm.modules.audiovae import AudioVAEConfigV2, AudioVAEV2  # noqa: PLC0415  (as above)

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    config = config_for(size, len(tokenizer))
    torch.manual_seed(seed)
    vae = AudioVAEV2(AudioVAEConfigV2(**config["audio_vae_config"]))
    model = VoxCPM2Model(VoxCPMConfig(**copy.deepcopy(config)), tokenizer, vae, device="cpu")
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}  # no copy: 8 GB at full size
    vae_state = {k[len("audio_vae.") :]: v for k, v in state.items() if k.startswith("audio_vae.")}
    save_file({k: v for k, v in state.items() if not k.startswith("audio_vae.")}, str(out / WEIGHTS))
    torch.save(vae_state, out / VAE)
    (out / CONFIG).write_text(json.dumps(config, indent=1))
    tokenizer.save_pretrained(str(out))
    for extra in ("special_tokens_map.json",):  # not part of the official layout's files
        (out / extra).unlink(missing_ok=True)
    if size == "tiny":
        del model, state, vae_state
        _design_builtin_voices(out, seed)
    else:
        _tone_builtin_voices(out, vae, model.patch_size)
    write_random_manifest(out, "voxcpm", size, seed, FILES + (VOICES_FILE,))
    return out


def _design_builtin_voices(out: Path, seed: int) -> None:
    """The built-in voices designed from their descriptions by the checkpoint's own model, as
    `manage.py make_builtin_voices` makes them with the real one (noise here: random weights)."""
    from .engine import VoxCPMEngine  # noqa: PLC0415  (the engine loads what this module writes)

    engine = VoxCPMEngine.load(str(out), device="cpu")
    write_voices(out, design_all(engine, seed), "designed from the written descriptions by this random checkpoint")


def _tone_builtin_voices(out: Path, vae, patch_size: int) -> None:
    """The full-size checkpoint's built-in voices: a tone each, encoded by its AudioVAE, taken for
    the sample text (designing thirteen voices with a 2 B model takes half an hour on a CPU, and
    random weights make noise either way); what matters for benchmarks is a reference of a real
    length (3 s) and its transcript, as a designed voice has."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415  (tools only)

    voices = {}
    rate, chunk = vae.sample_rate, patch_size * vae.chunk_size
    for i, name in enumerate(VOICES):
        t = np.arange(3 * rate) / rate
        audio = (0.3 * np.sin(2 * np.pi * (110 + 20 * i) * t)).astype(np.float32)
        audio = np.pad(audio, ((-len(audio)) % chunk, 0))
        with torch.inference_mode():
            feat = vae.encode(torch.from_numpy(audio)[None], rate).float()
        patches = feat.view(vae.latent_dim, -1, patch_size).permute(1, 2, 0).numpy()
        voices[name] = {"sample": pack(patches), "sample_text": SAMPLE_TEXT}
    write_voices(out, voices, "tones encoded by this random checkpoint's AudioVAE, taken for the sample text")
