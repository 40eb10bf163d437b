"""The audit log in words: every action the product records has a label in `accounts.audit.ACTIONS`
(found in the source: the action string of each `record`/`record_changes` call), and a change is
shown as lines a person reads, not as a dict."""

from __future__ import annotations

import ast
from pathlib import Path

from accounts.audit import ACTIONS, label
from dashboard.views.audit import change_lines

ROOT = Path(__file__).resolve().parents[2]
APPS = ("accounts", "billing", "synthesis", "voices", "dashboard", "tts_saas")


def recorded_actions() -> dict[str, str]:
    """Each literal action passed to record()/record_changes(), with where it is."""
    found = {}
    for app in APPS:
        for path in (ROOT / app).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call) or len(node.args) < 2:
                    continue
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                action = node.args[1]
                if name in ("record", "record_changes") and isinstance(action, ast.Constant):
                    found[action.value] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def test_every_recorded_action_has_words():
    found = recorded_actions()
    assert "settings.speech_defaults" in found and "key.created" in found  # the scan sees the calls
    missing = {action: where for action, where in found.items() if action not in ACTIONS}
    assert missing == {}


def test_an_action_without_words_still_reads_as_words():
    assert label("settings.speech_defaults") == "default model and voice changed"
    assert label("webhook_thing.made_new") == "webhook thing: made new"


def test_a_change_reads_as_lines_before_and_after():
    lines = change_lines({"model": "", "voice": "alloy"}, {"model": "kokoro", "voice": "af_heart"})
    assert lines == ["model: none → kokoro", "voice: alloy → af_heart"]
    assert change_lines(None, {"scopes": ["speech:write", "jobs:read"], "name": "backend"}) == [
        "scopes: speech:write, jobs:read",
        "name: backend",
    ]
    assert change_lines({"require_mfa": False}, {"require_mfa": True}) == ["require mfa: no → yes"]
    assert change_lines(None, None) == []
