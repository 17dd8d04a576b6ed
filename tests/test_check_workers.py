"""``kvplan check`` over a fleet in worker processes (``deploy/workers.py``) writes what one process writes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from kvplan.deploy import PARALLEL_FROM, check, checked_file
from kvplan.deploy import workers as workers_module
from kvplan.deploy.checks import Context
from kvplan.deploy.workers import MAX_JOBS, check_in_workers, workers_for
from kvplan.errors import UsageError
from kvplan.render.check_out import render

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = [p for kind in ("pass", "fail", "invalid") for p in sorted((REPO / "examples" / kind).iterdir())
            if p.is_file()]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every example (fitting, failing with fixes, invalid) several times over, past ``PARALLEL_FROM`` files, with
    the lengths of some changed so that their plans differ."""
    root = tmp_path_factory.mktemp("fleet")
    copies = -(-PARALLEL_FROM // len(EXAMPLES)) + 1
    for i in range(copies):
        folder = root / f"team{i:02d}"
        folder.mkdir()
        for path in EXAMPLES:
            text = path.read_text()
            if i % 2:
                text = text.replace("8192", str(4096 * (i + 1)))
            (folder / path.name).write_text(text)
    return root


def _report(fleet: Path, **kw: object) -> str:
    return render(check([str(fleet)], specs=REPO / "examples" / "specs", **kw), "json")  # type: ignore[arg-type]


def test_workers_write_what_one_process_writes(fleet: Path) -> None:
    files = sum(1 for _ in fleet.rglob("*.*"))
    assert files >= PARALLEL_FROM
    alone = _report(fleet, jobs=1)
    assert '"does-not-fit"' in alone and '"invalid-input"' in alone  # the fleet has failures and fixes to carry
    assert _report(fleet, jobs=2) == alone
    assert _report(fleet, jobs=3) == alone
    assert _report(fleet) == alone  # the default: one per CPU here


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_check_hands_the_files_to_the_workers(fleet: Path, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the first file, this process checks none itself (a worker's calls count in the worker): with ``fork``
    (Linux) and ``spawn`` (macOS, or a process running threads), whose workers get the run's context pickled."""
    import kvplan.deploy as deploy

    files = sorted(fleet.rglob("*.*"))[:6]
    folder = fleet.parent / f"few-{method}"
    folder.mkdir(exist_ok=True)
    for i, path in enumerate(files):
        shutil.copy(path, folder / f"{i}-{path.name}")
    alone = _report(folder, jobs=1)
    here: list[str] = []
    checked = deploy.check_file
    monkeypatch.setattr(deploy, "check_file", lambda path, *a, **kw: here.append(path) or checked(path, *a, **kw))
    monkeypatch.setattr(workers_module, "_start_method", lambda: method)
    assert _report(folder, jobs=2) == alone
    assert len(here) == 1


def test_workers_do_the_work(fleet: Path) -> None:
    """The workers return every file's result (fewer would mean this process checked the rest)."""
    files = sorted(str(p) for p in fleet.rglob("*.*"))[:12]
    ctx = Context(specs={})
    done = list(check_in_workers(checked_file, files, ctx, False, 2))
    assert [r.path for r in done] == files
    spawned = list(check_in_workers(checked_file, files[:3], ctx, False, 2, method="spawn"))  # macOS's way
    assert [render_one(r) for r in spawned] == [render_one(checked_file(p, Context(specs={}))) for p in files[:3]]


def render_one(result: object) -> str:
    from kvplan.deploy.report import CheckReport

    return render(CheckReport(files=[result]), "json")  # type: ignore[list-item]


def _dies(path: str) -> object:
    os._exit(3)  # a worker killed (memory, a signal)


def test_a_dead_worker_leaves_the_files_to_this_process(fleet: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alone = _report(fleet, jobs=1)
    monkeypatch.setattr(workers_module, "_check_one", _dies)
    assert list(check_in_workers(checked_file, [str(p) for p in sorted(fleet.rglob("*.yaml"))[:4]], Context(), False,
                                2)) == []
    assert _report(fleet, jobs=2) == alone


def test_workers_that_cannot_start_leave_the_files_to_this_process(fleet: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    def no_semaphores(method: str | None = None) -> object:
        raise OSError(38, "Function not implemented")  # no /dev/shm (AWS Lambda, some sandboxes)

    alone = _report(fleet, jobs=1)
    monkeypatch.setattr(multiprocessing, "get_context", no_semaphores)
    assert _report(fleet, jobs=2) == alone


def test_worker_count() -> None:
    assert workers_for(None, PARALLEL_FROM - 1, PARALLEL_FROM) == 1  # a few files: this process alone
    assert workers_for(None, PARALLEL_FROM, PARALLEL_FROM) == min(workers_module.cpus(), 2)
    assert workers_for(None, 10_000, PARALLEL_FROM) == workers_module.cpus()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(workers_module, "cpus", lambda: 64)
        assert workers_for(None, 100, PARALLEL_FROM) == 3  # each with 32 files at least: not 64 workers for 100
        assert workers_for(None, 10_000, PARALLEL_FROM) == 64
    assert workers_for(4, 2, PARALLEL_FROM) == 2  # never more than the files
    assert workers_for(1, 10_000, PARALLEL_FROM) == 1


@pytest.mark.parametrize("jobs", [0, -1, MAX_JOBS + 1, True, 2.5, "2"])
def test_a_bad_worker_count_is_refused_by_name(jobs: object, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        check([str(REPO / "examples" / "pass")], jobs=jobs)  # type: ignore[arg-type]
    assert err.value.field == "jobs"


def test_cli_jobs(tmp_path: Path) -> None:
    for path in EXAMPLES[:3]:
        shutil.copy(path, tmp_path / path.name)
    code, out, err = run_cli(["check", str(tmp_path), "-f", "json", "--jobs", "0"])
    assert code == 2 and "--jobs" in err and len(err.strip().splitlines()) == 1
    specs = ["--specs", str(REPO / "examples" / "specs")]
    one = run_cli(["check", str(tmp_path), "-f", "json", "-j", "1", *specs], seconds=120)
    two = run_cli(["check", str(tmp_path), "-f", "json", "-j", "2", *specs], seconds=120)
    assert one == two and one[0] == 0


def test_ctrl_c_is_one_line_and_status_130(capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C (the terminal's SIGINT reaches a check's workers too) ends any command with one line, not a traceback."""
    from kvplan.cli.guard import EXIT_INTERRUPTED, guarded

    def interrupted() -> None:
        raise KeyboardInterrupt

    assert guarded(interrupted) == EXIT_INTERRUPTED == 130
    assert capsys.readouterr().err == "kvplan: interrupted\n"


def test_progress_counts_every_file_in_order(fleet: Path) -> None:
    total = sum(1 for _ in fleet.rglob("*.*"))
    for jobs in (1, 2):
        seen: list[tuple[int, int]] = []
        check([str(fleet)], specs=REPO / "examples" / "specs", jobs=jobs,  # type: ignore[arg-type]
              progress=lambda done, of: seen.append((done, of)))
        assert seen == [(i, total) for i in range(1, total + 1)]


def test_progress_line_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys
    import time

    from conftest import Terminal
    from kvplan.cli.progress import progress_line

    monkeypatch.setattr(time, "monotonic", lambda: 1000.0)  # a clock that stands still: no redraw is due
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress_line("check", "files checked") is None  # a pipe or a log: nothing written
    for keep, end in ((True, "\rkvplan check: 3/3 files checked\n"), (False, "\r\x1b[2K")):
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        show = progress_line("check", "files checked", keep=keep)
        assert show is not None
        show(1, 3)
        show(2, 3)  # within a tenth of a second of the last draw: not drawn again
        show(3, 3)
        assert terminal.getvalue() == "\rkvplan check: 1/3 files checked" + end
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    show = progress_line("check", "files checked", after=60, keep=False)
    assert show is not None
    show(1, 2)
    show(2, 2)
    assert quiet.getvalue() == ""  # quicker than ``after``: nothing drawn, nothing to clear


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_calibrated_fleet_reaches_the_workers(tmp_path: Path, method: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--calibration``: its measured items travel with the run's context to each worker (pickled for ``spawn``),
    and the calibrated report is the one a single process writes."""
    import yaml

    import kvplan.deploy as deploy
    from conftest import DATA
    from kvplan.logs import parse_text
    from kvplan.logs.calibration import dump, from_log

    cases = {c["id"]: c for c in yaml.safe_load((DATA / "engine_logs_dev.yaml").read_text())["cases"]}
    calibration = tmp_path / "calibration.yaml"
    calibration.write_text(dump(from_log(parse_text(cases["vllm-10517-llama31-8b-3090-20k"]["log_excerpt"]),
                                         model="meta-llama/Llama-3.1-8B")))
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    for i in range(4):
        (fleet / f"serve-{i}.sh").write_text("# kvplan/gpu: RTX-3090\nvllm serve meta-llama/Llama-3.1-8B "
                                             f"--max-model-len {20000 - 1000 * i} --gpu-memory-utilization 0.9\n")
    alone = render(check([str(fleet)], calibration=calibration, jobs=1), "json")
    assert '"code": "calibration"' in alone  # the deployments planned with its measured items
    here: list[str] = []
    checked = deploy.check_file
    monkeypatch.setattr(deploy, "check_file", lambda path, *a, **kw: here.append(path) or checked(path, *a, **kw))
    monkeypatch.setattr(workers_module, "_start_method", lambda: method)
    assert render(check([str(fleet)], calibration=calibration, jobs=2), "json") == alone
    assert len(here) == 1
