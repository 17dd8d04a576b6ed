"""The command line as a user meets it: output formats, help, and one-line errors with exit 2."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from kvplan.cli import main
from conftest import run_cli

LLAMA = "meta-llama/Llama-3.1-8B"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_readme_main_job(capsys):
    code, out, err = run(capsys, "estimate", LLAMA, "--context", "8k,32k,128k", "--batch", "1,8,32",
                         "--kv-dtype", "bf16,fp8")
    assert code == 0, err
    assert "4,294,967,296" in out  # batch 1, 32k, bf16: 4 GiB
    assert "549,755,813,888" in out  # batch 32, 128k, bf16: 512 GiB
    assert "GiB" in out and " GB" not in out


def test_json_schema_is_stable(capsys):
    code, out, _ = run(capsys, "estimate", LLAMA, "-c", "4k", "-b", "2", "-f", "json", "--by-layer", "--explain")
    data = json.loads(out)
    assert code == 0
    assert {"kvplan_version", "engine", "model", "rows", "assumptions"} <= set(data)
    assert {"id", "source", "model_type", "num_layers", "layer_kinds", "params", "weights_bytes"} <= set(data["model"])
    row = data["rows"][0]
    assert {"batch", "context", "kv_dtype", "kv_bytes", "bytes_per_token", "layers"} <= set(row)
    assert row["kv_bytes"] == 2 * 4096 * 131072 and isinstance(row["kv_bytes"], int)
    assert len(row["layers"]) == 32 and data["formulas"]


def test_csv_and_markdown(capsys):
    code, out, _ = run(capsys, "estimate", LLAMA, "-c", "1k..4k", "-f", "csv")
    lines = out.strip().splitlines()
    assert code == 0 and lines[0].startswith("model,engine,batch,context") and len(lines) == 4
    code, out, _ = run(capsys, "estimate", "google/gemma-3-27b-it", "-c", "32k", "-f", "markdown", "--by-layer",
                       "--explain")
    assert code == 0 and "| batch |" in out and "**Per layer" in out and "**Assumptions**" in out


def test_table_with_by_layer_explain_and_plot(capsys):
    code, out, _ = run(capsys, "estimate", "openai/gpt-oss-20b", "-c", "1k..128k", "--explain", "--plot")
    assert code == 0
    assert "How each number is made" in out and "KV cache vs context" in out
    code, out, _ = run(capsys, "estimate", "openai/gpt-oss-20b", "-c", "8k", "--by-layer")
    assert code == 0 and "per layer" in out and "sliding" in out


def test_default_contexts_are_a_sweep_to_the_model_limit(capsys):
    code, out, _ = run(capsys, "estimate", "openai-community/gpt2", "-f", "json")
    data = json.loads(out)
    assert [r["context"] for r in data["rows"]] == [1024]
    assert any("choose with --context" in a for a in data["assumptions"])


@pytest.mark.parametrize("args,needle", [
    (["estimate", "no-such/model"], "not a file or a bundled model"),
    (["estimate", "llama-3.1-8"], "did you mean"),
    (["estimate", LLAMA, "--context", "12q"], "--context"),
    (["estimate", LLAMA, "--batch", "0"], "--batch"),
    (["estimate", LLAMA, "--kv-dtype", "int3"], "unknown kv dtype 'int3'"),
    (["estimate", LLAMA, "--engine", "tgi"], "unknown engine 'tgi'"),
    (["estimate", LLAMA, "--engine", "hf", "--engine-version", "5.20", "--kv-dtype", "fp8"], "5.21"),
    (["estimate", LLAMA, "--format", "xml"], "--format"),
    (["estimate", LLAMA, "--engine-version", "x.y"], "--engine-version: 'x.y' is not a version"),
    (["schema", "nothing"], "unknown schema"),
])
def test_user_mistakes_are_one_line_and_exit_2(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert needle in err and err.startswith("kvplan: error: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_bad_files_name_the_problem(capsys, tmp_path):
    broken = tmp_path / "config.json"
    broken.write_text('{"model_type": "llama", "num_hidden_layers": 32,,}')
    code, _, err = run(capsys, "estimate", str(broken))
    assert code == 2 and "config.json:1:" in err and "invalid JSON" in err
    heads = tmp_path / "heads.json"
    heads.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 4, "hidden_size": 4096,
                                 "num_attention_heads": 32, "num_key_value_heads": 5}))
    code, _, err = run(capsys, "estimate", str(heads))
    assert code == 2 and "num_key_value_heads" in err
    spec = tmp_path / "model.yaml"
    spec.write_text("id: x\nmodel_type: llama\nlayers:\n  - {kind: full, count: 0, kv_heads: 8, head_dim: 128}\n")
    code, _, err = run(capsys, "estimate", str(spec))
    assert code == 2 and "layers.0.count" in err
    spec.write_text("id: x\nlayers: [\n")
    code, _, err = run(capsys, "estimate", str(spec))
    assert code == 2 and "malformed YAML" in err and "line" in err
    spec.write_text("id: x\nmodel_type: llama\nlayers:\n  - {kind: sliding, kv_heads: 8, head_dim: 128}\n")
    code, _, err = run(capsys, "estimate", str(spec))
    assert code == 2 and "window" in err


def test_yaml_spec_and_schema_round_trip(capsys, tmp_path):
    code, out, _ = run(capsys, "schema")
    schema = json.loads(out)
    assert code == 0 and "layers" in schema["properties"] and "FullAttention" in schema["$defs"]
    # one definition per layer kind, chosen by the group's kind (the YAML's `kind: sliding`)
    assert schema["properties"]["layers"]["items"]["discriminator"]["propertyName"] == "kind"
    assert schema["$defs"]["SlidingWindow"]["required"] == ["kind", "kv_heads", "head_dim", "window"]
    spec = tmp_path / "tiny.yaml"
    spec.write_text("id: tiny\nmodel_type: llama\ndtype: float16\nlayers:\n"
                    "  - {kind: sliding, count: 2, kv_heads: 2, head_dim: 64, window: 256}\n"
                    "  - {kind: full, count: 1, kv_heads: 2, head_dim: 64}\n")
    code, out, _ = run(capsys, "estimate", str(spec), "-c", "1024", "-e", "hf", "-f", "json")
    row = json.loads(out)["rows"][0]
    assert code == 0 and row["kv_bytes"] == (2 * 255 + 1024) * 2 * 2 * 64 * 2


def test_models_lists_the_bundle(capsys):
    code, out, _ = run(capsys, "models", "--format", "json")
    models = json.loads(out)["models"]
    assert code == 0 and len(models) >= 40
    assert any(m["id"] == "deepseek-ai/DeepSeek-V3" and m["layer_kinds"] == {"mla": 61} for m in models)


def test_help_teaches():
    code, out, _ = run_cli(["estimate", "--help"])
    assert code == 0
    assert "--context" in out and "1k..128k" in out and "Examples" in out


@pytest.mark.parametrize("command", ["estimate", "max-batch", "fit", "report", "spec", "check", "verify", "log", "mcp"])
def test_help_prints_each_paragraph_whole_and_examples_indented(monkeypatch, command):
    """A paragraph of a command's help is one line on a wide terminal (not the line breaks of its source), and
    every example stands indented under "Example(s):"."""
    import inspect
    from importlib import import_module

    from kvplan.cli.commands import COMMANDS

    monkeypatch.setenv("COLUMNS", "1000")
    code, out, _ = run_cli([command, "--help"])
    assert code == 0
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # where the environment forces colour (FORCE_COLOR, CI)
    shown = [line.strip() for line in out.splitlines()]
    doc = inspect.cleandoc(import_module(f"kvplan.cli.{COMMANDS[command]}").DOC).replace("\\[", "[")
    for paragraph in doc.split("\n\n"):
        if not paragraph.startswith(" "):  # prose: its source lines joined, on one line of the help
            assert " ".join(paragraph.split("\n")) in shown, paragraph
    examples = [line.strip() for line in doc.splitlines() if line.startswith("  ")]
    assert examples
    for example in examples:
        assert any(line.strip() == example and line.startswith("   ") for line in out.splitlines()), example


def test_estimate_never_imports_torch():
    code = ("import sys; from kvplan.cli import main; "
            "rc = main(['estimate', 'meta-llama/Llama-3.1-8B', '-c', '8k', '-f', 'json']); "
            "assert rc == 0; assert 'torch' not in sys.modules, 'torch imported'; "
            "assert 'pydantic' not in sys.modules, 'pydantic imported'; "
            "assert 'huggingface_hub' not in sys.modules, 'huggingface_hub imported'")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
