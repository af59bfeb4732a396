"""The HTML report: one self-contained page with tables and inline SVG charts."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

from stromboli.core.simulate.engine import Simulation, SimulationResult
from stromboli.core.simulate.html import Series, charts, render_html, svg_chart, write_html
from stromboli.core.simulate.loader import load
from stromboli.core.simulate.output import as_list
from stromboli.core.simulate.timeline import Sample

CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf}, {name: proportion}]
"""

# Two 4-cpu nodes; queues gold (weight 3) and silver (weight 1). ``first`` (silver) holds three
# cpu per node for 30s; the gang ``second`` (gold, 2 × 3 cpu) arrives at 5s and waits for it;
# ``giant`` (silver, 64 cpu) arrives at 40s and never fits.
SCENARIO = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 4Gi, pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: n2}
status: {allocatable: {cpu: "4", memory: 4Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: gold}
spec: {weight: 3}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: silver}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: first}
spec: {minMember: 2, queue: silver}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: second, annotations: {sim.stromboli.dev/submit-at: 5s}}
spec: {minMember: 2, queue: gold}
"""

POD = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  schedulerName: volcano
  containers: [{{name: c, image: busybox, resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}}}]
"""


def scenario() -> str:
    text = SCENARIO
    for i in range(2):
        notes = "scheduling.k8s.io/group-name: first, sim.stromboli.dev/runtime: 30s"
        text += POD.format(name=f"first-{i}", annotations=notes, cpu="3")
    for i in range(2):
        notes = (
            "scheduling.k8s.io/group-name: second, sim.stromboli.dev/runtime: 1m, "
            "sim.stromboli.dev/submit-at: 5s"
        )
        text += POD.format(name=f"second-{i}", annotations=notes, cpu="3")
    notes = "scheduling.volcano.sh/queue-name: silver, sim.stromboli.dev/submit-at: 40s"
    text += POD.format(name="giant", annotations=notes, cpu="64")
    return text


async def simulate(tmp_path: Path) -> tuple[SimulationResult, dict]:
    (tmp_path / "sim.yaml").write_text(scenario())
    (tmp_path / "conf.yaml").write_text(CONF)
    result = await Simulation(load([str(tmp_path / "sim.yaml")]), tmp_path / "conf.yaml").run()
    return result, await as_list(result.store)


def svgs(page: str) -> list[ET.Element]:
    """Every chart on the page, parsed as XML (which fails on anything left unescaped)."""
    return [ET.fromstring(m) for m in re.findall(r"<svg class=\"chart\".*?</svg>", page, re.S)]


def series_keys(page: str) -> set[str]:
    return {
        path.get("data-series", "")
        for svg in svgs(page)
        for path in svg.iter("{http://www.w3.org/2000/svg}path")
    }


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


async def test_page_is_self_contained_with_three_charts(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    write_html(tmp_path / "report.html", result, final)
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") >= 3
    assert len(svgs(page)) == 3
    parser = _Tags()
    parser.feed(page)
    tags = {tag for tag, _ in parser.tags}
    assert "script" not in tags and "link" not in tags and "img" not in tags
    # Nothing is fetched from elsewhere: no src/href attribute anywhere.
    assert not [attrs for _, attrs in parser.tags if "src" in attrs or "href" in attrs]
    assert "url(" not in page and "@import" not in page


async def test_a_series_per_queue_with_deserved_dashed(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    page = render_html(result, final)
    keys = series_keys(page)
    assert {"cpu", "memory", "pending", "running"} <= keys
    for queue in ("gold", "silver"):
        assert f"queue:{queue}:held" in keys
        assert f"queue:{queue}:deserved" in keys
    paths = {
        p.get("data-series"): p
        for svg in svgs(page)
        for p in svg.iter("{http://www.w3.org/2000/svg}path")
    }
    assert paths["queue:gold:deserved"].get("stroke-dasharray")
    assert paths["queue:gold:held"].get("stroke-dasharray") is None
    # Held and deserved of one queue share a colour; the two queues differ.
    assert paths["queue:gold:held"].get("stroke") == paths["queue:gold:deserved"].get("stroke")
    assert paths["queue:gold:held"].get("stroke") != paths["queue:silver:held"].get("stroke")


async def test_tables_show_the_figures(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    page = render_html(result, final)
    row = re.search(r"<tr><td>default/second</td>.*?</tr>", page)
    assert row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(0))
    # job, queue, phase, pods, submitted, wait, run: the gang waited from 5s to 30s.
    assert cells == ["default/second", "gold", "Completed", "2 ok", "5s", "25s", "1m"]
    first = re.search(r"<tr><td>default/first</td>.*?</tr>", page)
    assert first is not None
    assert re.findall(r"<td[^>]*>(.*?)</td>", first.group(0))[2:] == [
        "Completed",
        "2 ok",
        "0s",
        "0s",
        "30s",
    ]
    assert "<td>default/giant</td>" in page
    assert "Why pending (1 pod)" in page
    assert "default/giant" in page[page.index("Why pending") :]


async def test_text_is_escaped(tmp_path: Path) -> None:
    result, final = await simulate(tmp_path)
    giant = next(
        o for o in final["items"] if o["kind"] == "Pod" and o["metadata"]["name"] == "giant"
    )
    giant["status"]["conditions"] = [
        {"type": "PodScheduled", "status": "False", "message": '<script>alert("x")</script> & co'}
    ]
    for sample in result.timeline:
        sample.queues["a<b>&c"] = (0.1, 0.2)
    page = render_html(result, final)
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co" in page
    assert 'data-series="queue:a&lt;b&gt;&amp;c:held"' in page
    assert "queue:a<b>&c:deserved" in series_keys(page)  # parses back to the real name


def test_charts_without_a_timeline() -> None:
    assert charts([]) == "<p>No timeline was sampled.</p>"


def test_step_path_keeps_only_changes_and_stays_in_the_frame() -> None:
    line = Series("s", "s", "#000", [(0.0, 0.5), (1.0, 0.5), (2.0, 0.5), (3.0, 1.0), (4.0, 1.0)])
    svg = ET.fromstring(svg_chart([line], 0.0, 4.0, 1.0, str, 0.5, "t"))
    path = next(svg.iter("{http://www.w3.org/2000/svg}path"))
    d = path.get("d", "")
    # Start, one horizontal run to the change at 3s, the rise, and on to the last sample.
    assert re.fullmatch(r"M[\d.]+ [\d.]+ H[\d.]+ V[\d.]+ H[\d.]+", d), d
    numbers = [float(n) for n in re.findall(r"[\d.]+", d)]
    width, height = float(svg.get("width", 0)), float(svg.get("height", 0))
    assert all(0 <= n <= max(width, height) for n in numbers)


def test_queue_missing_from_some_samples_counts_as_zero() -> None:
    timeline = [
        Sample(0.0, 0.0, 0.0, 0, 0, {}),
        Sample(10.0, 0.5, 0.5, 0, 1, {"late": (0.5, 0.5)}),
    ]
    page = charts(timeline)
    assert 'data-series="queue:late:held"' in page
    assert 'data-series="queue:late:deserved"' in page
