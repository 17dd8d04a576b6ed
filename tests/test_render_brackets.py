"""Data printed through rich is printed as it is: a note's "[q x k]" or a path's "[1]" is text, not a markup tag.

The second GPU run's report showed "no  scores" where the JSON said "no [q x k] scores": rich had read the
bracketed words as a tag and dropped them.
"""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace

from conftest import run_cli
from rich.console import Console

from kvplan.render.verify_out import print_activation

LOG = Path(__file__).parent / "data" / "logs" / "vllm-0.26.0-runner-v2-16g.log"


def _printed(fn, *args) -> str:
    out = io.StringIO()
    fn(Console(file=out, width=200, color_system=None), *args)
    return out.getvalue()


def test_an_activation_note_keeps_its_brackets():
    a = SimpleNamespace(transformers_version="5.17.0", batch=1, tokens=4096, device="cuda:0", dtype="bfloat16",
                        attn_implementation="sdpa", skipped="too big [weights 30 GiB]", weights_bytes=1,
                        notes=("activation: SDPA runs a flash or memory-efficient kernel (no [q x k] scores)",
                               "[bold]not bold[/bold]"))
    text = _printed(print_activation, a)
    assert "(no [q x k] scores)" in text
    assert "too big [weights 30 GiB]" in text
    assert "[bold]not bold[/bold]" in text


def test_a_log_reports_a_calibration_path_with_brackets(tmp_path):
    target = tmp_path / "cal[prod].yaml"  # rich would read "[prod]" as a style tag
    code, out, err = run_cli(["log", str(LOG), "--save", str(target)])
    assert code == 0, err
    assert target.exists()
    assert "cal[prod].yaml" in out
