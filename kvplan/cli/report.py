"""``kvplan report``: one self-contained HTML page to share (kvplan/render/html_report.py)."""

from __future__ import annotations

import shlex
import sys
from typing import Any

from kvplan.cli import options as o
from kvplan.cli.options import Arg, Opt

FIELDS = {"gpus": "gpus", "engines": "engine", "kv_dtypes": "kv_dtype", "name": "model", "plot": "output"}
"""Library parameter (``kvplan.report.build``) -> this command's parameter, where they differ."""

ARGUMENT = Arg("model", "Bundled model id, config.json, model directory or YAML spec.")


def options() -> tuple[Opt, ...]:
    return (
        Opt("context", ("--context", "-c"), None, "Tokens per sequence, e.g. 32k (k = 1024).", required=True),
        Opt("concurrency", ("--concurrency",), None, "Sequences of --context served at once, e.g. 64.",
            required=True),
        Opt("gpus", ("--gpus",), None, "GPU types to plan, e.g. H100,H200,A100-80GB (default: the whole catalog)."),
        o.engine_opt("Engines to compare", several=True),
        Opt("kv_dtype", ("--kv-dtype", "--kv-cache-dtype"), "auto", "KV dtypes, e.g. auto,fp8."),
        o.ENGINE_VERSION.but(help="Which release's rules."),
        Opt("output", ("--output", "-o"), None, "The HTML file to write, e.g. report.html.", path=True,
            required=True),
    )


DOC = """Write one self-contained HTML page to share, that opens offline.

    The page holds the model and its per-layer cache with formulas, KV against context,
    which GPUs and how many (with launch commands), each GPU as the engine divides it, every assumption, and
    the command that made it. Nothing on it is fetched from the network: it opens from a file, offline.

    Example:

      kvplan report meta-llama/Llama-3.1-70B -c 32k --concurrency 64 --gpus H100,H200,A100-80GB -o report.html
    """


def run(model: str, context: str, concurrency: str, gpus: str | None, engine: str, kv_dtype: str,
        engine_version: str | None, output: Any) -> None:
    from kvplan.cli.values import whole
    from kvplan.errors import UsageError
    from kvplan.render.charts import require_matplotlib
    from kvplan.render.html_report import render
    from kvplan.report import build
    from kvplan.units import parse_count, parse_name_list

    if output.suffix.lower() not in (".html", ".htm"):
        raise UsageError(f"'{output}': the report is an .html file", field="output")
    if not output.parent.is_dir():
        raise UsageError(f"'{output}': no directory {output.parent}", field="output")
    require_matplotlib()  # its charts need the plot extra: said before any planning
    data = build(model, context=parse_count(context, "context"), concurrency=whole(concurrency, "concurrency"),
                 gpus=parse_name_list(gpus, "gpus") if gpus is not None else None,
                 engines=list(dict.fromkeys(parse_name_list(engine, "engine"))),
                 kv_dtypes=list(dict.fromkeys(parse_name_list(kv_dtype, "kv_dtype"))),
                 engine_version=engine_version, command=_command_line(model, context, concurrency, gpus, engine,
                                                                      kv_dtype, engine_version, output))
    output.write_text(render(data), encoding="utf-8")
    sys.stderr.write(f"kvplan: wrote {output}\n")


def _command_line(model: str, context: str, concurrency: str, gpus: str | None, engine: str, kv_dtype: str,
                  engine_version: str | None, output: Any) -> str:
    """The command that makes this page again, as the options were given."""
    words = ["kvplan", "report", model, "--context", context, "--concurrency", concurrency]
    for flag, value in (("--gpus", gpus), ("--engine", engine), ("--kv-dtype", kv_dtype),
                        ("--engine-version", engine_version)):
        if value is not None:
            words += [flag, value]
    return shlex.join([*words, "--output", str(output)])
