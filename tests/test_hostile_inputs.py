"""Hostile and broken input files (issue 15, items 1-4, 6, 8): one line, exit 2, bounded time and memory.

Each case runs ``kvplan.cli.main`` in-process; a few run the real entry point in a subprocess where
the failure mode was a crash of the interpreter (libyaml's composer on deep nesting).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kvplan.cli import main
from kvplan.errors import ConfigError
from kvplan.safe_io import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    load_yaml,
    load_yaml_all,
    parse_json,
    read_text,
)
from conftest import REPO

EXAMPLES = REPO / "examples"
SPEC = REPO / "model_specs" / "Qwen__Qwen3-8B.yaml"
CONFIG = REPO / "tests" / "data" / "hf_configs" / "Qwen__Qwen3-0.6B.json"

# The classic "billion laughs": 9 levels of 10 aliases each expand to 10^9 nodes from 700 bytes.
BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 10))
HUGE_INT = "1" * 5000


def run(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


def spec_text(**layer0: str) -> str:
    """Qwen3-8B's bundled spec with fields of its first layer group replaced."""
    lines = SPEC.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("- {kind"))
    group = lines[at]
    for key, value in layer0.items():
        import re

        group = re.sub(rf"\b{key}: [^,}}]+", f"{key}: {value}", group)
    lines[at] = group
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# 1. Alias bombs, on every YAML path


def test_alias_bomb_is_refused_by_the_shared_loader():
    with pytest.raises(ConfigError, match="aliases expand to more than"):
        load_yaml(BOMB, "bomb.yaml")
    with pytest.raises(ConfigError, match="aliases expand to more than"):
        load_yaml_all(BOMB, "bomb.yaml", construct=lambda node, loader: None)
    # a few aliases, as compose files use them, still load and expand
    ok = load_yaml("base: &b {image: vllm, env: [A, B]}\nx: *b\ny: {<<: *b, image: sglang}\n", "ok.yaml")
    assert ok["x"] == {"image": "vllm", "env": ["A", "B"]} and ok["y"]["image"] == "sglang"


def test_recursive_alias_is_refused():
    with pytest.raises(ConfigError, match="refers to the node that holds it"):
        load_yaml("a: &a [1, *a]\n", "self.yaml")


def test_alias_bomb_in_check_is_reported_for_that_file_and_the_others_still_checked(tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    code, out, err = run("check", str(bomb), str(EXAMPLES / "pass" / "compose.yaml"), "-f", "json", capsys=capsys)
    assert code == 2, err
    report = json.loads(out)
    by_file = {f["path"]: f for f in report["files"]}
    assert "aliases expand" in json.dumps(by_file[str(bomb)])
    assert by_file[str(EXAMPLES / "pass" / "compose.yaml")]["deployments"]


@pytest.mark.parametrize("flag", ["spec", "catalog", "specs-dir"])
def test_alias_bomb_elsewhere(flag, tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB)
    if flag == "spec":
        argv = ["estimate", str(bomb)]
    elif flag == "catalog":
        argv = ["max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpu-catalog", str(bomb)]
    else:
        argv = ["check", str(EXAMPLES / "pass" / "compose.yaml"), "--specs", str(tmp_path)]
    err = one_line(*run(*argv, capsys=capsys)[::2])
    assert "aliases expand to more than" in err and str(bomb) in err


# ------------------------------------------------------------------------------------------------
# 2. Integers Python will not convert; 3. bytes that are not UTF-8; 4. deep nesting


def test_huge_integer_in_config_json(tmp_path, capsys):
    config = json.loads(CONFIG.read_text())
    text = json.dumps(config).replace('"vocab_size": 151936', f'"vocab_size": {HUGE_INT}')
    path = tmp_path / "config.json"
    path.write_text(text)
    err = one_line(*run("estimate", str(path), capsys=capsys)[::2])
    assert "more than 4,300 digits" in err and f"{path}:1:" in err


def test_huge_integer_in_yaml_spec_catalog_and_specs_dir(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(kv_heads=HUGE_INT))
    err = one_line(*run("estimate", str(spec), capsys=capsys)[::2])
    assert "more than 4,300 digits" in err and "line" in err
    catalog = tmp_path / "gpus.yaml"
    catalog.write_text(f"gpus:\n  - {{name: X, vendor: nvidia, memory_bytes: {HUGE_INT}}}\n")
    err = one_line(*run("max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpu-catalog", str(catalog), capsys=capsys)[::2])
    assert "more than 4,300 digits" in err
    # in check, a bad --specs file stops the run with exit 2 (a usage error), never exit 1
    code, _, err = run("check", str(EXAMPLES / "pass" / "compose.yaml"), "--specs", str(tmp_path), capsys=capsys)
    assert code == 2 and "digits" in err and "Traceback" not in err


def test_huge_integer_in_a_deployment_is_reported_for_that_file(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"version: 1\ndeployments:\n  - name: x\n    model: Qwen/Qwen3-8B\n    gpu: H100\n"
                   f"    engine: {{max_model_len: {HUGE_INT}}}\n")
    code, out, err = run("check", str(bad), str(EXAMPLES / "pass" / "compose.yaml"), "-f", "json", capsys=capsys)
    assert code == 2 and "Traceback" not in err
    text = json.dumps(json.loads(out))
    assert "more than 4,300 digits" in text and "line 6" in text


def test_not_utf8(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(b"id: caf\xe9\n" + SPEC.read_bytes())
    err = one_line(*run("estimate", str(spec), capsys=capsys)[::2])
    assert "not UTF-8 text" in err and "byte 7" in err
    code, _, err = run("check", str(EXAMPLES / "pass" / "compose.yaml"), "--specs", str(tmp_path), capsys=capsys)
    assert code == 2 and "not UTF-8" in err and err.count("\n") == 1
    config = tmp_path / "config.json"
    config.write_bytes(b'{"a": "\xff"}')
    assert "not UTF-8" in one_line(*run("estimate", str(config), capsys=capsys)[::2])


def test_deep_json(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    err = one_line(*run("estimate", str(path), capsys=capsys)[::2])
    assert f"nested more than {MAX_DEPTH} levels" in err
    # deep but within CPython's own recursion limit: refused by kvplan's depth cap all the same
    with pytest.raises(ConfigError, match="nested more than"):
        parse_json('{"a": ' * 500 + "1" + "}" * 500, "x.json")
    assert parse_json('{"a": ' * 20 + "1" + "}" * 20, "x.json")


@pytest.mark.parametrize("text", ["[" * 200_000, "- " * 200_000 + "x", "{a: " * 100_000 + "1" + "}" * 100_000])
def test_deep_yaml_does_not_crash_the_interpreter(text, tmp_path):
    # libyaml's composer recurses in C: 200,000 nested '[' used to end the process with SIGSEGV
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for argv in (["estimate", str(path)], ["check", str(path)]):
        done = subprocess.run([sys.executable, "-m", "kvplan", *argv], capture_output=True, text=True, env=env,
                              cwd=REPO, timeout=60, check=False)
        # kvplan's behaviour, not the YAML library's wording: PyYAML >= 6.0.4 may refuse the nesting itself
        # (its own message) before kvplan's depth guard; either way one line naming the file, exit 2
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stdout + done.stderr
        said = [line for line in (done.stdout + done.stderr).splitlines() if str(path) in line]
        assert said, done.stdout + done.stderr
        if argv[0] == "estimate":
            assert done.stderr.startswith("kvplan: error: ") and done.stderr.count("\n") == 1, done.stderr


# ------------------------------------------------------------------------------------------------
# 6. Things that are not regular files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_named_pipe_is_refused_without_blocking(tmp_path, capsys):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    assert "a named pipe: kvplan reads only regular files" in one_line(*run("estimate", str(fifo), capsys=capsys)[::2])
    fifo_yaml = tmp_path / "deploy.yaml"
    os.mkfifo(fifo_yaml)
    code, out, err = run("check", str(fifo_yaml), "-f", "json", capsys=capsys)
    assert code == 2 and "named pipe" in out


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused(device, capsys):
    if not os.path.exists(device):
        pytest.skip(f"no {device}")
    assert "a character device" in one_line(*run("estimate", device, capsys=capsys)[::2])
    code, out, _ = run("check", device, "-f", "json", capsys=capsys)
    assert code == 2 and "character device" in out


def test_size_limit_is_named(tmp_path):
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    with pytest.raises(ConfigError, match=r"more than the 16 MiB kvplan reads from one file"):
        read_text(big)
    with pytest.raises(ConfigError, match="a directory"):
        read_text(tmp_path)


# ------------------------------------------------------------------------------------------------
# 8. Booleans are not numbers


@pytest.mark.parametrize("field", ["count", "kv_heads", "head_dim"])
def test_boolean_is_not_a_number_in_a_spec(field, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(**{field: "true"}))
    err = one_line(*run("estimate", str(spec), capsys=capsys)[::2])
    assert f"layers.0.{field}: true is a boolean, not a number" in err


def test_strings_are_not_numbers_and_the_bundled_specs_still_validate(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(kv_heads='"8"'))
    assert "layers.0.kv_heads" in one_line(*run("estimate", str(spec), capsys=capsys)[::2])
    spec.write_text(spec_text())
    code, _, err = run("estimate", str(spec), "-c", "1k", capsys=capsys)
    assert code == 0, err


def test_alias_count_cap_is_what_the_docstring_says():
    # MAX_ALIAS_NODES is the budget: one alias to a block just under it passes, twice over it fails
    size = MAX_ALIAS_NODES // 2 - 1
    block = "[" + ", ".join(["0"] * size) + "]"
    assert len(load_yaml(f"a: &a {block}\nb: *a\n", "ok.yaml")["b"]) == size
    with pytest.raises(ConfigError, match="aliases expand"):
        load_yaml(f"a: &a {block}\nb: *a\nc: *a\nd: *a\n", "no.yaml")


def test_a_user_catalog_is_read_again_when_it_changes(tmp_path):
    from kvplan.hardware import load_catalog

    def entry(gib: int) -> str:
        return ("gpus:\n  - {name: Lab-GPU, vendor: nvidia, memory_gib: %d, hbm_bandwidth_bytes_per_s: 1000000000000,"
                " bf16_dense_tflops: 100, memory_source: test, spec_source: test}\n" % gib)

    catalog = tmp_path / "gpus.yaml"
    catalog.write_text(entry(40))
    first = {g.name: g.memory_bytes for g in load_catalog(catalog)}
    catalog.write_text(entry(48))
    os.utime(catalog, ns=(1, 1))  # a different mtime even on coarse clocks
    second = {g.name: g.memory_bytes for g in load_catalog(catalog)}
    assert first["Lab-GPU"] == 40 << 30 and second["Lab-GPU"] == 48 << 30


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symlinks")
def test_symlink_loops_in_a_glob_end(tmp_path):
    from kvplan.deploy import expand_paths

    tree = tmp_path / "deploy" / "a"
    tree.mkdir(parents=True)
    (tree / "app.yaml").write_text((EXAMPLES / "pass" / "compose.yaml").read_text())
    (tree / ".hidden.yaml").write_text("x: 1\n")
    for name in ("up", "up2", "up3"):  # three links to the parent: glob.glob's search was 3^40 directories
        os.symlink("..", tree / name)
    files, problems = expand_paths([str(tmp_path / "deploy" / "**" / "*.yaml")])
    assert files == [str(tree / "app.yaml")] and problems == []  # as glob.glob: '*' skips dot files
    files, problems = expand_paths([str(tmp_path / "deploy")])  # a directory: every YAML file, links not followed
    assert files == [str(tree / ".hidden.yaml"), str(tree / "app.yaml")] and problems == []


def test_yaml_values_that_are_not_json_in_a_spec(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.read_text().replace("model_type: qwen3", "model_type: 2024-01-01"))
    err = one_line(*run("estimate", str(spec), capsys=capsys)[::2])
    assert "datetime.date(2024, 1, 1) (date) is not a value a model spec holds" in err
    spec.write_text(SPEC.read_text().replace("model_type: qwen3", "model_type: 2024-13-45"))  # no such date
    assert "a value cannot be read" in one_line(*run("estimate", str(spec), capsys=capsys)[::2])


def test_a_huge_value_is_echoed_clipped_in_the_one_error_line(capsys):
    # issue 23: a value is named in the error, not copied whole (a 1 MB argument is not a 1 MB line)
    huge = "9" * 1_000_000
    err = one_line(*run("max-batch", "meta-llama/Llama-3.1-8B", "--gpu-memory", huge, capsys=capsys)[::2])
    assert err.startswith("kvplan: error: --gpu-memory: ") and len(err) < 400 and "characters)" in err
    err = one_line(*run("estimate", "meta-llama/Llama-3.1-8B", "--context", "x" * 100_000, capsys=capsys)[::2])
    assert err.startswith("kvplan: error: --context") and len(err) < 400
