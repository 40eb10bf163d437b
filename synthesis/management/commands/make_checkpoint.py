"""`manage.py make_checkpoint [--engine chattts|kokoro|voxcpm] --size tiny|full|real --out DIR`: a random
checkpoint of an engine, in its official file layout (noise, not speech); `--size real`: the engine's
real weights converted into that layout from installed packages (Kokoro: requirements/kokoro-real.txt)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from inference import registry
from inference.checkpoints import SourceMissing


class Command(BaseCommand):
    help = (
        "Write a randomly initialised checkpoint of an engine in its official layout, loadable by the model's "
        "own loader. For tests and benchmarks only: random weights produce noise, not speech. --size real "
        "converts the engine's real weights from installed packages instead (Kokoro only; installs nothing)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--engine", choices=list(registry.SPECS), default="chattts")
        parser.add_argument("--size", choices=["tiny", "full", registry.REAL], default="tiny")
        parser.add_argument("--out", required=True)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, engine: str, size: str, out: str, seed: int, **options):
        started = time.monotonic()
        try:
            registry.make_checkpoint(engine, size, out, seed=seed)
        except (ValueError, SourceMissing) as e:  # no real weights for the engine; its packages not installed
            raise CommandError(str(e)) from e
        elapsed = time.monotonic() - started
        if size == registry.REAL:
            self.stdout.write(f"wrote {engine}'s real weights, converted, to {out} in {elapsed:.1f} s")
        else:
            self.stdout.write(f"wrote a {size} random {engine} checkpoint to {out} in {elapsed:.1f} s")
