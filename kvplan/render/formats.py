"""Every output format of every result, in one place: each result type registers its renderers once (table,
json, csv, markdown, ...), and ``write`` prints a result (or several of one type) in the format asked, refusing
a format the type lacks by name.

A renderer is ``(results, stream, **options) -> None``: ``results`` is a list of one result type (several
engines' results for ``-e vllm,sglang``), ``options`` what the command adds (``by_layer``, ``explain``, a
terminal ``width``); a renderer ignores the options it does not read. Renderers import what they print with
(rich for tables) when they run: ``kvplan estimate -f json`` never imports rich.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import IO, Any

from kvplan.errors import UsageError

if TYPE_CHECKING:
    Renderer = Callable[..., None]

_RENDERERS: dict[str, dict[str, Renderer]] = {}


def _kind(kind: type | str) -> str:
    return kind.__name__ if isinstance(kind, type) else kind


def register(kind: type | str, fmt: str) -> Callable[[Renderer], Renderer]:
    """Register ``fmt``'s renderer of results of ``kind`` (the result type, or its name)."""
    def add(renderer: Renderer) -> Renderer:
        _RENDERERS.setdefault(_kind(kind), {})[fmt] = renderer
        return renderer
    return add


def formats_for(kind: type | str) -> tuple[str, ...]:
    """The formats results of ``kind`` print in, in the order they were registered."""
    return tuple(_RENDERERS.get(_kind(kind), {}))


def check_format(kind: type | str, fmt: str) -> None:
    """Refuse, by name, a format results of ``kind`` do not print in (before anything is computed)."""
    known = formats_for(kind)
    if not known:
        raise LookupError(f"internal: no renderer registered for {_kind(kind)}")
    if fmt not in known:
        raise UsageError(f"unknown format '{fmt}' (known: {', '.join(known)})", field="fmt")


def write(results: Any, fmt: str, stream: IO[str], *, kind: type | str | None = None, **options: Any) -> None:
    """Print ``results`` (one result or a list of one type) in ``fmt`` on ``stream``. ``kind``: the results' type
    where it is not their Python type (rows built as dicts)."""
    items = list(results) if isinstance(results, (list, tuple)) else [results]
    if kind is None:
        if not items:
            raise LookupError("internal: no results and no kind to render them as")
        kind = type(items[0])
    check_format(kind, fmt)
    _RENDERERS[_kind(kind)][fmt](items, stream, **options)


def _json(stream: IO[str], doc: Any) -> None:
    from kvplan.jsontext import dumps_indented

    stream.write(dumps_indented(doc) + "\n")


def _console(stream: IO[str]) -> Any:
    from kvplan.render.console import make_console

    return make_console(stream)


# ------------------------------------------------------------------ kvplan estimate: EstimateResult

@register("EstimateResult", "table")
def _estimate_table(results: Sequence[Any], stream: IO[str], *, by_layer: bool = False, explain: bool = False,
                    plot: bool = False, **_: Any) -> None:
    from kvplan.render.plain import PlainOut, RichOut, plain_target
    from kvplan.render.table import table_lines, write_estimates

    # piped, or longer than the terminal: written row by row without rich (the same bytes where rich is not
    # in a terminal); rich for a terminal it fits
    console = None if plain_target(stream) else _console(stream)
    if console is None or not console.is_terminal or table_lines(results, by_layer) > console.height:
        write_estimates(PlainOut(stream, console), results, by_layer, explain)
    else:
        write_estimates(RichOut(console), results, by_layer, explain)
    if plot:
        from kvplan.render.plot import estimate_plot

        console = console or _console(stream)
        for r in results:
            title = f"{r.engine} {r.engine_version}: " if len(results) > 1 else ""
            console.print(title + estimate_plot(r), highlight=False, markup=False)


@register("EstimateResult", "json")
def _estimate_json(results: Sequence[Any], stream: IO[str], *, explain: bool = False, **_: Any) -> None:
    from kvplan.render.json_out import write_estimates

    write_estimates(results, stream, explain=explain)


@register("EstimateResult", "csv")
def _estimate_csv(results: Sequence[Any], stream: IO[str], *, by_layer: bool = False, **_: Any) -> None:
    from kvplan.render.csv_out import write_estimate_csv

    for i, result in enumerate(results):
        write_estimate_csv(stream, result, by_layer, header=i == 0)


@register("EstimateResult", "markdown")
def _estimate_markdown(results: Sequence[Any], stream: IO[str], *, by_layer: bool = False, explain: bool = False,
                       **_: Any) -> None:
    from kvplan.render.markdown import write_estimate_markdown

    for i, result in enumerate(results):
        if i:
            stream.write("\n")
        write_estimate_markdown(stream, result, by_layer, explain)


# ------------------------------------------------------------------ kvplan max-batch: CapacityPlan

@register("CapacityPlan", "table")
def _plan_table(plans: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.grid import GridOut
    from kvplan.render.plan_table import write_plan

    out = GridOut(stream)  # piped: written without rich, in rich's bytes
    for p in plans:
        write_plan(out, p)


@register("CapacityPlan", "json")
def _plan_json(plans: Sequence[Any], stream: IO[str], *, calibration: dict[str, Any] | None = None,
               **_: Any) -> None:
    docs = [p.to_dict() for p in plans]
    if calibration is not None:
        docs[0]["calibration"] = calibration
    # several engines: as estimate's JSON (render/json_out.py), one plan document per engine in a list
    _json(stream, docs[0] if len(docs) == 1 else {"kvplan_version": docs[0]["kvplan_version"], "results": docs})


@register("CapacityPlan", "csv")
def _plan_csv(plans: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.csv_out import plan_csv

    stream.write(plan_csv(list(plans)))


@register("CapacityPlan", "markdown")
def _plan_markdown(plans: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.markdown import plan_markdown

    stream.write("\n".join(plan_markdown(p) for p in plans))


# ------------------------------------------------------------------ kvplan fit: FitResult

@register("FitResult", "table")
def _fit_table(results: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.fit_out import write_fit
    from kvplan.render.grid import GridOut

    out = GridOut(stream)  # piped: written without rich, in rich's bytes
    for result in results:
        write_fit(out, result)


@register("FitResult", "json")
def _fit_json(results: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.json_out import dumps

    stream.write("".join(dumps(result.to_dict()) for result in results))


@register("FitResult", "csv")
def _fit_csv(results: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.fit_out import fit_csv

    stream.write("".join(fit_csv(result) for result in results))


@register("FitResult", "markdown")
def _fit_markdown(results: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.fit_out import fit_markdown

    stream.write("".join(fit_markdown(result) for result in results))


# ------------------------------------------------------------------ kvplan check: CheckReport

def _check_renderer(fmt: str) -> Renderer:
    def render(reports: Sequence[Any], stream: IO[str], *, width: int | None = None, **_: Any) -> None:
        from kvplan.render.check_out import render as render_check

        for report in reports:
            stream.write(render_check(report, fmt, width))
    return render


for _fmt in ("table", "json", "junit", "github", "markdown"):
    register("CheckReport", _fmt)(_check_renderer(_fmt))


# ------------------------------------------------------------------ kvplan gpus: GPU

@register("GPU", "table")
def _gpus_table(gpus: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.grid import Grid, GridOut

    rows = []
    for g in gpus:
        mark = "*" if g.estimate else ("~" if g.memory_precision != "exact" else "")
        rows.append((g.name, f"{g.memory_gib:.2f}{mark}", f"{g.memory_bytes:,}",
                     f"{g.bandwidth / 1e12:.2f}" if g.bandwidth else "-", f"{g.tflops:g}" if g.tflops else "-",
                     ", ".join(g.aliases)))
    GridOut(stream).grid(Grid(
        "GPUs: memory as torch reports it (GiB = 2^30 B; ~ rounded reading, * estimate)",
        (("name", "left"), ("GiB", "right"), ("bytes", "right"), ("TB/s", "right"), ("bf16 TFLOP/s", "right"),
         ("aliases", "left")), tuple(rows)))


@register("GPU", "json")
def _gpus_json(gpus: Sequence[Any], stream: IO[str], **_: Any) -> None:
    _json(stream, {"gpus": [g.to_dict() for g in gpus]})


# ------------------------------------------------------------------ kvplan models: bundled model rows

@register("BundledModel", "table")
def _models_table(rows: Sequence[dict[str, Any]], stream: IO[str], **_: Any) -> None:
    from kvplan.render.grid import Grid, GridOut
    from kvplan.units import format_bytes

    cells = tuple((r["id"], r["model_type"], str(r["layers"]), ", ".join(f"{n} {k}" for k, n in r["layer_kinds"].items()),
                   f"{r['max_position_embeddings'] or 0:,}", format_bytes(r["kv_bytes_at_max_context"]),
                   format_bytes(r["weights_bytes"]) if r["weights_bytes"] else "?") for r in rows)
    right = ("layers", "max context", "KV at max context", "weights")
    GridOut(stream).grid(Grid(
        "Bundled models (transformers cache, model dtype, one sequence at max context)",
        tuple((name, "right" if name in right else "left")
              for name in ("id", "type", "layers", "kinds", "max context", "KV at max context", "weights")), cells))


@register("BundledModel", "json")
def _models_json(rows: Sequence[dict[str, Any]], stream: IO[str], **_: Any) -> None:
    _json(stream, {"models": list(rows)})


# ------------------------------------------------------------------ kvplan verify: VerifyResult, RanksResult

@register("VerifyResult", "table")
def _verify_table(results: Sequence[Any], stream: IO[str], *, activation: Any = None, **_: Any) -> None:
    from kvplan.render.verify_out import print_activation, print_verify

    console = _console(stream)
    for result in results:
        print_verify(console, result)
    if activation is not None:
        print_activation(console, activation)


@register("VerifyResult", "json")
def _verify_json(results: Sequence[Any], stream: IO[str], *, activation: Any = None, **_: Any) -> None:
    for result in results:
        data = result.to_dict()
        if activation is not None:
            data["activation"] = activation.to_dict()
        _json(stream, data)


@register("RanksResult", "table")
def _ranks_table(results: Sequence[Any], stream: IO[str], **_: Any) -> None:
    from kvplan.render.verify_out import print_ranks

    console = _console(stream)
    for result in results:
        print_ranks(console, result)


@register("RanksResult", "json")
def _ranks_json(results: Sequence[Any], stream: IO[str], **_: Any) -> None:
    for result in results:
        _json(stream, result.to_dict())


# ------------------------------------------------------------------ kvplan log: ParsedLog

@register("ParsedLog", "table")
def _log_table(logs: Sequence[Any], stream: IO[str], *, comparison: Any = None, save: Any = None, **_: Any) -> None:
    from kvplan.render.log_out import print_log

    for log in logs:
        print_log(log, comparison, save, stream)


@register("ParsedLog", "json")
def _log_json(logs: Sequence[Any], stream: IO[str], *, comparison: Any = None, save: Any = None, **_: Any) -> None:
    from kvplan.render.log_out import to_json

    for log in logs:
        _json(stream, to_json(log, comparison, save))
