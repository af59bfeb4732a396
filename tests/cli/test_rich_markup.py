"""Names, reasons and messages reach rich as text, never as markup: ``[/x]`` in a reason must
not crash the simulator report or ``stromboli explain``, nor ``[bold]`` restyle them; each
string is printed as written."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console, RenderableType

from stromboli.core.cli.explain import render
from stromboli.core.scheduler.explain import Explanation, NodeVerdict
from stromboli.core.simulate import report
from stromboli.core.simulate.jobs import (
    Figures,
    JobFigures,
    PendingPod,
    QueueFigures,
    Utilisation,
)
from stromboli.core.simulate.outcomes import EvictionGroup, MadeJobs, Waiting, WaitingJob
from tests.scheduler.builders import make_session, node, pod, podgroup, session_task

#: Markup rich would read: closing tags with nothing open, styles, links, emoji codes, escapes.
NASTY = ["[/x]", "[bold]", "[/]", "[red]x[/red]", "[link=y]z[/link]", ":smile:", "\\", "a\\[b]"]
#: Short enough for the narrowest folded column (16), without whitespace rich could wrap at.
hostile = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.sampled_from("ab[]/\\:=#@!.,bold"), min_size=1, max_size=16),
)


def printed(renderable: RenderableType) -> str:
    out = io.StringIO()
    Console(file=out, width=400, color_system=None, emoji=True).print(renderable)
    return out.getvalue()


def assert_literal(text: str, *strings: str) -> None:
    for s in strings:
        assert s in text, (s, text)


def figures(name: str, queue: str, phase: str, reason: str) -> Figures:
    job = JobFigures(namespace="ns", name=name, label=name, queue=queue, phase=phase, min_member=1)
    job.pods = {phase: 1}
    return Figures(
        jobs=[job],
        queues=[QueueFigures(name=queue, weight=1)],
        utilisation=Utilisation(),
        pending=[PendingPod("ns", name, name, queue, reason)],
        end_time=10.0,
    )


@settings(max_examples=150, deadline=None)
@given(hostile, hostile, hostile, hostile)
def test_report_tables_print_user_strings_as_written(
    name: str, queue: str, phase: str, reason: str
) -> None:
    fig = figures(name, queue, phase, reason)
    assert_literal(printed(report.jobs_table(fig)), name, queue, phase)
    assert_literal(printed(report.queues_table(fig)), queue)
    assert_literal(printed(report.pending_table(fig)), name, reason)
    waiting = Waiting([WaitingJob(name, queue, phase, reason)], 1)
    assert_literal(printed(report.waiting_table(waiting)), name, queue, phase, reason)
    group = EvictionGroup(name, queue, phase, queue, reason, "1970-01-01T00:00:05Z", [name])
    assert_literal(printed(report.evictions_table([group])), name, queue, phase, reason)
    assert_literal(printed(report.made_table([MadeJobs(phase, name)])), phase, name)


def test_markup_in_a_reason_neither_crashes_nor_styles() -> None:
    fig = figures("[bold]job", "[/x]", "Pending", "[red]held[/red] [/]")
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=True, color_system="standard")
    for table in (report.jobs_table(fig), report.pending_table(fig)):
        console.print(table)
    text = out.getvalue()
    assert "[red]held[/red] [/]" in text and "[bold]job" in text
    assert "\x1b[1m[bold]" not in text and "\x1b[31mheld" not in text


@settings(max_examples=100, deadline=None)
@given(hostile, hostile, hostile, hostile)
def test_explain_prints_reasons_and_messages_as_written(
    reason: str, message: str, check: str, node_name: str
) -> None:
    waiting = pod("p", group="pg", cpu="1")
    waiting["status"] = {
        "phase": "Pending",
        "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": reason, "message": message}
        ],
    }
    ssn = make_session([node("n1"), podgroup("pg", 1), waiting])
    task = session_task(ssn, "p")
    job = ssn.jobs[task.job_id]
    explanation = Explanation(
        task=task,
        job=job,
        pre_predicate=message,
        nodes=[
            NodeVerdict(node=node_name, failures=[(check, reason)]),
            NodeVerdict(node="n1", scores={check: 1.0}),
        ],
    )
    out = io.StringIO()
    render(explanation, Console(file=out, width=400, color_system=None), limit=10)
    assert_literal(out.getvalue(), f"Last reason: {reason}: {message}", node_name, check, reason)
    assert f"Rejected before node checks: {message}" in out.getvalue()
