"""How the worker's batcher fills a batch, per engine: an engine that makes each sentence whole
(Kokoro) runs a live job's first sentence without its next ones, so its first audio is one sentence
away; its later sentences follow one a forward, in order, each made while the one before it plays and
sent before the next is made; an asynchronous job's in growing groups (1, 1, 2, 4, … as many as have
ended); other jobs' rows fill the room. An engine that streams tokens
(ChatTTS) takes up to the batch's room of one job at once. The engine here is only a spec: filling
never calls it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

from inference.chattts.spec import SPEC as CHATTTS
from inference.kokoro.spec import SPEC as KOKORO
from synthesis.worker.batcher import Batcher
from synthesis.worker.run import JobRun


@dataclass
class Run:
    """What the batcher reads of a claimed job (synthesis.worker.run.JobRun's scheduling side)."""

    run_id: str
    total: int
    interactive: bool = True
    org_id: int = 1
    priority: int = 0
    scheduled: int = 0
    ended: int = 0
    arrived: float = 0.0
    runs_dry: float | None = None  # first audio + audio published (monotonic), once it has some
    taken: list[int] = field(default_factory=list)

    @property
    def job(self):
        return SimpleNamespace(interactive=self.interactive)

    @property
    def awaits_first_audio(self) -> bool:  # JobRun.awaits_first_audio's rule
        return self.interactive and not self.scheduled

    @property
    def has_rows(self) -> bool:
        return self.scheduled < self.total

    @property
    def next_deadline(self) -> float:  # JobRun.next_deadline's rule
        if not self.interactive:
            return math.inf
        return self.arrived if self.runs_dry is None else self.runs_dry

    @property
    def in_flight(self) -> int:
        return self.scheduled - self.ended

    @property
    def ahead(self) -> int:  # JobRun.ahead's rule
        return 1 if self.interactive else max(1, self.ended)

    def next_row(self):
        self.taken.append(self.scheduled)
        self.scheduled += 1
        return f"{self.run_id}:{self.scheduled - 1}"


def batcher(spec) -> Batcher:
    b = Batcher.__new__(Batcher)  # no model thread: only the filling is exercised
    b.engine = SimpleNamespace(spec=spec)
    b.max_batch = 4
    b.first_alone = spec.features.streaming == "sentences"
    b._waiting = []
    return b


def test_a_live_jobs_first_sentence_runs_alone_on_an_engine_that_makes_sentences_whole():
    b = batcher(KOKORO)
    run = Run("a", total=9)
    b._waiting = [run]
    rows, _ = b._fill()
    assert rows == ["a:0"]  # its first audio does not wait for three more sentences
    assert b._fill(4)[0] == []  # nothing more of it while its first sentence is made
    made = []
    for ended in (1, 2, 3, 4):  # each forward starts as the one before it ends
        run.ended = ended
        made.append(b._fill(4)[0])
    # One a forward, in order: each sentence reaches the listener before the next is made (before:
    # groups of 1, 2, 4, whose sentences arrived together).
    assert made == [["a:1"], ["a:2"], ["a:3"], ["a:4"]]


def test_other_jobs_fill_the_room_a_streams_next_sentence_leaves():
    b = batcher(KOKORO)
    live, other = Run("a", total=6, org_id=1), Run("j", total=6, interactive=False, org_id=2)
    b._waiting = [live, other]
    assert b._fill()[0] == ["a:0", "j:0"]
    live.ended = other.ended = 1
    assert b._fill(4)[0] == ["a:1", "j:1"]
    live.ended = other.ended = 2
    assert b._fill(4)[0] == ["a:2", "j:2", "j:3"]  # the live one, one at a time; the job's group grows


def test_each_live_jobs_first_sentence_comes_before_anyones_second():
    b = batcher(KOKORO)
    b._waiting = [Run("a", total=3, org_id=1), Run("b", total=3, org_id=2)]
    rows, _ = b._fill()
    assert rows == ["a:0", "b:0"]


def test_an_asynchronous_jobs_sentences_grow_the_same_way_on_such_an_engine():
    b = batcher(KOKORO)  # its /stream is listened to too; a long job reaches the batch's room in a few forwards
    run = Run("j", total=6, interactive=False)
    b._waiting = [run]
    assert b._fill()[0] == ["j:0"]
    run.ended = 1
    assert b._fill()[0] == ["j:1"]
    run.ended = 2
    assert b._fill()[0] == ["j:2", "j:3"]


def test_an_engine_that_streams_tokens_takes_a_live_jobs_sentences_together():
    b = batcher(CHATTTS)
    b._waiting = [Run("a", total=5)]
    rows, _ = b._fill()
    assert rows == ["a:0", "a:1", "a:2", "a:3"]  # its first chunk streams within the batch


def test_a_live_jobs_first_sentence_does_not_wait_for_companions_on_such_an_engine():
    kokoro, chattts = batcher(KOKORO), batcher(CHATTTS)
    for b in (kokoro, chattts):
        b.first_alone = b.engine.spec.features.streaming == "sentences"
        b._waiting = [Run("a", total=2)]
    assert kokoro._live_first_sentence() is True  # gathering would delay its first audio
    assert chattts._live_first_sentence() is False  # its first chunk streams within the batch anyway
    kokoro._waiting = [Run("j", total=2, interactive=False)]
    assert kokoro._live_first_sentence() is False  # an asynchronous job may wait for companions


def test_between_two_windows_only_live_jobs_first_sentences_are_started():
    b = batcher(KOKORO)
    started, waiting, job = (
        Run("a", total=3, scheduled=1, ended=1),
        Run("b", total=3, org_id=2),
        Run("j", total=3, interactive=False, org_id=3),
    )
    b._waiting = [started, waiting, job]
    assert b._fill(4, first_only=True)[0] == ["b:0"]  # its listener waits; the others wait for the next forward
    assert b._fill(4, first_only=True)[0] == []  # and only its first sentence
    assert b._fill(4)[0] == ["a:1", "j:0"]


def test_where_the_room_runs_out_the_stream_nearest_running_dry_goes_first():
    b = batcher(KOKORO)
    fed, dry = (
        Run("a", total=6, scheduled=2, ended=2, runs_dry=12.0),
        Run("b", total=6, scheduled=2, ended=2, runs_dry=10.0),
    )
    b._waiting = [fed, dry]
    assert b._fill(1)[0] == ["b:2"]  # its listener runs out 2 s before the other's, who waited longer
    job = Run("j", total=3, interactive=False)
    b._waiting = [job, fed]
    assert b._fill(1)[0] == ["a:2"]  # nobody listens as an asynchronous job is made


def test_across_organizations_the_earliest_deadline_leads_each_round_and_plans_still_come_first():
    b = batcher(KOKORO)
    late, soon = (
        Run("a", total=4, org_id=1, scheduled=1, ended=1, runs_dry=20.0),
        Run("b", total=4, org_id=2, scheduled=1, ended=1, runs_dry=5.0),
    )
    b._waiting = [late, soon]
    assert b._fill(1)[0] == ["b:1"]
    assert b._fill(4)[0] == ["a:1"]  # round-robin still: the other organization's row is next, not starved
    paid, free = (
        Run("p", total=4, org_id=3, priority=0, runs_dry=20.0, scheduled=1, ended=1),
        Run("f", total=4, org_id=4, priority=1, runs_dry=5.0, scheduled=1, ended=1),
    )
    b._waiting = [free, paid]
    assert b._fill(1)[0] == ["p:1"]


def test_a_jobs_deadline_is_when_its_listener_runs_out():
    run = JobRun.__new__(JobRun)  # only the rule: no job, no Redis
    run.rate, run.started, run.position = 24000, 100.0, 0
    run.job = SimpleNamespace(interactive=True)
    run.first_audio_at = None
    assert run.next_deadline == 100.0  # before its first audio: its listener waits since it arrived
    run.first_audio_at, run.position = 101.0, 3 * 24000
    assert run.next_deadline == 104.0  # three seconds published after the first audio at 101 s
    run.job = SimpleNamespace(interactive=False)
    assert run.next_deadline == math.inf
