"""The quality benchmark's figures on small hand-made timelines, and its replay machinery on a
tiny trace: gang scheduling places no gang partially, the FIFO greedy baseline does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from quality_bench import CONFIGS, replay  # noqa: E402
from quality_metrics import (  # noqa: E402
    PodSpan,
    fairness_over_time,
    gang_health,
    jain_index,
    job_waits,
    percentile,
    size_class,
    utilisation,
    weighted_deserved,
)
from quality_trace import QueueSpec, Trace, TraceJob, csv_trace, synthetic_trace  # noqa: E402

from stromboli.core.scheduler.conf import default_config, load_config  # noqa: E402


def job(name: str, pods: int, submit: float = 0.0, queue: str = "a") -> TraceJob:
    return TraceJob(name, queue, submit, pods, 100.0)


# -- Jain's index and percentiles --------------------------------------------------------------


def test_jain_index_is_one_when_equal_and_one_over_n_when_one_holds_all():
    assert jain_index([0.5, 0.5, 0.5]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    assert jain_index([1.0, 2.0]) == pytest.approx(9 / 10)  # (1+2)² / (2·(1+4))
    assert jain_index([0.0, 0.0]) == 1.0
    with pytest.raises(ValueError, match="no values"):
        jain_index([])


def test_percentile_interpolates_between_ranks():
    values = [float(v) for v in range(1, 11)]
    assert percentile(values, 50) == pytest.approx(5.5)
    assert percentile(values, 95) == pytest.approx(9.55)
    assert percentile(values, 100) == 10.0
    assert percentile([7.0], 95) == 7.0
    assert percentile([3.0, 1.0, 2.0], 0) == 1.0
    with pytest.raises(ValueError, match="q=101"):
        percentile(values, 101)


def test_size_classes():
    assert [size_class(n) for n in (1, 2, 8, 9, 32, 33, 64)] == [
        "1",
        "2-8",
        "2-8",
        "9-32",
        "9-32",
        "33-64",
        "33-64",
    ]
    with pytest.raises(ValueError, match="65 pods"):
        size_class(65)


# -- gang health ------------------------------------------------------------------------------


def test_gang_started_whole_is_not_partial():
    spans = [PodSpan("g", f"g-{i}", 10.0, 110.0) for i in range(4)]
    assert gang_health([job("g", 4)], spans, horizon=200.0) == (0, 0.0)


def test_gang_placed_piecemeal_wastes_what_its_early_pods_hold():
    # Two of four pods start at 0, the other two at 30; all run until 130 (the early ones
    # are held idle for 30s: 2 pods x 30s), and the early two end at 100 while the late two
    # run alone until 130 (2 x 30s more).
    spans = [
        PodSpan("g", "g-0", 0.0, 100.0),
        PodSpan("g", "g-1", 0.0, 100.0),
        PodSpan("g", "g-2", 30.0, 130.0),
        PodSpan("g", "g-3", 30.0, 130.0),
    ]
    assert gang_health([job("g", 4)], spans, horizon=200.0) == (1, 120.0)


def test_evicted_gang_member_makes_the_gang_partial_until_it_runs_again():
    spans = [
        PodSpan("g", "g-0", 0.0, 100.0),
        PodSpan("g", "g-1", 0.0, 100.0),
        PodSpan("g", "g-2", 0.0, 40.0),  # evicted at 40, recreated, runs again from 50
        PodSpan("g", "g-2", 50.0, 150.0),
    ]
    # 40..50: two of three run (20 pod-s); 100..150: one of three runs (50 pod-s).
    assert gang_health([job("g", 3)], spans, horizon=200.0) == (1, 70.0)


def test_single_pod_jobs_and_open_runs():
    spans = [PodSpan("s", "s-0", 0.0, 50.0), PodSpan("g", "g-0", 10.0, None)]
    # The single-pod job never counts; the gang's lone pod runs until the horizon (90s).
    assert gang_health([job("s", 1), job("g", 2)], spans, horizon=100.0) == (1, 90.0)


# -- waits and utilisation --------------------------------------------------------------------


def test_wait_runs_until_the_last_pod_first_starts():
    jobs = [job("g", 3, submit=10.0), job("late", 2, submit=40.0)]
    spans = [
        PodSpan("g", "g-0", 20.0, 30.0),
        PodSpan("g", "g-1", 25.0, 90.0),
        PodSpan("g", "g-0", 70.0, 90.0),  # restarted: its first start counts
        PodSpan("g", "g-2", 60.0, 90.0),
        PodSpan("late", "late-0", 50.0, None),
    ]
    waits = job_waits(jobs, spans, horizon=100.0)
    assert waits["g"] == (50.0, True)
    assert waits["late"] == (60.0, False)  # one pod never started: a lower bound


def test_utilisation_counts_gpu_seconds_within_the_horizon():
    spans = [
        PodSpan("a", "a-0", 0.0, 50.0, gpus=2),
        PodSpan("b", "b-0", 50.0, None, gpus=1),
        PodSpan("c", "c-0", 150.0, 160.0),  # after the horizon
    ]
    assert utilisation(spans, capacity=4, horizon=100.0) == pytest.approx((100 + 50) / 400)
    with pytest.raises(ValueError, match="capacity 0"):
        utilisation(spans, capacity=0, horizon=100.0)


# -- fair share -------------------------------------------------------------------------------


def test_weighted_deserved_fills_by_weight_up_to_demand_and_cap():
    weights = {"a": 2, "b": 1}
    assert weighted_deserved(12, {"a": 100, "b": 100}, weights) == pytest.approx({"a": 8, "b": 4})
    # a needs only 3: the rest goes to b.
    assert weighted_deserved(12, {"a": 3, "b": 100}, weights) == pytest.approx({"a": 3, "b": 9})
    # a is capped at 5.
    assert weighted_deserved(12, {"a": 100, "b": 100}, weights, {"a": 5}) == pytest.approx(
        {"a": 5, "b": 7}
    )
    assert weighted_deserved(12, {"a": 1, "b": 2}, weights) == pytest.approx({"a": 1, "b": 2})


def test_fairness_over_time_is_one_when_queues_hold_what_they_deserve():
    jobs = [job("a1", 6, queue="a"), job("b1", 6, queue="b")]
    fair = [PodSpan("a1", f"a1-{i}", 0.0, 100.0) for i in range(4)]
    fair += [PodSpan("b1", f"b1-{i}", 0.0, 100.0) for i in range(4)]
    args = ({"a": 1, "b": 1}, {"a": None, "b": None}, 8, 100.0)
    finished = {"a1": 100.0, "b1": 100.0}
    assert fairness_over_time(jobs, fair, finished, *args, step=10) == pytest.approx(1.0)
    # Queue a holds all 8 GPUs, b none: x = (2, 0), J = 1/2 at every instant.
    unfair = [PodSpan("a1", f"a1-{i}", 0.0, 100.0, gpus=2) for i in range(4)]
    assert fairness_over_time(jobs, unfair, finished, *args, step=10) == pytest.approx(0.5)


# -- traces and configurations ----------------------------------------------------------------


def test_synthetic_trace_is_fixed_by_its_seed_and_covers_every_size_class():
    first, again = synthetic_trace(), synthetic_trace()
    assert first == again
    assert synthetic_trace(seed=8) != first
    classes = {size_class(j.pods) for j in first.jobs}
    assert classes == {"1", "2-8", "9-32", "33-64"}
    assert all(j.pods <= 8 for j in first.jobs if j.queue == "sandbox")
    submits = [j.submit for j in first.jobs]
    assert submits == sorted(submits) and submits[-1] > 3600


def test_trace_in_the_public_slice_format_loads(tmp_path):
    # Same format as ../shared/traces/philly/philly_vc_day.csv (two # header lines, then rows).
    path = tmp_path / "slice.csv"
    path.write_text(
        "# source: a test\n# derivation: none\njob,queue,submit_s,gpus,duration_s\n"
        "philly-0000,vc-a,0,1,60\nphilly-0001,vc-b,30,8,3600\nphilly-0002,vc-a,86000,16,21600\n"
    )
    trace = csv_trace(path, nodes=6)
    assert [j.pods for j in trace.jobs] == [1, 8, 16]
    assert {q.name for q in trace.queues} == {"vc-a", "vc-b"}
    assert all(0 <= j.submit < 86400 for j in trace.jobs)


def test_csv_trace_errors_name_the_job_and_field(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("# comment\njob,queue,submit_s,gpus,duration_s\nj1,q,0,x,10\n")
    with pytest.raises(ValueError, match=r"bad\.csv job j1: invalid literal"):
        csv_trace(bad, nodes=1)
    bad.write_text("job,queue,submit_s,gpus,duration_s\nj2,q,0,65,10\n")
    with pytest.raises(ValueError, match=r"job j2: needs .* gpus in 1\.\.64"):
        csv_trace(bad, nodes=1)
    bad.write_text("job,queue,submit_s,gpus\nj3,q,0,1\n")
    with pytest.raises(ValueError, match="job j3: missing duration_s"):
        csv_trace(bad, nodes=1)


def test_volcano_default_config_is_the_simulator_default():
    shipped, default = load_config(CONFIGS["volcano-default"]), default_config()
    assert shipped.actions == default.actions
    assert [[p.name for p in t] for t in shipped.tiers] == [
        [p.name for p in t] for t in default.tiers
    ]
    for name in ("stromboli-guarded", "fifo-greedy"):
        load_config(CONFIGS[name])  # valid


# -- the replay machinery, on a tiny trace ----------------------------------------------------

#: Two nodes (16 GPUs). Ten one-pod jobs fill 10 GPUs at t=0 and run 60s; at t=1 a 12-pod gang
#: arrives: only 6 GPUs are free, so a gang scheduler holds it whole until 60s, while a FIFO
#: greedy placer starts 6 of its pods at once and the other 6 a minute later.
TINY = Trace(
    "tiny",
    nodes=2,
    queues=(QueueSpec("a", 1), QueueSpec("b", 1)),
    jobs=(
        *(TraceJob(f"small-{i}", "a", 0.0, 1, 60.0) for i in range(10)),
        TraceJob("gang", "b", 1.0, 12, 120.0),
    ),
)


async def test_fifo_baseline_places_gangs_partially_and_gang_configs_do_not():
    outcomes = {name: await replay(TINY, name, path, 3600.0) for name, path in CONFIGS.items()}
    greedy = outcomes["fifo-greedy"]
    assert greedy.partial_gangs == 1
    # 6 pods idle-wait ~59s for the other 6, then run alone for the last ~59s.
    assert greedy.wasted_pod_seconds == pytest.approx(2 * 6 * 59, abs=2 * 6 * 3)
    for name in ("volcano-default", "stromboli-guarded"):
        assert outcomes[name].partial_gangs == 0, name
        assert outcomes[name].wasted_pod_seconds == 0, name
        # The gang waits for the small jobs to finish, then starts whole.
        mean, _, count = outcomes[name].waits["9-32"]
        assert count == 1 and 55 <= mean <= 65, (name, mean)
    for outcome in outcomes.values():
        assert outcome.finished == len(TINY.jobs)
        assert 0 < outcome.utilisation <= 1
