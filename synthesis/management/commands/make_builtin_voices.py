"""`manage.py make_builtin_voices [--model-dir DIR] [--seed N]`: VoxCPM2's built-in voices made fixed.

Each of OpenAI's thirteen names is a written description (`inference.voxcpm.voices.VOICES`); the
model designs a voice from it anew on every request, so a voice would change from one request (and
one segment of a long text) to the next. This designs each once with the deployment's own model,
keeps the sample as that voice's reference (`tts_voices.json` beside the weights), and from then on
every worker loading that directory speaks each built-in voice from its reference. Run it once per
model directory, on a machine that can run the model (a GPU: about a minute; a CPU: much longer);
the workers' model version (and so the audio cache) changes with the file."""

from __future__ import annotations

import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from inference import registry
from inference.engine import EngineOptions, ModelUnavailable


class Command(BaseCommand):
    help = "Design VoxCPM2's 13 built-in voices once from their descriptions and keep them beside the weights."

    def add_arguments(self, parser):
        parser.add_argument(
            "--model-dir", default="", help="the VoxCPM2 model directory (default: TTS_VOXCPM_MODEL_DIR)"
        )
        parser.add_argument("--seed", type=int, default=0, help="the first voice's seed (the others follow)")

    def handle(self, *args, model_dir: str, seed: int, **options):
        from inference.voxcpm.voices import VOICES_FILE, design_all, write_voices  # noqa: PLC0415

        model_dir = model_dir or settings.TTS_MODEL_DIRS.get("voxcpm", "")
        if not model_dir:
            raise CommandError(
                "Name the model directory (--model-dir or TTS_VOXCPM_MODEL_DIR): the file goes beside it."
            )
        started = time.monotonic()
        earlier = Path(model_dir) / VOICES_FILE
        aside = earlier.with_suffix(".json.old")
        if earlier.is_file():  # the model loads without it (a file that no longer fits would stop it)
            earlier.replace(aside)
        try:
            options = EngineOptions(model_dir=model_dir, device=settings.TTS_DEVICE, threads=settings.TTS_TORCH_THREADS)
            engine = registry.load("voxcpm", options)
            voices = design_all(engine, seed)
        except ModelUnavailable as exc:
            raise CommandError(str(exc)) from exc
        finally:
            if aside.is_file() and not earlier.is_file():
                aside.replace(earlier)
        path = write_voices(model_dir, voices, f"designed from the written descriptions, seed {seed}")
        aside.unlink(missing_ok=True)
        self.stdout.write(f"wrote {path} ({time.monotonic() - started:.0f} s); restart the VoxCPM2 workers to use it")
