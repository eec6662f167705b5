"""``multiverse status`` (multiverse.status, multiverse.cli.status): one screen on a study
from its results alone, on a constructed results folder and (slow) on the tiny study
stopped halfway by Snakemake; it writes nothing and takes no lock."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import make_checkout, snakemake

from multiverse.status import rounds, screen, shards


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``root`` with its size and modification time (ns)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


def write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def constructed(tmp_path: Path) -> Path:
    """Round 0 of 4 universes in 2 shards: shard 0 has one ok run and one that ran out of
    memory; shard 1 is training (its log was just written); round 1 is not designed yet;
    a partial report holds one claim."""
    out = tmp_path / "results" / "demo"
    write(out / "design" / "round_0.json", {"round": 0, "universes": [
        {"id": f"r0u00{i}", "round": 0, "index": i, "shard": i // 2, "slot": i % 2} for i in range(4)]})
    run = out / "universes" / "r0" / "s0"
    write(run / "u0" / "seed0" / "train.json", {"status": "ok"})
    write(run / "u0" / "seed0" / "metrics.json", {"status": "ok"})
    write(run / "u1" / "seed0" / "train.json", {"status": "failed", "failure": "out of memory"})
    write(out / "logs" / "train" / "r0_s0_seed0.log", "x INFO r0u001 epoch 1/4 ... (0.1s; universe 2/2, shard ETA 3s)\n")
    write(out / "logs" / "train" / "r0_s1_seed0.log",
          "x INFO step started\nx INFO r0u002 epoch 3/60 train_loss=1 (0.2s; universe 1/2, shard ETA 2m04s)\n")
    write(out / "partial" / "report" / "claims.json", {"claims": [
        {"name": "adam_vs_sgd", "headline": {"badge": "holds"}, "rests_on": "design",
         "design": {"effect": 0.141, "effect_lo": 0.047, "effect_hi": 0.234, "p_holds": 0.999}}]})
    return out


def test_a_constructed_study_counts_every_run_and_reads_the_eta_and_the_partial_verdict(tmp_path):
    out = constructed(tmp_path)
    before = tree(tmp_path)
    running = shards(out)
    assert [(s.shard, s.running, s.eta, s.universe) for s in running] == [(0, False, "3s", "2/2"),
                                                                          (1, True, "2m04s", "1/2")]
    by_round = rounds(out, [4, 2], seeds=1, running=running)
    assert by_round[0].counts == {"ok": 1, "failed: out of memory": 1, "running": 2}
    assert not by_round[1].designed and by_round[1].counts == {"not designed": 2}
    text = screen("demo", out, [4, 2], seeds=1)
    assert "  round 0 (4 universes): ok 1, failed: out of memory 1, running 2" in text
    assert "  round 1 (2 universes): not designed 2" in text
    assert "round 0 shard 1 seed 0: universe 1/2, ETA 2m04s" in text
    assert "adam_vs_sgd: holds (design-based: +0.141 [+0.047, +0.234], P(holds) 1.00)" in text
    assert "claims (from partial/report/claims.json)" in text
    assert tree(tmp_path) == before, "status writes nothing"
    # a log not written for longer than ACTIVE_S belongs to a stopped job: pending, not running
    stale = time.time() - 3600
    os.utime(out / "logs" / "train" / "r0_s1_seed0.log", (stale, stale))
    assert rounds(out, [4, 2], 1, shards(out))[0].counts == {"ok": 1, "failed: out of memory": 1, "pending": 2}


def test_the_command_names_what_is_missing(tmp_path, capsys):
    from multiverse.cli import main

    with pytest.raises(SystemExit):
        main(["status", "nothing", "--results", str(tmp_path)])
    assert "no results of study 'nothing' yet" in capsys.readouterr().err


@pytest.mark.slow
def test_status_of_the_tiny_study_stopped_halfway(tmp_path):
    """Round 0 trained and measured, round 1 not designed, then a partial report beside it
    (snakemake --nolock partial_report): status counts both rounds, reads the partial
    verdicts, and leaves every file and Snakemake's locks as they were."""
    cwd = make_checkout(tmp_path)
    targets = [f"results/tiny/universes/r0/s0/u{k}/seed0/metrics.json" for k in range(2)]
    res = snakemake(cwd, "--cores", "2", *targets)
    assert res.returncode == 0, res.stderr[-3000:]
    cmd = [sys.executable, "-m", "multiverse.cli", "status", "--configfile", "tiny.yaml"]
    before = tree(cwd)
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True)
    assert tree(cwd) == before and not list((cwd / ".snakemake" / "locks").glob("*"))
    lines = done.stdout.splitlines()
    assert lines[0] == "study tiny (results/tiny)"
    assert lines[2] in ("  round 0 (2 universes): ok 2", "  round 0 (2 universes): ok 1, diverged 1",
                        "  round 0 (2 universes): diverged 2"), done.stdout
    assert lines[3] == "  round 1 (2 universes): not designed 2", done.stdout
    assert "claims: no report yet" in done.stdout
    res = snakemake(cwd, "--cores", "2", "--nolock", "partial_report")
    assert res.returncode == 0, res.stderr[-3000:]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True)
    assert "claims (from partial/report/claims.json):" in done.stdout
    for claim in ("adam_vs_sgd", "adaptive_gap", "gap_grows_with_batch", "train_loss_vs_gap", "adam_expected_best"):
        assert f"  {claim}: " in done.stdout, done.stdout
