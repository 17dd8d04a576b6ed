"""``kvplan report``'s page: one self-contained HTML file (no script, font, style or image fetched; a
Content-Security-Policy that forbids any), readable from a file on a machine with no network.

Every number shown that ``-f json`` also gives carries its JSON pointer (``data-json``) and its raw value
(``data-value``) into the JSON embedded at the end of the page (``<script type="application/json">``, data
only: never run), so a reader or a test can check that the page says what the JSON says. The charts are the
ones ``--plot`` writes (render/charts.py), inlined as SVG.
"""

from __future__ import annotations

import html
import io
import json
from typing import Any

from kvplan.units import format_bytes

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
STYLE = """
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #1a1a1a; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 32px 0 8px; border-bottom: 1px solid #ddd; }
.sub { color: #555; margin: 0 0 16px; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #d4d4d4; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #f2f2f2; } td.l, th.l { text-align: left; }
h3 { font-size: 15px; margin: 16px 0 4px; }
figure { margin: 12px 0; } figure svg { width: 100%; max-width: 900px; height: auto; display: block; }
ol.cmds { padding-left: 24px; } ol.cmds li { margin: 4px 0; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 13px; }
pre { background: #f6f6f6; padding: 8px 10px; white-space: pre-wrap; word-break: break-all; }
ul.notes { font-size: 13px; padding-left: 20px; } ul.notes li { margin: 2px 0; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _num(value: Any, pointer: str, shown: str | None = None) -> str:
    """A number the JSON also has: shown formatted, its pointer and raw value kept on the element."""
    text = shown if shown is not None else (f"{value:,}" if isinstance(value, int) else str(value))
    return f'<span data-json="{_e(pointer)}" data-value="{_e(json.dumps(value))}">{_e(text)}</span>'


def _svg(chart: Any) -> str:
    from kvplan.render import charts

    buf = io.StringIO()
    charts.save_to(chart, buf, "svg")
    text = buf.getvalue()
    return text[text.index("<svg"):]  # inline: no XML declaration or doctype inside the page


def render(report: Any) -> str:
    """The page for a ``kvplan.report.ReportData``."""
    from kvplan.render import charts

    doc = report.to_dict()
    first = report.estimates[0]
    model = doc["estimates"][0]["model"]
    parts = [f"<h1>Serving {_e(model['id'])}</h1>",
             f'<p class="sub">{_e(report.fit.concurrency)} concurrent sequences of {report.fit.context:,} tokens · '
             f"kvplan {_e(first.kvplan_version)}</p>",
             "<h2>Model</h2>", _model_table(model),
             "<h2>KV cache per layer group</h2>", _formulas(doc),
             "<h2>KV cache against context</h2>",
             f"<figure>{_svg(charts.estimate_chart(report.estimates, report.gpu))}</figure>"]
    if report.plans:
        parts += ["<h2>Which GPUs, how many</h2>", _fit_table(doc),
                  f"<figure>{_svg(charts.fit_chart(report.fit))}</figure>",
                  "<h2>Each GPU as the engine divides it</h2>", _budget_table(doc),
                  f"<figure>{_svg(charts.budget_chart(report.plans, report.fit.concurrency))}</figure>"]
    if doc["fit"]["refused"]:
        parts += ["<h2>GPU types that cannot hold it</h2>", "<ul class=notes>" + "".join(
            f"<li>{_e(r['gpu'])}, {_e(r['engine'])}, {_e(r['kv_dtype'])}: {_e(r['reason'])}</li>"
            for r in doc["fit"]["refused"]) + "</ul>"]
    notes = list(dict.fromkeys([*doc["fit"]["assumptions"], *(a for e in doc["estimates"] for a in e["assumptions"]),
                                *(a for p in doc["plans"] for a in p["assumptions"])]))
    parts += ["<h2>Assumptions and the source of each rule</h2>",
              "<ul class=notes>" + "".join(f"<li>{_e(n)}</li>" for n in notes) + "</ul>",
              "<h2>Made with</h2>", f"<pre>{_e(report.command or 'kvplan report')}</pre>"]
    data = json.dumps(doc, separators=(",", ":")).replace("</", "<\\/")
    return ("<!doctype html>\n<html lang=en><head><meta charset=utf-8>"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            f"<title>kvplan report: {_e(model['id'])}</title><style>{STYLE}</style></head>"
            f"<body><main>{''.join(parts)}</main>"
            f'<script type="application/json" id="kvplan-json">{data}</script></body></html>\n')


def _model_table(model: dict[str, Any]) -> str:
    rows = [("model type", _e(model["model_type"])),
            ("layers", _num(model["num_layers"], "/estimates/0/model/num_layers")),
            ("layer kinds", _e(", ".join(f"{k} {v}" for k, v in model["layer_kinds"].items()))),
            ("parameters", _num(model["params"], "/estimates/0/model/params") if model["params"] else "unknown"),
            ("weights", _num(model["weights_bytes"], "/estimates/0/model/weights_bytes",
                             format_bytes(model["weights_bytes"])) if model["weights_bytes"] else "unknown"),
            ("dtype", _e(model["dtype"])),
            ("max position embeddings", _num(model["max_position_embeddings"],
                                             "/estimates/0/model/max_position_embeddings")
             if model["max_position_embeddings"] else "unknown")]
    return "<div class=scroll><table>" + "".join(f"<tr><th class=l>{k}</th><td class=l>{v}</td></tr>"
                                                 for k, v in rows) + "</table></div>"


def _formulas(doc: dict[str, Any]) -> str:
    out = []
    for i, est in enumerate(doc["estimates"]):
        head = ("<tr><th class=l>engine</th><th class=l>KV dtype</th><th class=l>layers</th><th>count</th>"
                "<th class=l>kind</th><th>bytes per token</th><th class=l>tokens held</th></tr>")
        body = "".join(
            f"<tr><td class=l>{_e(est['engine'])} {_e(est['engine_version'])}</td><td class=l>{_e(f['kv_dtype'])}</td>"
            f"<td class=l>{_e(f['layers'])}</td><td>{_num(f['count'], f'/estimates/{i}/formulas/{j}/count')}</td>"
            f"<td class=l>{_e(f['kind'])}</td>"
            f"<td>{_num(f['bytes_per_token'], f'/estimates/{i}/formulas/{j}/bytes_per_token')}</td>"
            f"<td class=l><code>{_e(f['tokens_held_formula'])}</code></td></tr>"
            for j, f in enumerate(est.get("formulas", [])))
        out.append(f"<div class=scroll><table>{head}{body}</table></div>")
    return "".join(out)


def _fit_table(doc: dict[str, Any]) -> str:
    fit = doc["fit"]
    priced = fit["currency"] is not None
    head = ("<tr><th class=l>GPU</th><th class=l>engine</th><th class=l>KV dtype</th><th>GPUs</th><th>tp</th>"
            "<th>pp</th><th>dp</th><th>KV tokens / replica</th><th>max conc.</th>"
            "<th>KV left / GPU</th><th>step ≥</th><th>TTFT ≥</th>"
            + (f"<th>{_e(fit['currency'])}/hour</th>" if priced else "") + "</tr>")
    rows = []
    for i, r in enumerate(fit["rows"]):
        p = f"/fit/rows/{i}"
        step = r["decode_step_seconds_min"]
        ttft = r["ttft_seconds_min"]
        rows.append(
            f"<tr><td class=l>{_e(r['gpu'])}</td><td class=l>{_e(r['engine'])}</td><td class=l>{_e(r['kv_dtype'])}</td>"
            f"<td>{_num(r['gpus'], p + '/gpus')}</td><td>{_num(r['parallel']['tp'], p + '/parallel/tp')}</td>"
            f"<td>{_num(r['parallel']['pp'], p + '/parallel/pp')}</td>"
            f"<td>{_num(r['parallel']['dp'], p + '/parallel/dp')}</td>"
            f"<td>{_num(r['kv_cache_tokens'], p + '/kv_cache_tokens')}</td>"
            f"<td>{_num(r['max_concurrency'], p + '/max_concurrency')}</td>"
            f"<td>{_num(r['kv_left_bytes'], p + '/kv_left_bytes', format_bytes(r['kv_left_bytes']))}</td>"
            f"<td>{_num(step, p + '/decode_step_seconds_min', f'{step * 1000:.1f} ms') if step else '—'}</td>"
            f"<td>{_num(ttft, p + '/ttft_seconds_min', f'{ttft:.2f} s') if ttft else '—'}</td>"
            + (f"<td>{_num(r['usd_per_hour'], p + '/usd_per_hour', _money(r['usd_per_hour']))}</td>" if priced else "")
            + "</tr>")
    commands = "".join(f"<li>{_e(r['gpu'])}, {_e(r['engine'])}, {_e(r['kv_dtype'])}:"
                       f"<pre>{_e(r['command'] or 'kvplan writes no launch command for this engine')}</pre></li>"
                       for r in fit["rows"])
    return (f"<div class=scroll><table>{head}{''.join(rows)}</table></div>"
            "<p class=sub>step ≥: the decode step can be no faster (weights and KV read once at peak bandwidth); "
            "TTFT ≥: the first token can come no sooner (the prompt's FLOPs at the dense bf16 peak). Bounds, not "
            "measurements.</p>"
            f"<h3>Launch commands (one per row, in the same order)</h3><ol class=cmds>{commands}</ol>")


def _budget_table(doc: dict[str, Any]) -> str:
    names = ("weights", "activation", "non_torch", "cudagraph", "kv_cache")
    head = ("<tr><th class=l>GPU</th><th class=l>engine</th><th>total</th>"
            + "".join(f"<th>{n.replace('_', '-')}</th>" for n in names) + "<th>KV tokens</th></tr>")
    rows = []
    for i, p in enumerate(doc["plans"]):
        per = p["per_gpu"]
        cells = "".join(
            f"<td>{_num(per[f'{n}_bytes'], f'/plans/{i}/per_gpu/{n}_bytes', format_bytes(per[f'{n}_bytes']))}</td>"
            for n in names)
        total = p["gpu"]["total_bytes"]
        rows.append(f"<tr><td class=l>{_e(p['gpu']['name'])}</td>"
                    f"<td class=l>{_e(p['engine'])} {_e(p['engine_version'])}</td>"
                    f"<td>{_num(total, f'/plans/{i}/gpu/total_bytes', format_bytes(total))}</td>"
                    f"{cells}<td>{_num(p['kv_cache_tokens'], f'/plans/{i}/kv_cache_tokens')}</td></tr>")
    return f"<div class=scroll><table>{head}{''.join(rows)}</table></div>"


def _money(value: float | None) -> str:
    return "—" if value is None else f"{value:,.2f}"
