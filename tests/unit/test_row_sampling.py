"""The per-row sampling step (inference.chattts.sampling) against what ChatTTS does for one row: the
same warpers, the same repetition penalty, the same draw. No model: random logits."""

from __future__ import annotations

from dataclasses import replace

import torch
from ChatTTS.model.processors import CustomRepetitionPenaltyLogitsProcessorRepeat
from transformers.generation import TopKLogitsWarper, TopPLogitsWarper

from inference.chattts.graphs import bucket, uses_graphs
from inference.chattts.sampling import (
    MIN_TOKENS_TO_KEEP,
    REPETITION_PENALTY,
    GPTParts,
    padded,
    penalise,
    sample_noise,
    warp,
)

VOCAB, NUM_VQ = 626, 4
SETTINGS = [(0.7, 20), (0.9, 10), (0.5, 40), (1.0, 626), (0.3, 1)]


def test_per_row_top_p_and_top_k_equal_transformers_warpers_row_by_row():
    torch.manual_seed(0)
    logits = torch.randn(len(SETTINGS) * NUM_VQ, VOCAB) * 3
    top_p = torch.tensor([1 - p for p, _ in SETTINGS for _ in range(NUM_VQ)], dtype=torch.float32).unsqueeze(1)
    top_k = torch.tensor([max(k, MIN_TOKENS_TO_KEEP) for _, k in SETTINGS for _ in range(NUM_VQ)]).unsqueeze(1)
    ours = warp(logits, top_p, top_k)
    for i, (p, k) in enumerate(SETTINGS):
        rows = logits[i * NUM_VQ : (i + 1) * NUM_VQ]
        expected = TopPLogitsWarper(p, min_tokens_to_keep=MIN_TOKENS_TO_KEEP)(None, rows)
        expected = TopKLogitsWarper(k, min_tokens_to_keep=MIN_TOKENS_TO_KEEP)(None, expected)
        assert torch.equal(ours[i * NUM_VQ : (i + 1) * NUM_VQ], expected)


def test_the_repetition_penalty_equals_chattts_processor():
    torch.manual_seed(1)
    logits = torch.randn(8, VOCAB)
    history = torch.randint(0, VOCAB, (8, 16))
    processor = CustomRepetitionPenaltyLogitsProcessorRepeat(REPETITION_PENALTY, VOCAB - 1, 16)
    assert torch.equal(penalise(logits, history), processor(history, logits))
    assert torch.equal(penalise(logits, history[:, :0]), logits)


def test_fixed_noise_is_what_chattts_reseeded_multinomial_draws():
    """ChatTTS re-seeds its generator before every draw, so its noise is the same every step."""
    torch.manual_seed(2)
    noise = sample_noise(1234, NUM_VQ, VOCAB, torch.device("cpu"))
    generator = torch.Generator()
    for _ in range(20):
        probs = torch.softmax(torch.randn(NUM_VQ, VOCAB) * 2, -1)
        expected = torch.multinomial(probs, 1, generator=generator.manual_seed(1234)).squeeze(1)
        assert torch.equal(torch.argmax(probs / noise, -1), expected)


def test_three_rows_run_as_four_on_cpu_only():
    assert padded([0, 1, 2], cpu=True) == [0, 1, 2, 2]
    assert padded([4, 5, 6, 7, 8, 9, 10], cpu=True) == [4, 5, 6, 7, 8, 9, 10, 10]
    assert padded([0, 1], cpu=True) == [0, 1] and padded([0, 1, 2, 3], cpu=True) == [0, 1, 2, 3]
    assert padded([0, 1, 2], cpu=False) == [0, 1, 2]


def test_decode_steps_are_replayed_from_cuda_graphs_on_cuda_only():
    cpu = torch.device("cpu")
    parts = GPTParts(torch.nn.Identity(), [], torch.zeros(0), VOCAB, cpu, cpu, torch.float32)
    assert parts.static_cache and parts.cuda_graphs and not uses_graphs(parts)
    on_cuda = replace(parts, device=torch.device("cuda"), device_gpt=torch.device("cuda"))
    assert uses_graphs(on_cuda)
    assert not uses_graphs(replace(on_cuda, cuda_graphs=False))
    assert not uses_graphs(replace(on_cuda, static_cache=False))
    assert [bucket(n) for n in (1, 2, 3, 4, 5, 9, 64, 65)] == [1, 2, 4, 4, 8, 16, 64, 128]
