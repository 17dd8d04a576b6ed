"""``kvplan fit``'s outputs: a table (rows, then each row's launch command; through rich in a terminal, written
plainly when piped: ``render/grid.py``, the same bytes), CSV and Markdown; JSON is the result's own ``to_dict``.
Renderers only format."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.render.grid import Grid, GridOut
from kvplan.units import format_bytes

if TYPE_CHECKING:
    from typing import Any

COLUMNS = ["gpu", "engine", "engine_version", "kv_dtype", "gpus", "tp", "pp", "dp", "nodes", "kv_cache_tokens",
           "max_concurrency", "kv_left_bytes", "decode_step_seconds_min", "output_tokens_per_second_max",
           "ttft_seconds_min", "usd_per_hour", "usd_per_million_output_tokens", "command"]


def _ms(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds * 1000:,.1f} ms"


def _s(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:,.2f} s"


def _money(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"


def _cells(r: Any, priced: bool) -> list[str]:
    cells = [r.gpu, r.engine, r.kv_dtype, f"{r.gpus} ({r.tp}x{r.pp}x{r.dp})", f"{r.kv_cache_tokens:,}",
             f"{r.max_concurrency:,}", format_bytes(r.kv_left_bytes), _ms(r.decode_step_seconds_min),
             _s(r.ttft_seconds_min)]
    return cells + ([_money(r.usd_per_hour), _money(r.usd_per_million_output_tokens)] if priced else [])


def _headers(result: Any) -> list[str]:
    heads = ["GPU", "engine", "KV dtype", "GPUs (tp x pp x dp)", "KV tokens / replica", "max concurrency",
             "KV left / GPU", "decode step ≥", "first token ≥"]
    if result.currency is not None:
        heads += [f"{result.currency}/hour", f"{result.currency} / M output tokens ≥"]
    return heads


def _title(result: Any) -> str:
    return (f"{result.model_id}: {result.concurrency:,} concurrent sequences of {result.context:,} tokens "
            f"(prompt {result.prompt_len:,})")


def beside_text(r: Any) -> str:
    """One line: whether the --beside model fits on the row's GPUs, with both fractions."""
    b = r.beside
    if b.fraction is None or b.beside_fraction is None:
        return f"{b.model} beside: no ({b.reason})"
    both = f"{b.flag} {b.fraction:g} for {r.plan.model_id if r.plan is not None else 'it'}, {b.beside_fraction:g} for {b.model}"
    if not b.fits:
        return f"{b.model} beside: no, with {both} ({b.reason})"
    return f"{b.model} beside: yes, {both}, started in that order"


def fit_csv(result: Any) -> str:
    import csv  # imports re: only for CSV
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    beside = getattr(result, "beside", None) is not None
    writer.writerow(COLUMNS + (["beside_fits", "fraction", "beside_fraction"] if beside else []))
    for r in result.rows:
        d = r.to_dict()
        writer.writerow([d["gpu"], d["engine"], d["engine_version"], d["kv_dtype"], d["gpus"], r.tp, r.pp, r.dp,
                         d["nodes"], d["kv_cache_tokens"], d["max_concurrency"], d["kv_left_bytes"],
                         *("" if d[k] is None else repr(d[k]) for k in
                           ("decode_step_seconds_min", "output_tokens_per_second_max", "ttft_seconds_min",
                            "usd_per_hour", "usd_per_million_output_tokens")), d["command"],
                         *([r.beside.fits, *("" if v is None else repr(v) for v in (r.beside.fraction,
                                                                                  r.beside.beside_fraction))]
                           if beside else [])])
    return out.getvalue()


def fit_markdown(result: Any) -> str:
    priced = result.currency is not None
    heads = _headers(result)
    lines = [f"### {_title(result)}", "", "| " + " | ".join(heads) + " |",
             "|" + "|".join("---" if i < 3 else "---:" for i in range(len(heads))) + "|"]
    lines += ["| " + " | ".join(_cells(r, priced)) + " |" for r in result.rows]
    lines += ["", "**Launch commands**", ""]
    lines += [f"{i}. {r.gpu}, {r.engine}, {r.kv_dtype}: `{r.command or 'none: ' + '; '.join(r.assumptions)}`"
              + (f"; {beside_text(r)}" if r.beside is not None else "") for i, r in enumerate(result.rows, 1)]
    if result.refused:
        lines += ["", "**Cannot hold it**", ""] + [f"- {x.gpu}, {x.engine}, {x.kv_dtype}: {x.reason}"
                                                   for x in result.refused]
    lines += ["", *[f"- {a}" for a in result.assumptions]]
    return "\n".join(lines) + "\n"


def write_fit(out: GridOut, result: Any) -> None:
    """The table, each row's launch command (printed whole: a command is copied, never wrapped), what cannot hold
    the workload and the notes."""
    priced = result.currency is not None
    if result.rows:
        columns = tuple((head, "left" if i < 3 else "right") for i, head in enumerate(_headers(result)))
        out.grid(Grid(_title(result), columns, tuple(tuple(_cells(r, priced)) for r in result.rows)))
        out.line("Launch commands (one per row):")
        for i, r in enumerate(result.rows, 1):
            out.line(f"  {i}. {r.command or '(none)'}" + (f"  [{'; '.join(r.assumptions)}]" if r.assumptions else ""),
                     soft_wrap=True)
            if r.beside is not None:
                out.line(f"     {beside_text(r)}", soft_wrap=True)
    else:
        out.line("No GPU type asked for holds this workload.")
    for x in result.refused:
        out.line(f"  cannot: {x.gpu}, {x.engine}, {x.kv_dtype}: {x.reason}", soft_wrap=True)
    out.line("Notes", bold=True)
    for a in result.assumptions:
        out.line(f"  • {a}", soft_wrap=True)
