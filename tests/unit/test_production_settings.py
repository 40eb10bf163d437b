"""Without DEBUG, the settings refuse to start on a public default SECRET_KEY (anyone could forge
sessions, CSRF tokens and password-reset links with it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRINT_KEY = "import django; django.setup(); from django.conf import settings; print(settings.SECRET_KEY)"


def start(**env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "SECRET_KEY_FILE", "DEBUG")}
    base.update(DJANGO_SETTINGS_MODULE="tts_saas.settings", REDIS_URL="redis://127.0.0.1:1/0", **env)
    return subprocess.run([sys.executable, "-c", PRINT_KEY], cwd=ROOT, env=base, capture_output=True, text=True)


def test_without_debug_a_missing_secret_key_stops_the_process_with_a_clear_error():
    result = start()
    assert result.returncode != 0
    assert "ImproperlyConfigured: SECRET_KEY is not set" in result.stderr


def test_the_secret_key_comes_from_the_environment_or_a_file(tmp_path):
    assert start(SECRET_KEY="from-the-environment").stdout.strip() == "from-the-environment"
    path = tmp_path / "secret"
    path.write_text("from-a-file\n")
    assert start(SECRET_KEY_FILE=str(path)).stdout.strip() == "from-a-file"


def test_debug_alone_may_run_on_a_throwaway_key():
    result = start(DEBUG="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "insecure-debug-only-key"
