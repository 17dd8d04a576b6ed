"""Renderers of ``kvplan check``: table, json, junit, github (workflow commands), markdown."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.deploy.report import CheckReport, DeploymentResult, Finding
from kvplan.jsontext import dumps_indented
from kvplan.units import format_bytes

FORMATS = ("table", "json", "junit", "github", "markdown")
_STATUS = {"pass": "PASS", "warn": "WARN", "fail": "FAIL", "invalid": "INVALID"}


def render(report: CheckReport, fmt: str, width: int | None = None) -> str:
    """``width``: the terminal's columns, which the table fits (None: piped, nothing is wrapped)."""
    if fmt == "table":
        return table(report, width)
    return {"json": as_json, "junit": junit, "github": github, "markdown": markdown}[fmt](report)


def _where(f: Finding) -> str:
    return f"{f.file}:{f.line}" if f.line else f.file


def _gpu(d: DeploymentResult) -> str:
    if d.gpu is None:
        return "-"
    return f"{d.gpu_count} x {d.gpu}" if d.gpu_count else d.gpu


def _kv(d: DeploymentResult) -> str:
    return format_bytes(max(d.kv_cache_bytes_per_gpu, 0)) if d.kv_cache_bytes_per_gpu is not None else "-"


def _num(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else ("-" if v is None else str(v))


def _summary(report: CheckReport) -> str:
    return report.summary()  # counts that add up, each saying what it counts (CheckReport.summary)


_HEADER = ("status", "deployment", "where", "model", "GPUs", "engine", "max-model-len", "KV/GPU",
           "longest that fits", "concurrency")


def _cells(d: DeploymentResult) -> tuple[str, ...]:
    return (_STATUS[d.status], d.name, f"{d.file}:{d.line}" if d.line else d.file, d.model or "-", _gpu(d),
            d.engine + (f" tp{d.tp}" if (d.tp or 1) > 1 else "") + (f" pp{d.pp}" if (d.pp or 1) > 1 else ""),
            _num(d.max_model_len), _kv(d), _num(d.max_model_len_fit),
            "-" if d.max_concurrency is None else f"{d.max_concurrency:.2f}x")


def table(report: CheckReport, width: int | None = None) -> str:
    """Plain text (no colour): one row per deployment, then one line per finding.

    Where a row would be wider than ``width`` (the terminal), each deployment becomes a block of
    labelled lines wrapped to the width instead; piped (``width`` None) nothing is wrapped or cut.
    """
    rows = [_HEADER, *(_cells(d) for d in report.deployments)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADER))]
    if width is None or sum(widths) + 2 * (len(widths) - 1) <= width:
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows] if len(rows) > 1 else []
    else:
        lines = [line for r in rows[1:] for line in _block(r, width)]
    found = report.findings
    if found:
        lines += [""] + [_wrap(f"{_where(f)}: {f.severity}: {f.deployment + ': ' if f.deployment else ''}"
                               f"{f.text()} [{f.code}]", width) for f in found]
    fixed = [d for d in report.deployments if d.fixes]
    if fixed:
        lines += [""] + [_wrap(f"{d.name}: fits with {fix.change} ({fix.kv_cache_tokens:,} KV tokens; {fix.why})", width)
                         + (f"\n    {fix.command}" if fix.command else "") for d in fixed for fix in d.fixes]
    lines += ["", _wrap(_summary(report), width)]
    return "\n".join(lines) + "\n"


def _block(cells: tuple[str, ...], width: int) -> list[str]:
    """One deployment as labelled lines: 'FAIL  name  (file:line)', then 'label value' pairs."""
    head = f"{cells[0]}  {cells[1]}  ({cells[2]})"
    pairs = [f"{label} {value}" for label, value in zip(_HEADER[3:], cells[3:]) if value != "-"]
    lines = [_wrap(head, width)]
    line = ""
    for pair in pairs:  # whole 'label value' pairs per line, so a label never ends a line alone
        candidate = f"{line} · {pair}" if line else pair
        if line and len(candidate) + 4 > width:
            lines.append(_wrap(line, width, indent="    "))
            candidate = pair
        line = candidate
    if line:
        lines.append(_wrap(line, width, indent="    "))
    return lines


def _wrap(text: str, width: int | None, indent: str = "") -> str:
    if width is None:
        return indent + text
    import textwrap

    return "\n".join(textwrap.wrap(text, max(width, 40), initial_indent=indent, subsequent_indent=indent + "  ",
                                   break_long_words=False, break_on_hyphens=False)) or indent


def as_json(report: CheckReport) -> str:
    # jsontext's writer: json.dumps(indent=2)'s bytes without the pure-Python encoder json takes with ``indent``
    return dumps_indented(report.to_dict()) + "\n"


def junit(report: CheckReport) -> str:
    """JUnit XML: a testsuite per file, a testcase per deployment (a file that cannot be read is one
    testcase with an <error>); errors are <failure>s, invalid input <error>s, warnings in <system-out>."""
    # here, not at import: saxutils imports urllib.request, http and email, ~15 ms of every check
    from xml.sax.saxutils import escape, quoteattr

    c = report.counts()
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="kvplan check" tests="{sum(max(len(f.deployments), 1) for f in report.files)}" '
           f'failures="{c["failed"]}" errors="{c["invalid"] + c["files_invalid"]}">']
    for f in report.files:
        cases = []
        if f.findings or not f.deployments:
            cases.append((f.path, f.findings, "file"))
        cases += [(d.name, d.findings, d.source) for d in f.deployments]
        fails = sum(1 for _, fs, _ in cases if any(x.severity == "error" and not x.invalid_input for x in fs))
        errors = sum(1 for _, fs, _ in cases if any(x.invalid_input for x in fs))
        out.append(f'  <testsuite name={quoteattr(f.path)} tests="{len(cases)}" failures="{fails}" errors="{errors}"'
                   f'{" skipped=" + chr(34) + "1" + chr(34) if f.skipped else ""}>')
        for name, findings, kind in cases:
            out.append(f'    <testcase classname={quoteattr(f.path)} name={quoteattr(name)}>')
            if f.skipped:
                out.append('      <skipped message="no deployment in this file"/>')
            for x in findings:
                text = escape(f"{_where(x)}: {x.text()}")
                if x.invalid_input:
                    out.append(f'      <error type={quoteattr(x.code)} message={quoteattr(x.text())}>{text}</error>')
                elif x.severity == "error":
                    out.append(f'      <failure type={quoteattr(x.code)} message={quoteattr(x.text())}>{text}</failure>')
            others = [x for x in findings if x.severity != "error"]
            if others:
                body = "\n".join(f"{_where(x)}: {x.severity}: {x.text()} [{x.code}]" for x in others)
                out.append(f"      <system-out>{escape(body)}</system-out>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def github(report: CheckReport) -> str:
    """GitHub Actions workflow commands: an annotation per finding on its file and line."""
    level = {"error": "error", "warning": "warning", "note": "notice"}
    lines = []
    for f in report.findings:
        props = [f"file={_gh_prop(f.file)}"]
        if f.line:
            props.append(f"line={f.line}")
        title = f"kvplan: {f.deployment}" if f.deployment else "kvplan"
        props.append(f"title={_gh_prop(title + ' (' + f.code + ')')}")
        lines.append(f"::{level[f.severity]} {','.join(props)}::{_gh_data(f.text())}")
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(report: CheckReport) -> str:
    """For a PR comment or $GITHUB_STEP_SUMMARY."""
    icon = {"pass": "✅", "warn": "⚠️", "fail": "❌", "invalid": "⛔"}
    lines = ["### kvplan check", "", _summary(report), ""]
    if report.deployments:
        lines += ["| | deployment | file | model | GPUs | max-model-len | KV / GPU | longest that fits | concurrency |",
                  "|---|---|---|---|---|---:|---:|---:|---:|"]
        for d in report.deployments:
            lines.append(f"| {icon[d.status]} | {_md(d.name)} | `{_md(d.file)}:{d.line or ''}` | {_md(d.model or '-')} | "
                         f"{_md(_gpu(d))} | {_num(d.max_model_len)} | {_kv(d)} | {_num(d.max_model_len_fit)} | "
                         f"{'-' if d.max_concurrency is None else f'{d.max_concurrency:.2f}x'} |")
        lines.append("")
    found = report.findings
    if found:
        lines += ["**Findings**", ""]
        for f in found:
            who = f" **{_md(f.deployment)}**:" if f.deployment else ""
            lines.append(f"- {f.severity} `{_md(_where(f))}`{who} {_md(f.text())} (`{f.code}`)")
    fixed = [d for d in report.deployments if d.fixes]
    if fixed:
        lines += ["", "**Changes that make it fit (each planned)**", ""]
        lines += [f"- **{_md(d.name)}**: `{_md(fix.change)}`: {fix.kv_cache_tokens:,} KV tokens ({_md(fix.why)})"
                  for d in fixed for fix in d.fixes]
    return "\n".join(lines) + "\n"
