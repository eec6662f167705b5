"""``multiverse status``: one screen on a study, while it runs or after it, read from
``results/<study>/`` alone.

Per design round: its training runs (a universe under one seed) that are ok, diverged,
failed by cause (:data:`multiverse.failures.CAUSES`), trained but not yet measured,
running (their shard's log is being written) and pending; the rounds not designed yet;
the ETA of every running shard, from the last epoch line its log holds; and each claim's
latest verdict, from the partial report (``snakemake --nolock partial_report``) or the
final one, with its estimate and interval.

It only reads files: it takes no lock and writes nothing, so it runs beside Snakemake.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from multiverse.failures import CAUSES

#: How recently a shard's log must have been written for the shard to count as running
#: (seconds); an older one belongs to a job that stopped (or waits on a slow epoch).
ACTIVE_S = 600
#: An epoch line's tail: ``(... universe i/n, shard ETA 2m04s)`` (multiverse.entrypoint.log_epoch).
ETA = re.compile(r"universe (\d+)/(\d+)(?: of lane \d+/\d+)?, (?:shard|lane) ETA ([0-9hms]+)\)")
LOG = re.compile(r"r(\d+)_s(\d+)_seed(\d+)\.log$")


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON file, or None where it is missing or half written (a job writing it now)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@dataclass
class Shard:
    """A train job's shard under one seed, as its log tells it."""

    round: int
    shard: int
    replicate: int
    running: bool
    eta: str | None = None
    universe: str | None = None
    age_s: float = 0.0


@dataclass
class Round:
    """One design round's training runs by state (``counts``) and its universes."""

    index: int
    designed: bool
    universes: int
    counts: dict[str, int] = field(default_factory=dict)


def run_state(folder: Path) -> str:
    """One training run's state from its files: the metrics record's status (a failed
    run's cause), else the train record's, else (design.fidelity) where its low fidelity
    stands, else ``pending`` (no record yet)."""
    for name, trained in (("metrics.json", False), ("train.json", True)):
        record = read_json(folder / name)
        if record is None:
            continue
        status = record.get("status")
        if status == "failed":
            return f"failed: {record.get('failure') or 'raised'}"
        return "trained, not measured" if trained and status in ("ok", "diverged") else str(status)
    if (folder / "low").is_dir():  # design.fidelity: at the low fidelity, its continuation not drawn or run yet
        return "low fidelity done" if (folder / "low" / "metrics.json").exists() else "low fidelity running"
    return "pending"


def shards(out: Path, now: float | None = None) -> list[Shard]:
    """The train jobs' shards that have a log, each with its last ETA and whether it is
    running: its log written within :data:`ACTIVE_S` and its records not all there."""
    now = time.time() if now is None else now
    found = []
    for log in sorted((out / "logs" / "train").glob("r*_s*_seed*.log")):
        m = LOG.search(log.name)
        if not m:
            continue
        r, s, j = map(int, m.groups())
        try:
            text = log.read_text(errors="replace")
            age = now - log.stat().st_mtime
        except OSError:
            continue
        eta = universe = None
        for line in reversed(text.splitlines()):
            e = ETA.search(line)
            if e:
                universe, eta = f"{e.group(1)}/{e.group(2)}", e.group(3)
                break
        folders = list((out / "universes" / f"r{r}" / f"s{s}").glob(f"u*/seed{j}"))
        done = bool(folders) and all((f / "train.json").exists() for f in folders)
        found.append(Shard(r, s, j, running=not done and age < ACTIVE_S, eta=eta, universe=universe, age_s=age))
    return found


def rounds(out: Path, sizes: Sequence[int] | None, seeds: int, running: Sequence[Shard] = ()) -> list[Round]:
    """Every round's training runs by state: of its design file's universes under each of
    ``seeds`` seeds; a run of a running shard without a record counts as running. Rounds
    beyond the design files (``sizes``: the planned round sizes, when known) are not
    designed yet."""
    live = {(s.round, s.shard, s.replicate) for s in running if s.running}
    designs = {int(p.stem.split("_")[1]): p for p in (out / "design").glob("round_*.json")}
    n_rounds = max(len(sizes or ()), max(designs, default=-1) + 1)
    out_rounds = []
    for r in range(n_rounds):
        design = read_json(designs[r]) if r in designs else None
        if design is None:
            n = sizes[r] if sizes and r < len(sizes) else 0
            out_rounds.append(Round(r, False, n, {"not designed": n * seeds}))
            continue
        counts: dict[str, int] = {}
        for u in design["universes"]:
            for j in range(seeds):
                folder = out / "universes" / f"r{r}" / f"s{u['shard']}" / f"u{u['slot']}" / f"seed{j}"
                state = run_state(folder)
                if state == "pending" and (r, u["shard"], j) in live:
                    state = "running"
                counts[state] = counts.get(state, 0) + 1
        out_rounds.append(Round(r, True, len(design["universes"]), counts))
    return out_rounds


def claims(out: Path) -> tuple[str | None, list[dict[str, Any]]]:
    """The latest report's claims: the partial report's where it is newer than the final
    one (or alone), with where it came from; each claim's name, badge and design-based
    (else model-based) estimate, interval and P(holds)."""
    reports = [(p, read_json(p)) for p in (out / "partial" / "report" / "claims.json", out / "report" / "claims.json")]
    reports = [(p, d) for p, d in reports if d is not None]
    if not reports:
        return None, []
    path, data = max(reports, key=lambda pd: pd[0].stat().st_mtime)
    rows = []
    for c in data.get("claims", []):
        answer = c.get("design") if (c.get("rests_on") == "design" and c.get("design")) else c.get("gp") or {}
        rows.append({"name": c.get("name"), "badge": (c.get("headline") or {}).get("badge", c.get("verdict")),
                     "rests_on": c.get("rests_on"), "effect": answer.get("effect"), "lo": answer.get("effect_lo"),
                     "hi": answer.get("effect_hi"), "p_holds": answer.get("p_holds")})
    return str(path.relative_to(out)), rows


ORDER = ("ok", "diverged", *(f"failed: {c}" for c in CAUSES), "trained, not measured", "running", "pending",
         "not designed")


def _num(x: Any, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def screen(study: str, out: Path, sizes: Sequence[int] | None = None, seeds: int = 1, now: float | None = None) -> str:
    """The status screen of the study whose results are in ``out``."""
    found = shards(out, now)
    by_round = rounds(out, sizes, seeds, found)
    lines = [f"study {study} ({out})"]
    total: dict[str, int] = {}
    for r in by_round:
        for k, v in r.counts.items():
            total[k] = total.get(k, 0) + v
    def counted(counts: dict[str, int]) -> str:
        states = [s for s in ORDER if counts.get(s)] + sorted(set(k for k, v in counts.items() if v) - set(ORDER))
        return ", ".join(f"{s} {counts[s]}" for s in states) or "none"

    lines.append(f"training runs (universe x seed), {seeds} seed(s) each:")
    for r in by_round:
        lines.append(f"  round {r.index} ({r.universes} universes): {counted(r.counts)}")
    lines.append(f"  all rounds: {counted(total)}")
    running = [s for s in found if s.running]
    lines.append(f"running shards: {len(running)}" if running else "running shards: none")
    for s in running:
        lines.append(f"  round {s.round} shard {s.shard} seed {s.replicate}: universe {s.universe or '?'}, "
                     f"ETA {s.eta or 'not yet known'} (log written {s.age_s:.0f} s ago)")
    source, rows = claims(out)
    if not rows:
        lines.append("claims: no report yet (snakemake --nolock partial_report reports on the rounds finished so far)")
    else:
        lines.append(f"claims (from {source}):")
        for c in rows:
            lines.append(f"  {c['name']}: {c['badge']} ({c['rests_on'] or 'n/a'}-based: "
                         f"{_num(c['effect'], '+.3f')} [{_num(c['lo'], '+.3f')}, {_num(c['hi'], '+.3f')}], "
                         f"P(holds) {_num(c['p_holds'], '.2f')})")
    return "\n".join(lines)
