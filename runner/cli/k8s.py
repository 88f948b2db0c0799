"""``ghostrunner k8s render``: parse its options, render the manifests (:mod:`runner.deploy.k8s.manifests`), write them and say what it wrote."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Final

import click

from runner.cli.support import Settings, config_option, write_rendered
from runner.deploy.unitsyntax import STATE_DIRECTORY
from runner.errors import quoted

__all__ = ["K8S_COMMANDS"]


@click.group(short_help="Kubernetes manifests for this configuration.")
def k8s() -> None:
    """Kubernetes manifests for this configuration: a CronJob per agent and routine."""


@k8s.command(short_help="Write the Kubernetes manifests into OUT.")
@config_option
# Strings, checked before use: Path("") is ".", so an empty --out would write into the working directory.
@click.option("--out", "out_text", required=True, help="Directory to write the manifests into (one JSON file per object).")
@click.option(
    "--image",
    required=True,
    help="The container image that holds this ghostrunner (a tag or digest, such as registry.example/ghostrunner:0.1.0).",
)
@click.option("--namespace", default="ghostrunner", show_default=True, help="The namespace of every object (it must exist).")
@click.option(
    "--journal-mount",
    default=str(STATE_DIRECTORY),
    show_default=True,
    help="Where each shard's volume is mounted in its pods; every journal and the state directory must lie under it.",
)
@click.option("--storage", default="1Gi", show_default=True, help="The size each shard's volume claims.")
@click.option("--strict", is_flag=True, help="Write nothing and exit 78 if render has any warning.")
@click.pass_obj
def render(
    settings: Settings, config_path: Path | None, out_text: str, image: str, namespace: str, journal_mount: str, storage: str, strict: bool
) -> None:
    """Write a CronJob per agent and routine, a volume claim per shard, a ServiceAccount and a ConfigMap into OUT.

    Each CronJob runs `ghostrunner run` for its pair in runner.timezone, never
    two at once, starting no later than misfire_grace after its time. Values
    Kubernetes would not take as meant are refused (exit 2 for an option, 78
    for the configuration); files in OUT that are symbolic links or were not
    written by render are never replaced. Warnings (a journal outside
    --journal-mount, a schedule whose late run could reach its next fire) go
    to stderr, one line each; the manifests are still written, unless
    --strict, which then writes none and exits 78.

    Example: ghostrunner k8s render --config ghostrunner.toml --image registry.example/ghostrunner:0.1.0 --out k8s/
    """
    for option, text in (("--out", out_text), ("--image", image), ("--journal-mount", journal_mount)):
        if not text.strip():
            raise click.BadParameter(f"expected a non-empty value, got {quoted(text)}", param_hint=option)
    out = Path(out_text)
    config = settings.config(config_path)
    if config.config_file is None:
        raise click.UsageError("Kubernetes manifests need a configuration file for the pods to read; pass --config FILE")
    from runner.deploy.k8s.manifests import render_manifests, write_manifests  # the renderer, only for this command

    manifests = render_manifests(config, image=image, namespace=namespace, journal_mount=journal_mount, storage=storage)
    write_rendered(manifests, out, write_manifests, noun="manifest", strict=strict, journals=config.journals())
    click.echo(f"\nnamespace: kubectl create namespace {shlex.quote(namespace)}   # once: every object goes into it, and apply makes none")
    click.echo(f"apply:     kubectl apply -f {shlex.quote(str(out))}   # {len(manifests.cronjobs)} CronJobs in namespace {namespace}")


K8S_COMMANDS: Final = (k8s,)
