"""`manage.py make_checkpoint [--engine chattts|kokoro|voxcpm] --size tiny|full --out DIR`: a random
checkpoint of an engine, in its official file layout (noise, not speech)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from inference import registry


class Command(BaseCommand):
    help = (
        "Write a randomly initialised checkpoint of an engine in its official layout, loadable by the model's "
        "own loader. For tests and benchmarks only: random weights produce noise, not speech."
    )

    def add_arguments(self, parser):
        parser.add_argument("--engine", choices=list(registry.SPECS), default="chattts")
        parser.add_argument("--size", choices=["tiny", "full"], default="tiny")
        parser.add_argument("--out", required=True)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, engine: str, size: str, out: str, seed: int, **options):
        started = time.monotonic()
        registry.make_checkpoint(engine, size, out, seed=seed)
        elapsed = time.monotonic() - started
        self.stdout.write(f"wrote a {size} random {engine} checkpoint to {out} in {elapsed:.1f} s")
