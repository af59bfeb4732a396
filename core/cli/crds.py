"""``stromboli crds``: print or write the CustomResourceDefinitions generated from our models."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("crds")
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Write one <group>_<plural>.yaml file per CRD here instead of printing them.",
)
def crds(output_dir: Path | None) -> None:
    """Print the Volcano-compatible CRDs (Queue, PodGroup, Job, ...) as YAML."""
    from stromboli.core.api.crds import build_crds, crd_filename, render_crd, render_crds

    if output_dir is None:
        click.echo(render_crds(), nl=False)
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    for crd in build_crds():
        path = output_dir / crd_filename(crd)
        path.write_text(render_crd(crd), encoding="utf-8")
        click.echo(str(path))
