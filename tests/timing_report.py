"""Where a run of the suite spent its time, printed by scripts/test at the end of every run (CI's
log included): each phase's wall time, each pytest tier's, the slowest files and the 30 slowest
tests (setup, call and teardown together, as pytest's JUnit XML reports them in its xunit1 form).

    python -m tests.timing_report PHASES_FILE [TIER=JUNIT_XML ...]

PHASES_FILE has a line `name seconds` per phase of scripts/test."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

SLOWEST = 30
FILES = 15
# What kind of work a file's tests do (docs/testing.md), by the first pattern its path matches.
KINDS = [
    ("unit (no servers)", ("tests/unit/",)),
    ("browser (Chromium pages)", ("_browser.py",)),
    ("schema fuzzing", ("test_schema_fuzzing.py",)),
    ("load scenarios", ("test_concurrent_load.py", "test_websocket_load.py", "test_quota_and_limits.py")),
    (
        "faults (workers killed, Redis or PostgreSQL cut, memory ceilings)",
        (
            "test_worker_loss.py",
            "test_worker_availability.py",
            "test_backend_outages.py",
            "test_worker_memory_ceiling.py",
        ),
    ),
    (
        "engines in the test process (model compute)",
        (
            "test_kokoro_engine.py",
            "test_batch_engine.py",
            "test_voxcpm_engine.py",
            "test_voxcpm_batching.py",
            "test_voxcpm_voices.py",
            "test_engine_and_checkpoint.py",
            "test_worker_settlement.py",
            "test_custom_voices.py",
        ),
    ),
    ("deployments of their own (one model alone, routing)", ("_alone.py", "test_voxcpm_routing.py")),
    ("real speech heard by Whisper (Kokoro's real weights)", ("test_real_speech.py", "test_kokoro_real_weights.py")),
    ("API, WebSocket and pages over the shared stack", ("tests/",)),
]


def tier_times(junit: Path) -> tuple[float, list[tuple[float, str]]]:
    """The tier's wall time and (seconds, test id) per test case."""
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None, f"{junit}: no testsuite"
    return float(suite.get("time", 0)), [(float(case.get("time", 0)), case_id(case)) for case in suite.iter("testcase")]


def case_id(case: ET.Element) -> str:
    """pytest's id of a test case of an xunit1 report (`file` and `classname` attributes). A test
    made by a plugin (schemathesis) names the plugin's file: its class name says the module."""
    path, classname = case.get("file", ""), case.get("classname", "")
    if not path.startswith("tests/"):
        module = ".".join(part for part in classname.split(".") if not part[:1].isupper())
        path = module.replace(".", "/") + ".py"
    module = path.removesuffix(".py").replace("/", ".")
    scope = classname.removeprefix(module).lstrip(".")
    return "::".join(part for part in (path, scope, case.get("name", "")) if part)


def kind_of(path: str) -> str:
    return next((kind for kind, patterns in KINDS if any(p in path for p in patterns)), "other")


def report(phases: Path, tiers: dict[str, Path]) -> str:
    lines = ["", "==== where the time went (scripts/test) ===="]
    for line in phases.read_text().splitlines():
        name, seconds = line.rsplit(" ", 1)
        lines.append(f"{float(seconds):8.0f} s  {name}")
    every: list[tuple[float, str]] = []
    for tier, junit in tiers.items():
        if not junit.exists():
            lines.append(f"{'':>8}    {tier} tier: no report (it did not run to its end)")
            continue
        wall, cases = tier_times(junit)
        busy = sum(seconds for seconds, _ in cases)
        lines.append(f"{wall:8.0f} s  {tier} tier in pytest: {len(cases)} tests, {busy:.0f} s of test time")
        every += cases
    by_file: dict[str, float] = defaultdict(float)
    for seconds, test in every:
        by_file[test.split("::")[0]] += seconds
    by_kind: dict[str, float] = defaultdict(float)
    for path, seconds in by_file.items():
        by_kind[kind_of(path)] += seconds
    lines.append("---- test time by kind ----")
    lines += [f"{seconds:8.1f} s  {kind}" for kind, seconds in sorted(by_kind.items(), key=lambda i: -i[1])]
    lines.append(f"---- the {FILES} slowest files (test time, all their tests) ----")
    lines += [f"{seconds:8.1f} s  {name}" for name, seconds in sorted(by_file.items(), key=lambda i: -i[1])[:FILES]]
    lines.append(f"---- the {SLOWEST} slowest tests ----")
    lines += [f"{seconds:8.1f} s  {test}" for seconds, test in sorted(every, reverse=True)[:SLOWEST]]
    return "\n".join(lines)


if __name__ == "__main__":
    tiers = dict(arg.split("=", 1) for arg in sys.argv[2:])
    print(report(Path(sys.argv[1]), {tier: Path(path) for tier, path in tiers.items()}))
