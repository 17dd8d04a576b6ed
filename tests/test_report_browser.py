"""``kvplan report``'s page as a person sees it: rendered by headless Chromium (Debian's ``chromium``; the
test skips with the reason where it is missing, CI installs it) at 1280 and 800 px: the charts are drawn,
nothing is fetched, nothing overflows the page, and every number shown equals the JSON's."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kvplan.fit import fit
from kvplan.plan import max_batch
from kvplan.render.html_report import CSP, render
from kvplan.report import build

pytest.importorskip("matplotlib")
CHROMIUM = os.environ.get("KVPLAN_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = dict(context=8192, concurrency=32, gpus=["H100", "L4", "A100-40GB"], engines=("vllm", "sglang"))

# Run in the page by the test only (the report itself has no script to run: its CSP forbids any).
PROBE = """<script>
(function () {
  const out = {resources: performance.getEntriesByType('resource').map(e => e.name),
               width: window.innerWidth, page_width: document.documentElement.scrollWidth,
               scrolls: [...document.querySelectorAll('.scroll')].map(d => [d.scrollWidth, d.clientWidth]),
               charts: [...document.querySelectorAll('figure svg')].map(s => {
                 const r = s.getBoundingClientRect();
                 return [r.width, r.height, s.querySelectorAll('path').length]; }),
               numbers: [...document.querySelectorAll('[data-json]')].map(
                 e => [e.dataset.json, e.dataset.value, e.textContent])};
  document.body.setAttribute('data-probe', JSON.stringify(out));
})();
</script>"""


@pytest.fixture(scope="module")
def report():
    return build("meta-llama/Llama-3.1-8B", command="kvplan report meta-llama/Llama-3.1-8B ...", **ARGS)


@pytest.fixture(scope="module")
def page(report) -> str:
    return render(report)


def test_the_page_fetches_nothing(page: str) -> None:
    assert f'content="{CSP}"' in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page, re.I)
    assert "<link" not in page and not re.search(r"<script(?![^>]*application/json)", page)


def test_the_embedded_json_is_what_the_library_returns(report, page: str) -> None:
    doc = json.loads(html.unescape(re.search(r'id="kvplan-json">(.*?)</script>', page, re.S).group(1)
                                   .replace("<\\/", "</")))
    again = fit("meta-llama/Llama-3.1-8B", **ARGS)
    assert doc["fit"]["rows"] == json.loads(json.dumps(again.to_dict()["rows"]))
    first = again.rows[0]
    plan = max_batch("meta-llama/Llama-3.1-8B", gpu=first.gpu, engine=first.engine, tp=first.tp, pp=first.pp,
                     dp=first.dp, max_model_len=8192, batch=-(-32 // first.dp))
    assert doc["plans"][0]["kv_cache_tokens"] == plan.kv_cache_tokens
    assert doc["plans"][0]["per_gpu"] == json.loads(json.dumps(plan.to_dict()["per_gpu"]))


def test_the_budget_figure_shows_concurrency_against_context(report, page: str) -> None:
    """The max-batch chart's second panel, with the workload's concurrency and context marked."""
    figure = page.split("Each GPU as the engine divides it")[1]
    assert "Concurrent sequences against context" in figure
    assert "concurrency asked: 32" in figure and "context asked: 8k" in figure


class _Probe(HTMLParser):
    found: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "body":
            self.found = dict(attrs).get("data-probe")


def _render(page: str, width: int, tmp_path: Path) -> dict:
    probe = page.replace(f'<meta http-equiv="Content-Security-Policy" content="{CSP}">', "")
    probe = probe.replace("</body>", PROBE + "</body>")
    path = tmp_path / f"report-{width}.html"
    path.write_text(probe)
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--window-size={width},1000", "--dump-dom", path.as_uri()],
                          capture_output=True, text=True, timeout=120)
    parser = _Probe()
    parser.feed(done.stdout)
    assert parser.found, done.stderr[-2000:]
    return json.loads(parser.found)


def _pointer(doc: object, pointer: str) -> object:
    for part in pointer.strip("/").split("/"):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]  # type: ignore[index]
    return doc


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install chromium)")
@pytest.mark.parametrize("width", [1280, 800])
def test_chromium_renders_it(page: str, width: int, tmp_path: Path) -> None:
    seen = _render(page, width, tmp_path)
    assert seen["resources"] == []  # nothing fetched
    assert seen["page_width"] <= seen["width"], "the page overflows sideways"
    if width >= 1280:
        assert all(sw <= cw + 1 for sw, cw in seen["scrolls"]), seen["scrolls"]  # every table fits
    assert len(seen["charts"]) == 3
    for w, h, paths in seen["charts"]:
        assert w > 300 and h > 150 and paths >= 10  # drawn, at a readable size
    doc = json.loads(html.unescape(re.search(r'id="kvplan-json">(.*?)</script>', page, re.S).group(1)
                                   .replace("<\\/", "</")))
    assert len(seen["numbers"]) > 50
    for pointer, value, text in seen["numbers"]:
        assert json.loads(value) == _pointer(doc, pointer), pointer
        assert text.strip(), pointer
