"""ChatTTS's prompts for a batch of rows: each row's text (refined when asked) decorated with its
speed and speaker, tokenized, embedded, and the row's own speaker embedding written at its
`[spk_emb]` position — what `Chat._infer_code` does for a batch that shares one speaker."""

from __future__ import annotations

from typing import Any

from ..batch import BatchRow
from .params import ChatTTSParams

ChatTTSEngine = Any  # the engine (engine.py imports this module): its chat, speakers and parameters


def embed_prompts(engine: ChatTTSEngine, rows: list[BatchRow]):
    """The rows' prompt embeddings (left-padded) with each row's own speaker embedding, as
    `Chat._infer_code` builds them for one row; and the attention mask."""
    import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

    chat = engine.chat
    texts, speakers = [], []
    for row in rows:
        # The text is normalised already; ChatTTS's normaliser maps what is left (as infer did).
        text = chat.normalizer(row.text, True, True, None)
        if row.params.refine_text:
            text = refine(engine, text, row.params)
        spk = engine.row_speaker(row.params)
        speakers.append(spk)
        sample_text = row.params.sample_text or None
        speed = f"[speed_{row.params.speed}]"
        texts.append(chat.speaker.decorate_code_prompts([text], speed, sample_text, spk)[0])
    if any(row.params.sample for row in rows):
        return _with_samples(engine, rows, texts)
    with torch.inference_mode():
        input_ids, attention_mask, text_mask = chat.tokenizer.encode(
            texts, chat.config.gpt.num_vq, device=chat.device_gpt
        )
        emb = chat.embed(input_ids, text_mask)
        for i, spk in enumerate(speakers):
            assert spk is not None  # (rows without a recording have an embedding)
            # Speaker.apply writes one embedding over the whole batch: apply it row by row.
            chat.speaker.apply(
                emb.narrow(0, i, 1),
                engine.speaker_tensor(spk),
                input_ids.narrow(0, i, 1),
                chat.tokenizer.spk_emb_ids,
                chat.device_gpt,
            )
    return emb, attention_mask


def _with_samples(engine: ChatTTSEngine, rows: list[BatchRow], texts: list[str]):
    """`embed_prompts` when some rows' voices are recordings: ChatTTS puts a recording's codes after
    the text of every row of an encoding, so each row is encoded alone and left-padded (the
    padding is masked out, and positions count from each row's first token)."""
    import torch  # noqa: PLC0415  (torch/ChatTTS: worker processes only)

    chat = engine.chat
    embs, masks = [], []
    with torch.inference_mode():
        for row, text in zip(rows, texts, strict=True):
            codes = chat.speaker.decode_prompt(row.params.sample) if row.params.sample else None
            ids, mask, text_mask = chat.tokenizer.encode(
                [text], chat.config.gpt.num_vq, prompt=codes, device=chat.device_gpt
            )
            emb = chat.embed(ids, text_mask)
            spk = engine.row_speaker(row.params)
            if spk is not None:
                chat.speaker.apply(emb, engine.speaker_tensor(spk), ids, chat.tokenizer.spk_emb_ids, chat.device_gpt)
            embs.append(emb[0])
            masks.append(mask[0])
        length = max(e.size(0) for e in embs)
        emb = torch.stack([torch.nn.functional.pad(e, (0, 0, length - e.size(0), 0)) for e in embs])
        mask = torch.stack([torch.nn.functional.pad(m, (length - m.size(0), 0)) for m in masks])
    return emb, mask


def refine(engine: ChatTTSEngine, text: str, p: ChatTTSParams) -> str:
    """ChatTTS's text refinement of one row (adds [uv_break], [laugh], …), as `Chat._infer` does."""
    _, params = engine.chattts_params(p, 0)
    engine.chat.context.set(False)
    refined = engine.chat._refine_text([text], engine.chat.device, params)
    ids = [i[i.less(engine.chat.tokenizer.break_0_ids)] for i in refined.ids]
    out = engine.chat.tokenizer.decode(ids)[0]
    refined.destroy()
    return out
