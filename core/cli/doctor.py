"""``stromboli doctor``: check an install on a live cluster and say what to fix.

One line per finding (``OK``/``WARN``/``FAIL``, the check, what was seen, what to do); exit
code 1 when something FAILed (or WARNed, with ``--strict``). Heavy modules are imported inside
the command, so ``stromboli --help`` does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from stromboli.core.doctor.view import ClusterView


@click.command(name="doctor")
@click.option(
    "--kubeconfig",
    envvar="KUBECONFIG",
    help="Path to a kubeconfig file (found as kubectl finds it when omitted).",
)
@click.option("--context", default=None, help="The kubeconfig context to use.")
@click.option(
    "-n",
    "--namespace",
    default="volcano-system",
    show_default=True,
    help="Where Stromboli is installed.",
)
@click.option(
    "-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--strict", is_flag=True, help="Exit 1 on WARN findings too.")
def doctor(
    kubeconfig: str | None, context: str | None, namespace: str, output: str, strict: bool
) -> None:
    """Check a cluster's Stromboli install (CRDs, RBAC, webhook, certificates, operators,
    enrolled namespaces) and say what to fix."""
    import asyncio

    from stromboli.core.cluster.errors import ApiError
    from stromboli.core.cluster.kubeconfig import KubeConfigError
    from stromboli.core.doctor.findings import exit_code
    from stromboli.core.doctor.report import diagnose, render_json, render_text

    try:
        view = asyncio.run(_collect(kubeconfig, context, namespace))
    except (KubeConfigError, ApiError, OSError) as err:
        raise click.ClickException(f"cannot read the cluster: {err}") from None
    findings = diagnose(view)
    code = exit_code(findings, strict)
    click.echo(render_json(findings, code) if output == "json" else render_text(findings))
    raise SystemExit(code)


async def _collect(kubeconfig: str | None, context: str | None, namespace: str) -> ClusterView:
    from stromboli.core.cluster.kube import KubeConfig, KubeStore
    from stromboli.core.doctor.collect import collect

    config = KubeConfig.load(kubeconfig, context=context)
    store = KubeStore(config, qps=100, burst=200, user_agent="stromboli-doctor")
    try:
        return await collect(store, namespace)
    finally:
        await store.close()
