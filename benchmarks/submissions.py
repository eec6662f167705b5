"""What one cluster submission asks for, per full-scale overlay: Snakemake's own group-job
resource computation on the workflow's DAG, as the SLURM executor submits it.

    .venv/bin/python benchmarks/submissions.py [--overlays large_batch ...]

For each ``config/studies/cluster/<name>.yaml`` (after its preset), the workflow's DAG is
built in a dry run and every group job's resources are computed by
``snakemake.resources.GroupResources.basic_layered`` with the arguments
``snakemake.jobs.GroupJob.resources`` passes it under a remote executor (``run_local``
False: the group's toposort levels run one after another, so its width is its widest
level, and runtimes add up). Prints, per overlay, the declared node, the shards per
submission (:func:`multiverse.spec.layout.shards_per_submission`), the number of submissions
and the largest GPUs, cores, memory and runtime any one of them asks for.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
OVERLAYS = sorted(p.stem for p in (ROOT / "config/studies/cluster").glob("*.yaml"))


def group_requests(configfiles: list[Path], workdir: Path) -> list[dict[str, Any]]:
    """Every group job of the workflow under ``configfiles``, as ``{"group", "jobs", "gpu",
    "_cores", "mem_mb", "runtime"}``: what its submission asks for."""
    from snakemake.api import SnakemakeApi
    from snakemake.resources import GroupResources
    from snakemake.settings.enums import Quietness
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings

    with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
        wf = api.workflow(resource_settings=ResourceSettings(nodes=1000),
                          config_settings=ConfigSettings(configfiles=configfiles),
                          snakefile=ROOT / "workflow/Snakefile", workdir=workdir)
        wf.dag().execute_workflow(executor="dryrun")
        dag = wf._workflow.dag
        groups = {id(g): g for g in dag._group.values()}.values()
        out = []
        for g in groups:
            # GroupJob.resources' own call, as under a cluster executor (not run locally)
            res = GroupResources.basic_layered(toposorted_jobs=g.toposorted, constraints=g.global_resources,
                                               run_local=False, additive_resources=["runtime"], sortby=["runtime"])
            out.append({"group": g.groupid, "jobs": len(g.jobs),
                        **{k: res.get(k, 0) for k in ("gpu", "_cores", "mem_mb", "runtime")}})
        return out


def overlay_requests(name: str) -> tuple[dict, list[dict[str, Any]]]:
    """The merged config of preset + overlay (data.path set to an existing folder, as the
    check requires) and its group jobs' requests."""
    from multiverse.spec import compose, load_config, with_defaults

    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "cifar-10-batches-py"
        data.mkdir()
        local = Path(tmp) / "path.yaml"
        local.write_text(yaml.safe_dump({"data": {"path": str(data)}}))
        files = [ROOT / f"config/studies/{name}.yaml", ROOT / f"config/studies/cluster/{name}.yaml", local]
        config = with_defaults(compose([load_config(p) for p in files]))
        return config, group_requests(files, Path(tmp))


def main(argv) -> None:
    from multiverse.spec import gpus_per_job, shards_per_submission

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overlays", nargs="+", default=OVERLAYS, choices=OVERLAYS)
    args = ap.parse_args(argv)
    print("| overlay | node (GPUs, cores, GB) | per train/metrics job | shards per submission | submissions "
          "| one submission asks for at most |\n|---|---|---|---|---|---|")
    for name in args.overlays:
        config, groups = overlay_requests(name)
        node, t = config["cluster"], config["training"]
        top = {k: max(g[k] for g in groups) for k in ("gpu", "_cores", "mem_mb", "runtime")}
        print(f"| {name} | {node['gpus_per_node']}, {node['cpus_per_node']}, {node['mem_mb_per_node'] / 1000:.0f} "
              f"| {gpus_per_job(config)} GPU, {t['threads']} cores, {t['mem_mb'] / 1000:.0f} GB, {t['runtime']} min "
              f"| {shards_per_submission(config)} | {len(groups)} | {top['gpu']} GPUs, {top['_cores']} cores, "
              f"{top['mem_mb'] / 1000:.1f} GB, {top['runtime'] / 60:.1f} h |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
