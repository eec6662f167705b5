"""The report in forked workers (multiverse.runtime.fork_map, the report rule's threads):
the same numbers as one task after another, every figure drawn; and the pool itself
(results in order, errors raised as themselves, a child that dies, large results)."""
import json
import os
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from multiverse.spec import report_metrics, with_defaults
from multiverse.runtime import fork_map

TINY = Path("results/tiny")


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # it forks (conftest.one_torch_thread)


def test_tasks_come_back_in_order_from_two_processes_that_each_take_several():
    out = fork_map([lambda i=i: (i, os.getpid()) for i in range(7)], 2)
    assert [i for i, _ in out] == list(range(7))
    pids = {p for _, p in out}
    assert len(pids) == 2 and os.getpid() not in pids  # two children, each reused


def test_a_task_that_raises_raises_here_as_itself_after_the_others_ran(tmp_path):
    def raises():
        raise KeyError("no such metric")

    with pytest.raises(KeyError, match="no such metric"):
        fork_map([lambda: (tmp_path / "a").write_text("a"), raises, lambda: (tmp_path / "b").write_text("b")], 2)
    assert (tmp_path / "a").exists() and (tmp_path / "b").exists()


def test_a_task_that_ends_its_process_is_an_error_naming_its_status_not_a_hang():
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="task 1 of fork_map ended its process \\(exit status 3\\)"):
        fork_map([lambda: 1, lambda: os._exit(3), lambda: 2], 2)
    assert time.monotonic() - t0 < 30


class TwoArguments(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a} and {b}")


def test_errors_come_back_as_the_lowest_failing_tasks_with_the_childs_traceback():
    def later():
        time.sleep(0.3)
        raise ValueError("task 0's error")

    def unpicklable():
        raise TwoArguments(1, 2)  # pickles, but does not unpickle: comes back as text

    with pytest.raises(ValueError, match="task 0's error") as err:
        fork_map([later, lambda: 1 / 0], 2)
    assert "in fork_map's task 0" in err.value.__notes__[0] and "later" in err.value.__notes__[0]
    with pytest.raises(RuntimeError, match="TwoArguments: 1 and 2"):
        fork_map([lambda: 1, unpicklable], 2)


def test_a_child_that_dies_holding_a_queued_task_is_reported_not_a_broken_pipe():
    def dies():
        time.sleep(0.2)
        os._exit(9)

    with pytest.raises(RuntimeError, match="task 2 of fork_map ended its process \\(exit status 9\\)"):
        fork_map([lambda: 1, lambda: time.sleep(1) or 2, dies, lambda: 4, lambda: 5], 2)


def test_results_larger_than_a_pipe_and_work_meanwhile():
    seen = []
    out = fork_map([lambda: b"x" * 5_000_000, lambda: 2, lambda: b"y" * 300_000], 2, meanwhile=lambda: seen.append(1))
    assert len(out[0]) == 5_000_000 and out[1] == 2 and len(out[2]) == 300_000 and seen == [1]
    assert fork_map([lambda: 1, lambda: 2], 1, meanwhile=lambda: seen.append(2)) == [1, 2] and seen == [1, 2]


@pytest.mark.slow
def test_the_report_in_two_workers_gives_one_workers_numbers_and_every_figure(tiny_run, tmp_path):
    """Every claim type of the tiny study (comparison, trend, correlation, expected best):
    claims, Sobol indices and diagnostics equal to the last bit with two workers and one
    (torch on one thread in both), and every figure file drawn."""
    from multiverse.report import build_report, to_jsonable
    from multiverse.report_analysis import analyse

    config = with_defaults(yaml.safe_load((tiny_run / "tiny.yaml").read_text()))
    df = pd.read_parquet(tiny_run / TINY / "multiverse.parquet")

    def numbers(res):
        return json.dumps(to_jsonable({"claims": [c.to_dict() for c in res["claims"]],
                                       "sensitivity": res["sensitivity"], "diagnostics": res["diagnostics"],
                                       "influence": res["influence"]}), sort_keys=True)

    one, two = analyse(df, config, workers=1), analyse(df, config, workers=2)
    assert {c["type"] for c in config["claims"]} >= {"comparison", "trend", "correlation", "expected_best"}
    assert numbers(one) == numbers(two)
    names = [c["name"] for c in config["claims"]]
    out = {"claims_json": str(tmp_path / "claims.json"), "claims_csv": str(tmp_path / "claims.csv"),
           "claims_figure": str(tmp_path / "claims.png"), "outcomes": str(tmp_path / "outcomes.png"),
           "html": str(tmp_path / "report.html"),
           **{k: {m: str(tmp_path / f"{k}_{m}.png") for m in report_metrics(config)}
              for k in ("maps", "curves", "sobol", "loo")},
           "claim_figures": {n: str(tmp_path / f"claim_{n}.png") for n in names},
           "where_figures": {n: str(tmp_path / f"claim_{n}_where.png") for n in names}}
    build_report(str(tiny_run / TINY / "multiverse.parquet"), config, out, workers=2)
    pngs = sorted(tmp_path.glob("*.png"))
    assert len(pngs) == 2 + 4 * len(report_metrics(config)) + 2 * len(names)
    assert all(p.stat().st_size > 1000 for p in pngs)
    written = json.loads((tmp_path / "claims.json").read_text())
    assert [c["verdict"] for c in written["claims"]] == [c.to_dict()["verdict"] for c in one["claims"]]
