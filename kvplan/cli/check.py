"""``kvplan check``: a CI gate that fails a deployment whose KV cache will not fit."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.cli.options import GPU_CATALOG, Arg, Opt

PATHS_AS_TEXT = True
"""``run`` takes its path options (--specs, --gpu-catalog, --calibration) as the text given or a Path alike: read
from the table (``cli/parse.py``) they stay text, so a check never imports pathlib (~5 ms of its start)."""

FIELDS: dict[str, str] = {"catalog": "gpu_catalog", "format": "fmt"}
"""Library parameter -> this command's parameter, where they differ."""

ARGUMENT = Arg("paths", "Files, directories or globs ('deploy/**/*.yaml'): kvplan deployment files, Kubernetes "
               "manifests, compose files, Helm values (production-stack, llm-d modelservice, vLLM's chart), SkyPilot "
               "tasks, Ray Serve LLM configs, shell scripts.", many=True)
OPTIONS: tuple[Opt, ...] = (
    Opt("fmt", ("--format", "-f"), "table", "table, json, junit, github or markdown."),
    Opt("gpu", ("--gpu", "-g"), None, "GPU type for deployments that name none (a `kvplan gpus` name or a node "
        "label such as NVIDIA-L4)."),
    GPU_CATALOG,
    Opt("specs", ("--specs",), None, "A directory of pinned model specs (`kvplan spec` output), found by model id.",
        path=True),
    Opt("online", ("--online",), False, "Read models neither bundled nor pinned from the Hugging Face Hub (off by "
        "default: CI stays offline).", flag=True),
    Opt("strict", ("--strict",), False, "Warnings fail too (exit 1).", flag=True),
    Opt("ignore_unrecognized", ("--ignore-unrecognized",), False, "Skip files that hold no deployment (for "
        "pre-commit, which passes every matching file); a file that runs an engine kvplan cannot read is still "
        "reported (a warning).", flag=True),
    Opt("calibration", ("--calibration",), None, "A calibration file (`kvplan log --save`): deployments of its "
        "model, GPU and engine version use its measured items.", path=True),
    Opt("jobs", ("--jobs", "-j"), None, "Processes to check the files with (1: one process). Default: from 64 files "
        "on, one per CPU, each with 32 files or more; else one. The report is the same either way.", integer=True),
)


def options() -> tuple[Opt, ...]:
    return OPTIONS



DOC = """Check that every deployment fits its GPUs and meets its requirements.

    Examples:

      kvplan check deploy/kvplan.yaml

      kvplan check k8s/vllm-deployment.yaml --format github

      kvplan check 'deploy/**/*.yaml' --format junit > kvplan.xml

      kvplan check compose.yaml --format markdown >> "$GITHUB_STEP_SUMMARY"

      kvplan check --gpu L4 -- vllm serve Qwen/Qwen3-8B --max-model-len 131072   # one literal command

      echo "vllm serve Qwen/Qwen3-8B --max-model-len 32k" | kvplan check --gpu L4 -    # a command from stdin

    A deployment that does not fit gets the smallest changes that make it fit, each planned; for a literal
    command they are whole commands, ready to paste.

    Exit status 0 when every deployment fits and meets its requirements, 1 when one does not, 2 when an
    input is invalid (other files are still checked).
    """


def _few_collections() -> tuple[int, ...]:
    """The cyclic collector every 100,000 allocations while the files are checked and the report is written, as
    before after (``run`` puts the saved thresholds back). A fleet's plans, findings and parsed files live until the
    report is written: at the default 700 the collector ran ~500 times over 1,000 files, a third of the run; they
    hold few cycles, and the memory stays the same. Through the writing too: back at 700, every tenth young
    collection examined again all that the run had left in the middle generation (~1.8 million objects over 10,000
    files: 17 such passes, ~1 s, 4 % of the run). (No contextlib: its import is ~1 ms of a check's start.)"""
    import gc

    saved = gc.get_threshold()
    gc.set_threshold(100_000, 50, 100)
    return saved


def run(paths: list[str], fmt: str, gpu: str | None, gpu_catalog: Any, specs: Any, online: bool, strict: bool,
        ignore_unrecognized: bool, calibration: Any, jobs: int | None = None) -> int:
    """Check the files (or one literal command); 1 where a deployment does not fit."""
    import sys

    saved = _few_collections()  # before the imports below too: ~90 modules' objects (a young collection: ~3 ms)
    try:
        from kvplan.deploy import check
        from kvplan.deploy.report import CheckReport
        from kvplan.render.formats import check_format, write

        check_format(CheckReport, fmt)
        import os

        words = None
        if paths == ["-"] or (paths and not os.path.exists(paths[0])):  # else files: literal.py is not read
            from kvplan.cli.literal import literal_command, run_literal

            words = literal_command(paths)
        if words is not None:
            report = run_literal(words, lambda files: check(files, gpu=gpu, catalog=gpu_catalog, specs=specs,
                                                             online=online, strict=strict, calibration=calibration,
                                                             jobs=jobs))
        else:
            progress = None
            if sys.stderr.isatty():  # a fleet takes seconds: a line counting the files (after half a second)
                from kvplan.cli.progress import progress_line

                progress = progress_line("check", "files checked", after=0.5, keep=False)
            report = check(paths, gpu=gpu, catalog=gpu_catalog, specs=specs, online=online, strict=strict,
                           ignore_unrecognized=ignore_unrecognized, calibration=calibration, jobs=jobs,
                           progress=progress)
        width = None
        if fmt == "table" and sys.stdout.isatty():  # fit the terminal; piped, never wrap or cut
            import shutil

            width = shutil.get_terminal_size().columns
        write(report, fmt, sys.stdout, width=width)
    finally:
        import gc

        if not gc.get_freeze_count():  # (where the caller froze objects of its own, they stay frozen: skipped)
            gc.freeze()  # what the run left in the young generation moves on uncollected, as a collection would move
            gc.unfreeze()  # it (back at 700, the next allocation traversed it all: ~20,000 objects, ~3 ms of a start)
        gc.set_threshold(*saved)
    return report.exit_code
