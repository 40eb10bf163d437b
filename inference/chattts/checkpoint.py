"""ChatTTS's files: randomly initialised checkpoints in the official layout (tests and benchmarks),
the check that a model directory holds that layout, and the GPT's precision.

The real weights come from Hugging Face, which tests cannot reach. Instead we instantiate
ChatTTS's own model classes (Embed, DVAE, GPT's LlamaModel, Vocos) with random weights and save
them exactly where `Chat._load` reads them, so ChatTTS's real loader loads them. Random weights
make noise, not speech.

`tiny` (hidden 64, 2 layers) loads in a fraction of a second; `full` has the official shapes and
so the real compute cost. Beside `asset/` we write `checkpoint.json`: the reduced config (ChatTTS
cannot infer shapes from files) and the files' SHA-256 map, which the loader verifies.
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..checkpoints import sha256_file, write_manifest

# The 50 control tokens, in the official order after the 21 128-token base vocabulary.
CONTROL_TOKENS = (
    ["[Sasr]", "[Pasr]", "[Easr]", "[Stts]", "[Ptts]", "[Etts]", "[Sbreak]", "[Pbreak]", "[Ebreak]"]
    + ["[uv_break]", "[v_break]", "[lbreak]", "[llbreak]", "[undefine]", "[laugh]", "[spk_emb]"]
    + ["[empty_spk]", "[music]", "[pure]"]
    + [f"[break_{i}]" for i in range(8)]
    + [f"[laugh_{i}]" for i in range(3)]
    + [f"[oral_{i}]" for i in range(10)]
    + [f"[speed_{i}]" for i in range(10)]
)
BASE_VOCAB_SIZE = 21128

SIZES: dict[str, dict] = {
    "tiny": {
        "gpt": {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2, "num_hidden_layers": 2},
        "embed": {"hidden_size": 64},
        "decoder": {"idim": 32, "odim": 32, "hidden": 64, "n_layer": 2, "bn_dim": 32},
        "dvae": {
            "encoder": {"idim": 32, "odim": 64, "hidden": 64, "n_layer": 2, "bn_dim": 32},
            "decoder": {"idim": 32, "odim": 32, "hidden": 64, "n_layer": 2, "bn_dim": 32},
            "vq": {"dim": 64},
        },
        "vocos": {"backbone": {"dim": 64, "intermediate_dim": 128, "num_layers": 2}, "head": {"dim": 64}},
    },
    "full": {},  # the official shapes: ChatTTS's Config() defaults
}

ASSET_FILES = {
    "sha256_asset_Decoder_safetensors": "asset/Decoder.safetensors",
    "sha256_asset_DVAE_safetensors": "asset/DVAE.safetensors",
    "sha256_asset_Embed_safetensors": "asset/Embed.safetensors",
    "sha256_asset_Vocos_safetensors": "asset/Vocos.safetensors",
    "sha256_asset_gpt_config_json": "asset/gpt/config.json",
    "sha256_asset_gpt_model_safetensors": "asset/gpt/model.safetensors",
    "sha256_asset_tokenizer_special_tokens_map_json": "asset/tokenizer/special_tokens_map.json",
    "sha256_asset_tokenizer_tokenizer_config_json": "asset/tokenizer/tokenizer_config.json",
    "sha256_asset_tokenizer_tokenizer_json": "asset/tokenizer/tokenizer.json",
}


def build_config(overrides: dict | None = None):
    """A ChatTTS Config with fresh sub-config objects (they are shared class-level defaults)."""
    from ChatTTS.config import config as c  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

    o = overrides or {}
    dv = o.get("dvae", {})
    vo = o.get("vocos", {})
    cfg = c.Config(
        path=c.Path(),
        decoder=c.Decoder(**{**asdict(c.Decoder()), **o.get("decoder", {})}),
        dvae=c.DVAE(
            encoder=c.Decoder(**{**asdict(c.DVAE().encoder), **dv.get("encoder", {})}),
            decoder=c.Decoder(**{**asdict(c.DVAE().decoder), **dv.get("decoder", {})}),
            vq=c.VQ(**{**asdict(c.VQ()), **dv.get("vq", {})}),
        ),
        gpt=c.GPT(**{**asdict(c.GPT()), **o.get("gpt", {})}),
        embed=c.Embed(**{**asdict(c.Embed()), **o.get("embed", {})}),
        vocos=c.Vocos(
            feature_extractor=c.FeatureExtractor(),
            backbone=c.Backbone(
                init_args=c.BackboneInitArgs(**{**asdict(c.BackboneInitArgs()), **vo.get("backbone", {})})
            ),
            head=c.FourierHead(
                init_args=c.FourierHeadInitArgs(**{**asdict(c.FourierHeadInitArgs()), **vo.get("head", {})})
            ),
        ),
    )
    if "spk_stat" in o:
        cfg.spk_stat = o["spk_stat"]
    return cfg


def _base_vocab() -> list[str]:
    specials = ["[PAD]"] + [f"[unused{i}]" for i in range(1, 100)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    ascii_chars = [chr(c) for c in range(33, 127) if not chr(c).isupper()]
    pieces = [f"##{c}" for c in "abcdefghijklmnopqrstuvwxyz0123456789"]
    cjk_punct = list("。，、！？；：“”‘’（）《》【】…—·～")
    vocab = specials + ascii_chars + pieces + cjk_punct
    code = 0x4E00
    while len(vocab) < BASE_VOCAB_SIZE:
        vocab.append(chr(code))
        code += 1
    return vocab


def _write_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    from transformers import BertTokenizerFast  # type: ignore[attr-defined]  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

    vocab = {token: i for i, token in enumerate(_base_vocab())}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True, handle_chinese_chars=True, strip_accents=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = BertTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )
    fast.add_tokens(CONTROL_TOKENS, special_tokens=True)
    assert len(fast) == BASE_VOCAB_SIZE + len(CONTROL_TOKENS)
    directory.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(directory))
    special = directory / "special_tokens_map.json"
    if not special.exists():  # transformers 5 no longer writes it; ChatTTS's layout has it
        special.write_text(
            json.dumps(
                {
                    "cls_token": "[CLS]",
                    "mask_token": "[MASK]",
                    "pad_token": "[PAD]",
                    "sep_token": "[SEP]",
                    "unk_token": "[UNK]",
                },
                indent=2,
            )
        )


def make_checkpoint(size: str, out: str | Path, seed: int = 0) -> Path:
    """Write a random checkpoint of `size` ("tiny" or "full") under `out`; returns `out`."""
    import numpy as np  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    import pybase16384 as b14  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    from ChatTTS.model import DVAE, Embed  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    from safetensors.torch import save_file  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    from transformers import LlamaConfig, LlamaModel  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    from vocos import Vocos  # noqa: PLC0415  (torch/ChatTTS: worker processes only)
    from vocos.pretrained import instantiate_class  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

    if size not in SIZES:
        raise ValueError(f"unknown checkpoint size {size!r}; choose one of {sorted(SIZES)}")
    out = Path(out)
    asset = out / "asset"
    (asset / "gpt").mkdir(parents=True, exist_ok=True)
    overrides = json.loads(json.dumps(SIZES[size]))
    torch.manual_seed(seed)
    hidden = build_config(overrides).gpt.hidden_size
    # Speaker statistics: std then mean, float16, base16384 — what Speaker() decodes.
    stat = np.concatenate([np.full(hidden, 0.5), np.zeros(hidden)]).astype(np.float16)
    overrides["spk_stat"] = b14.encode_to_string(stat.tobytes())
    cfg = build_config(overrides)

    def save(module: torch.nn.Module, path: Path) -> None:
        state = {k: v.detach().contiguous() for k, v in module.state_dict().items()}
        save_file(state, str(path))

    save(
        Embed(cfg.embed.hidden_size, cfg.embed.num_audio_tokens, cfg.embed.num_text_tokens, cfg.embed.num_vq),
        asset / "Embed.safetensors",
    )
    dvae = DVAE(
        decoder_config=asdict(cfg.dvae.decoder),
        encoder_config=asdict(cfg.dvae.encoder),
        vq_config=asdict(cfg.dvae.vq),
        dim=cfg.dvae.decoder.idim,
    )
    save(dvae, asset / "DVAE.safetensors")
    save(DVAE(decoder_config=asdict(cfg.decoder), dim=cfg.decoder.idim), asset / "Decoder.safetensors")
    vocos = Vocos(
        feature_extractor=instantiate_class(args=(), init=asdict(cfg.vocos.feature_extractor)),
        backbone=instantiate_class(args=(), init=asdict(cfg.vocos.backbone)),
        head=instantiate_class(args=(), init=asdict(cfg.vocos.head)),
    )
    save(vocos, asset / "Vocos.safetensors")
    # GPT.load_pretrained deletes LlamaModel's own token embedding; keep it minimal when tiny.
    extra: dict[str, Any] = {"vocab_size": 32} if size == "tiny" else {}
    LlamaModel(LlamaConfig(**asdict(cfg.gpt), **extra)).save_pretrained(str(asset / "gpt"))
    _write_tokenizer(asset / "tokenizer")

    sha = {key: sha256_file(out / rel) for key, rel in ASSET_FILES.items()}
    manifest = {"format": 1, "size": size, "random_weights": True, "seed": seed, "config": overrides, "sha256": sha}
    write_manifest(out, manifest)
    return out


def missing_files(directory: str | Path) -> list[str]:
    """Files of the official layout that are absent under `directory` (cheap: no hashing)."""
    base = Path(directory)
    return [rel for rel in ASSET_FILES.values() if not (base / rel).is_file()]


def set_precision(chat, precision: str) -> None:
    """bf16: the GPT's transformer in bfloat16 (embeddings, heads and decoders stay float32).
    int8: its Linear layers dynamically quantized (int8 weights, activations quantized per call)."""
    import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

    if precision == "bf16":
        chat.gpt.gpt.to(torch.bfloat16)
    elif precision == "int8":
        from torch.ao.quantization import quantize_dynamic  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notice
            chat.gpt.gpt = quantize_dynamic(chat.gpt.gpt, {torch.nn.Linear}, dtype=torch.qint8)


def check_model_dir(model_dir: str) -> str | None:
    """A clear message if `model_dir` cannot hold a model; cheap (no hashing, no torch)."""
    path = Path(model_dir)
    if not path.is_dir():
        return f"TTS_MODEL_DIR={model_dir} does not exist or is not a directory."
    missing = missing_files(path)
    if missing:
        return f"TTS_MODEL_DIR={model_dir} is not a ChatTTS model directory: missing {', '.join(missing)}."
    if not os.access(path / "asset", os.R_OK):
        return f"TTS_MODEL_DIR={model_dir} is not readable."
    return None
