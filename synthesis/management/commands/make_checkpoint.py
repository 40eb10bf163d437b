"""`manage.py make_checkpoint --size tiny|full --out DIR`: a random ChatTTS checkpoint (noise)."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand

from inference.checkpoint import make_checkpoint


class Command(BaseCommand):
    help = (
        "Write a randomly initialised ChatTTS checkpoint in the official layout, loadable by ChatTTS's "
        "own loader. For tests and benchmarks only: random weights produce noise, not speech."
    )

    def add_arguments(self, parser):
        parser.add_argument("--size", choices=["tiny", "full"], default="tiny")
        parser.add_argument("--out", required=True)
        parser.add_argument("--seed", type=int, default=0)

    def handle(self, *args, size: str, out: str, seed: int, **options):
        started = time.monotonic()
        make_checkpoint(size, out, seed=seed)
        self.stdout.write(f"wrote a {size} random checkpoint to {out} in {time.monotonic() - started:.1f} s")
