"""Hostile inputs to ``kvplan check``, LMCache's settings and the engines' JSON-valued flags (issue 23).

Each item of the issue's "LMCache and JSON flags" and "check" lists is reproduced here: absurd sizes, booleans
read as counts, huge integers and deep nesting in ``--kv-transfer-config`` / ``--speculative-config`` /
LMCache's ``extra_config``, echoed values, ``num_speculative_tokens``, NUL bytes, globs over symlink loops,
one deployment's failure ending the whole report, and the per-file overhead of a large run. A bounded fuzz of
generated deployments closes the file. Every test asserts kvplan's behaviour (exit status, one line, the field
or flag kvplan names), never a dependency's wording; nothing is timed (an alarm turns a hang into a failure).
"""

from __future__ import annotations

import contextlib
import json
import resource
import tempfile
from pathlib import Path

import pytest
from conftest import hang_guard, run_cli
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

LLAMA8 = "meta-llama/Llama-3.1-8B"
LMCACHE = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
TOKEN = "hf_hostileCHECKtokenThatMustNeverBePrinted"
DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "7" * 5000
MAX_MESSAGE = 1003  # kvplan.deploy.report.MAX_MESSAGE and its "..."


def bounded(seconds: int = 30) -> contextlib.AbstractContextManager[None]:
    """Turns a hang into a failure (no timing: a fixed input either ends or does not)."""
    return hang_guard(seconds)


def run(*argv: str) -> tuple[int, str, str]:
    code, out, err = run_cli(argv)
    assert "Traceback" not in out + err, (out + err)[-3000:]
    assert TOKEN not in out + err
    return code, out, err


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    return err


def check_json(*paths: str | Path) -> tuple[int, dict]:
    """``kvplan check PATHS --format json``: the exit status and the report."""
    code, out, err = run("check", *map(str, paths), "--format", "json")
    report = json.loads(out)
    assert report["exit_code"] == code and err == ""
    for finding in report["findings"]:  # every finding is one bounded line
        assert "\n" not in finding["message"] and len(finding["message"]) <= MAX_MESSAGE, finding["message"][:200]
    return code, report


def script(tmp_path: Path, name: str, command: str, gpu: str = "H100") -> Path:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n# kvplan/gpu: {gpu}\n{command}\n")
    return path


def good(tmp_path: Path) -> Path:
    return script(tmp_path, "good.sh", f"vllm serve {LLAMA8} --max-model-len 8192")


def invalid_of(report: dict, name: str) -> dict:
    """The one invalid finding of deployment (or file) ``name``; the other deployments were still checked."""
    found = [f for f in report["findings"] if f["invalid_input"] and name in (f["deployment"] or f["file"])]
    assert len(found) == 1, report["findings"]
    return found[0]


def good_passed(report: dict) -> None:
    statuses = {d["name"]: d["status"] for d in report["deployments"]}
    assert statuses.get("good") == "pass", statuses


@pytest.fixture(autouse=True)
def token_in_environment(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)


# ------------------------------------------------------------------------------------------ LMCache sizes

SIZE_CASES = {
    "env-cpu": f"LMCACHE_MAX_LOCAL_CPU_SIZE=1e308 vllm serve {LLAMA8} --max-model-len 8192 --kv-transfer-config "
               f"'{LMCACHE}'",
    "env-disk": f"LMCACHE_LOCAL_DISK=/nvme LMCACHE_MAX_LOCAL_DISK_SIZE=1e308 vllm serve {LLAMA8} --max-model-len "
                f"8192 --kv-transfer-config '{LMCACHE}'",
    "json-cpu": f"vllm serve {LLAMA8} --max-model-len 8192 --kv-transfer-config "
                '\'{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":{"lmcache.max_local_cpu_size":1e308}}\'',
    "json-disk": f"vllm serve {LLAMA8} --max-model-len 8192 --kv-transfer-config "
                 '\'{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":{"lmcache.local_disk":"/nvme",'
                 '"lmcache.max_local_disk_size":1e308}}\'',
    "json-inf": f"vllm serve {LLAMA8} --max-model-len 8192 --kv-transfer-config "
                '\'{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":{"lmcache.max_local_cpu_size":Infinity}}\'',
    "extra-first-rank": f"LMCACHE_EXTRA_CONFIG='{{\"first_rank_max_local_cpu_size\": 1e308}}' vllm serve {LLAMA8} "
                        f"--max-model-len 8192 --kv-transfer-config '{LMCACHE}'",
}


@pytest.mark.parametrize("case", sorted(SIZE_CASES))
def test_lmcache_sizes_of_1e308_are_the_deployments_invalid_input(tmp_path, case):
    bad = script(tmp_path, "bad.sh", SIZE_CASES[case])
    code, report = check_json(bad, good(tmp_path))
    assert code == 2
    finding = invalid_of(report, "bad")
    assert "size" in finding["message"] and "1,048,576" in finding["message"]
    good_passed(report)  # the report goes on: the other deployment is checked


@pytest.mark.parametrize("text, named", [
    ("max_local_cpu_size: 1e308\n", "max_local_cpu_size"),
    ("max_local_cpu_size: 1.0e+308\n", "max_local_cpu_size"),
    ("local_disk: /nvme\nmax_local_disk_size: .inf\n", "max_local_disk_size"),
    ("chunk_size: true\n", "chunk_size"),
    ("chunk_size: 1.5\n", "chunk_size"),
    ("chunk_size: 0\n", "chunk_size"),
    ("max_local_cpu_size: true\n", "max_local_cpu_size"),
    (f"chunk_size: {HUGE}\n", "--lmcache-config"),
    (f"extra_config: '{DEEP[:100_000]}'\n", "extra_config"),
    (f"extra_config: '{{\"first_rank_max_local_cpu_size\": {HUGE}}}'\n", "extra_config"),
    ("extra_config: {first_rank_max_local_cpu_size: 1e308}\n", "first_rank_max_local_cpu_size"),
    ("extra_config: " + "[" * 100_000 + "\n", "--lmcache-config"),
])
def test_lmcache_config_file_values_are_one_line_errors(tmp_path, text, named):
    config = tmp_path / "lmcache.yaml"
    config.write_text(text)
    code, _, err = run("max-batch", LLAMA8, "--gpu", "H100", "--lmcache-config", str(config))
    assert named in one_line(code, err)


def test_chunk_size_true_is_not_a_chunk_of_one(tmp_path):
    bad = script(tmp_path, "bad.sh", f"vllm serve {LLAMA8} --max-model-len 8192 --kv-transfer-config "
                 '\'{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":{"lmcache.chunk_size":true}}\'')
    code, report = check_json(bad)
    assert code == 2 and "chunk_size true" in invalid_of(report, "bad")["message"]
    from kvplan.engines.vllm.lmcache import settings as lmcache_settings
    from kvplan.errors import UsageError

    with pytest.raises(UsageError, match="chunk_size"):
        lmcache_settings({"chunk_size": True})
    assert lmcache_settings({"chunk_size": 512.0}).chunk_size == 512  # a whole float is a whole number


def test_a_50000_character_lmcache_value_is_cut_in_the_finding(tmp_path):
    long = "x" * 50_000
    bad = script(tmp_path, "bad.sh", f"LMCACHE_CHUNK_SIZE={long} vllm serve {LLAMA8} --max-model-len 8192 "
                 f"--kv-transfer-config '{LMCACHE}'")
    code, report = check_json(bad)
    message = invalid_of(report, "bad")["message"]
    assert code == 2 and "LMCACHE_CHUNK_SIZE" in message and "x" * 40 + "'..." in message
    assert "x" * 41 not in message and len(message) < 400


# ------------------------------------------------------------------------------ JSON flags: size and depth

def _json_case(flag: str, payload: str) -> str:
    if flag == "LMCACHE_EXTRA_CONFIG":
        return f"LMCACHE_EXTRA_CONFIG='{payload}' vllm serve {LLAMA8} --max-model-len 8192 --kv-transfer-config '{LMCACHE}'"
    return f"vllm serve {LLAMA8} --max-model-len 8192 {flag} '{payload}'"


@pytest.mark.parametrize("flag", ["--kv-transfer-config", "--speculative-config", "LMCACHE_EXTRA_CONFIG"])
@pytest.mark.parametrize("payload", ["deep", "huge-int", "huge-nested-int", "not-json", "array"])
def test_json_flags_are_parsed_with_bounds_and_fail_one_deployment(tmp_path, flag, payload):
    text = {"deep": DEEP, "huge-int": HUGE, "huge-nested-int": f'{{"kv_connector_extra_config": {{"a": {HUGE}}}}}',
            "not-json": "{nope", "array": "[1, 2]"}[payload]
    bad = script(tmp_path, "bad.sh", _json_case(flag, text))
    code, report = check_json(bad, good(tmp_path))
    assert code == 2
    message = invalid_of(report, "bad")["message"]
    assert ("extra_config" if flag == "LMCACHE_EXTRA_CONFIG" else flag) in message
    assert len(message) < 300  # the payload is cut, not echoed
    good_passed(report)


def test_json_object_is_bounded_on_its_own():
    from kvplan.engines.serve import json_object
    from kvplan.errors import UsageError

    for text in (DEEP, HUGE, "{" * 10 + "1", '{"a": ' + HUGE + "}"):
        with bounded(), pytest.raises(UsageError) as info:
            json_object(text, "--kv-transfer-config", "kv_transfer_config")
        assert info.value.field == "kv_transfer_config" and len(str(info.value)) < 300


# -------------------------------------------------------------------------------- num_speculative_tokens

@pytest.mark.parametrize("value", ["1e308", "1.5", "true", "-5", "0", '"three"', "null", "[3]", HUGE[:4000]])
def test_num_speculative_tokens_must_be_a_positive_integer(tmp_path, value):
    bad = script(tmp_path, "bad.sh", f"vllm serve {LLAMA8} --max-model-len 8192 --speculative-config "
                 f'\'{{"method": "ngram", "num_speculative_tokens": {value}}}\'')
    code, report = check_json(bad)
    if value == "null":  # no count: kvplan's planner names what is missing, still invalid input
        assert code in (1, 2)
        return
    assert code == 2, report["findings"]  # invalid input, not a deployment that does not fit (1)
    assert "num_speculative_tokens" in invalid_of(report, "bad")["message"]


@pytest.mark.parametrize("value", ["-5", "0", "9" * 400])
def test_num_speculative_tokens_flag_below_one_is_invalid_input(tmp_path, value):
    bad = script(tmp_path, "bad.sh", f"vllm serve {LLAMA8} --max-model-len 8192 --speculative-model ngram "
                 f"--num-speculative-tokens {value}")
    code, report = check_json(bad)
    assert code == 2 and "--num-speculative-tokens" in invalid_of(report, "bad")["message"]


def test_num_speculative_tokens_three_still_plans(tmp_path):
    ok = script(tmp_path, "good.sh", f"vllm serve {LLAMA8} --max-model-len 8192 --speculative-config "
                '\'{"method": "ngram", "num_speculative_tokens": "3"}\'')
    code, report = check_json(ok)
    assert code == 0, report["findings"]


@pytest.mark.parametrize("config, option", [
    ("speculative_config: {decoding_type: NGram, max_draft_len: true}\n", "max_draft_len"),
    ("speculative_config: {decoding_type: NGram, max_draft_len: -5}\n", "max_draft_len"),
    ("speculative_config: {decoding_type: NGram, max_draft_len: 1.5}\n", "max_draft_len"),
    ("speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 0}\n", "num_nextn_predict_layers"),
    (f"kv_cache_config: {{host_cache_size: {'9' * 4000}}}\n", "host_cache_size"),
    ("kv_cache_config: {host_cache_size: 1.0e+308}\n", "host_cache_size"),
    ("kv_cache_config: {max_tokens: true}\n", "max_tokens"),
    (f"max_seq_len: {'9' * 4000}\n", "max_seq_len"),
    ("max_batch_size: true\n", "max_batch_size"),
    ("backend: [1, 2]\n", "backend"),
    ("kv_cache_config: " + "[" * 100_000 + "\n", "extra.yaml"),
])
def test_trtllm_extra_options_yaml_values_are_invalid_input(tmp_path, config, option):
    (tmp_path / "extra.yaml").write_text(config)
    bad = script(tmp_path, "bad.sh", f"trtllm-serve {LLAMA8} --extra_llm_api_options extra.yaml")
    code, report = check_json(bad, good(tmp_path))
    assert code == 2 and option in invalid_of(report, "bad")["message"]
    good_passed(report)


@pytest.mark.parametrize("flags, named", [
    ("--speculative-algorithm EAGLE --speculative-num-steps -5", "--speculative-num-steps"),
    ("--speculative-algorithm NGRAM --speculative-num-draft-tokens 0", "--speculative-num-draft-tokens"),
    (f"--enable-hierarchical-cache --hicache-size {'9' * 4000}", "--hicache-size"),
    (f"--speculative-algorithm {'X' * 50_000}", "--speculative-algorithm"),
])
def test_sglang_counts_below_one_or_absurd_are_invalid_input(tmp_path, flags, named):
    bad = script(tmp_path, "bad.sh", f"python -m sglang.launch_server --model-path {LLAMA8} {flags}")
    code, report = check_json(bad)
    message = invalid_of(report, "bad")["message"]
    assert code == 2 and named in message and len(message) < 300


@pytest.mark.parametrize("flags, named", [
    (f"--max-model-len {'9' * 400}k", "--max-model-len"),  # 400 digits and a 'k': int(inf) raised OverflowError
    (f"--tensor-parallel-size {'9' * 4000}", "--tensor-parallel-size"),
    ("--tensor-parallel-size 0", "--tensor-parallel-size"),
    ("--max-num-seqs -1", "--max-num-seqs"),
    ("--kv-transfer-config '{\"kv_connector\": \"LMCacheConnectorV1\", \"kv_connector_extra_config\": "
     "{\"lmcache.chunk_size\": 99999999999}}'", "chunk_size"),
    ("--speculative-config '{\"model\": [1, 2], \"num_speculative_tokens\": 3}'", "model"),
    (f"--speculative-config '{{\"method\": \"{'z' * 50_000}\", \"num_speculative_tokens\": 3}}'", "method"),
])
def test_vllm_flag_values_are_invalid_input_in_one_line(tmp_path, flags, named):
    bad = script(tmp_path, "bad.sh", f"vllm serve {LLAMA8} {flags}")
    code, report = check_json(bad)
    message = invalid_of(report, "bad")["message"]
    assert code == 2 and named in message and len(message) < 300


def test_lmcache_settings_that_are_lists_do_not_break_the_plan_cache(tmp_path):
    # a setting kvplan does not read, given as a JSON list, was an unhashable value in a plan's cache key
    ok = script(tmp_path, "good.sh", f"vllm serve {LLAMA8} --max-model-len 8192 --kv-transfer-config "
                '\'{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":{"lmcache.remote_url":[1,2]}}\'')
    code, report = check_json(ok)
    assert code == 0, report["findings"]


# ----------------------------------------------------------------------------------------- files and globs

def test_nul_bytes_in_a_script_are_not_text(tmp_path):
    bad = tmp_path / "serve.sh"
    bad.write_bytes(f"#!/bin/sh\n# kvplan/gpu: H100\nvllm serve {LLAMA8} --max-model-len 8192 --port 8000\x00\n"
                    .encode())
    code, report = check_json(bad, good(tmp_path))
    finding = invalid_of(report, "serve.sh")
    assert code == 2 and "not a text file" in finding["message"] and finding["line"] == 3
    good_passed(report)


def _loops(tmp_path: Path) -> Path:
    root = tmp_path / "d"
    root.mkdir()
    script(root, "serve.sh", f"vllm serve {LLAMA8} --max-model-len 8192")
    for name, target in (("l1", "."), ("l2", "."), ("up", "..")):
        (root / name).symlink_to(target)
    return root


@pytest.mark.parametrize("pattern", ["*/" * 14 + "*.sh", "**/*.sh", "*/**/*/**/*.sh", "**/" * 6 + "*.sh"])
def test_a_glob_over_symlink_loops_checks_each_file_once(tmp_path, pattern):
    root = _loops(tmp_path)
    code, report = check_json(f"{root}/{pattern}")
    assert code == 0 and report["summary"]["files"] == 1 and report["summary"]["deployments"] == 1


def test_a_directory_and_links_to_one_file_are_checked_once(tmp_path):
    root = _loops(tmp_path)
    (tmp_path / "again.sh").symlink_to(root / "serve.sh")
    code, report = check_json(root, tmp_path / "again.sh", root / "serve.sh", f"{root}/*.sh")
    assert code == 0 and report["summary"]["files"] == 1


def test_a_walk_past_its_bound_is_refused_by_name(tmp_path, monkeypatch):
    import kvplan.deploy as deploy

    monkeypatch.setattr(deploy, "MAX_GLOB_ENTRIES", 10)
    for i in range(20):
        script(tmp_path, f"s{i}.sh", f"vllm serve {LLAMA8}")
    code, report = check_json(f"{tmp_path}/*.sh")
    assert code == 2
    finding = report["findings"][0]
    assert finding["code"] == "no-files" and "10" in finding["message"]


def test_globs_still_match_as_glob_does(tmp_path):
    from kvplan.deploy import expand_paths

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    for rel in ("x.yaml", "a/y.yaml", "a/b/z.yaml", ".hidden/h.yaml", "a/.dot.yaml", "a/b/w.sh"):
        (tmp_path / rel).write_text("x: 1\n")
    files, _ = expand_paths([f"{tmp_path}/**/*.yaml"])
    assert sorted(Path(f).relative_to(tmp_path).as_posix() for f in files) == ["a/b/z.yaml", "a/y.yaml", "x.yaml"]
    files, _ = expand_paths([f"{tmp_path}/*/*.yaml"])
    assert [Path(f).relative_to(tmp_path).as_posix() for f in files] == ["a/y.yaml"]
    files, _ = expand_paths([f"{tmp_path}/.hidden/*.yaml", str(tmp_path / "a")])
    assert sorted(Path(f).relative_to(tmp_path).as_posix() for f in files) == [
        ".hidden/h.yaml", "a/.dot.yaml", "a/b/w.sh", "a/b/z.yaml", "a/y.yaml"]


# --------------------------------------------------------------------------- one failure, the whole report

def test_an_exception_in_one_deployment_is_that_deployments_finding(tmp_path, monkeypatch):
    import kvplan.deploy.checks as checks

    real = checks.check_deployment

    def boom(dep, ctx):
        if dep.name == "bad":
            raise OverflowError("cannot convert float infinity to integer\nsecond line")
        return real(dep, ctx)

    monkeypatch.setattr(checks, "check_deployment", boom)
    bad = script(tmp_path, "bad.sh", f"vllm serve {LLAMA8} --max-model-len 8192")
    code, report = check_json(bad, good(tmp_path))
    finding = invalid_of(report, "bad")
    assert code == 2 and "OverflowError" in finding["message"] and "please report it" in finding["message"]
    good_passed(report)


def test_an_exception_outside_a_deployment_is_that_files_finding(tmp_path, monkeypatch):
    import kvplan.deploy as deploy

    real = deploy.check_file

    def boom(path, ctx, **kw):
        if path.endswith("bad.sh"):
            raise RecursionError("maximum recursion depth exceeded")
        return real(path, ctx, **kw)

    monkeypatch.setattr(deploy, "check_file", boom)
    code, report = check_json(script(tmp_path, "bad.sh", "true"), good(tmp_path))
    assert code == 2 and "RecursionError" in invalid_of(report, "bad.sh")["message"]
    good_passed(report)


def test_a_finding_is_one_bounded_line_whatever_its_message():
    from kvplan.deploy.report import MAX_MESSAGE, Finding

    finding = Finding("error", "invalid-input", "a\nb" + "x" * 5000, "f", value="y" * 5000)
    assert "\n" not in finding.message and len(finding.message) == MAX_MESSAGE + 3
    assert len(finding.value) == MAX_MESSAGE + 3


# ------------------------------------------------------------------------------------ per-file overhead

def test_a_run_looks_each_gpu_label_up_once(tmp_path, monkeypatch):
    # 20,000 files took 26 s: each one looked its GPU up in the whole catalog (find_gpu normalizes every name)
    # and asked every engine for its serve flags through importlib. Measured by hand with a bench (see the
    # report); here, only that the lookups are not per file.
    import kvplan.deploy.gpus as gpus
    import kvplan.engines as engines

    calls = {"gpu": 0, "engines": 0}
    real_gpu, real_all = gpus.gpu_for_label, engines.all_engines

    def counted_gpu(*a, **kw):
        calls["gpu"] += 1
        return real_gpu(*a, **kw)

    def counted_all(*a, **kw):
        calls["engines"] += 1
        return real_all(*a, **kw)

    monkeypatch.setattr(gpus, "gpu_for_label", counted_gpu)
    monkeypatch.setattr(engines, "all_engines", counted_all)
    for i in range(30):
        script(tmp_path, f"s{i}.sh", f"vllm serve {LLAMA8} --max-model-len {8192 + 1024 * (i % 3)}")
    code, report = check_json(tmp_path)
    assert code == 0 and report["summary"]["deployments"] == 30
    assert calls["gpu"] == 1 and calls["engines"] <= 1


def test_plain_command_lines_split_as_shlex_splits_them():
    from conftest import shlex_words

    from kvplan.deploy.flags import _split_words

    for text in ("vllm serve m --x 1", "  a\tb  c ", "", "X=$Y a", "a(b) c<d >e", "a~b ./c", "a\x0bb", "a\u00a0b",
                 "a 'b c'", 'a "b" # c', "a;b", "a && b", "a\\ b"):
        assert _split_words(text) == shlex_words(text), text


# ------------------------------------------------------------------------------ linear on megabyte lines

MB = 1 << 20


@pytest.mark.parametrize("text", [
    "# kvplan/gpu: NVIDIA" + " " * MB + "x\nvllm serve " + LLAMA8 + "\n",  # the label's suffix regex
    "# kvplan/gpu: " + "9" * MB + "\nvllm serve " + LLAMA8 + "\n",  # the label's memory size regex
    "# kvplan/gpu: H100" + " " * MB + "x\nvllm serve " + LLAMA8 + "\n",  # the comment's value
    "M=${a:-" * (MB // 6) + "\nvllm serve $M\n",  # ${VAR:-default} without its '}'
])
def test_megabyte_lines_end(tmp_path, text):
    path = tmp_path / "serve.sh"
    path.write_text("#!/bin/sh\n" + text)
    code, report = check_json(path)
    assert code in (0, 1, 2)


def test_kvplan_file_booleans_are_not_numbers(tmp_path):
    path = tmp_path / "kvplan.yaml"
    path.write_text(f"version: 1\ndeployments:\n  - name: a\n    model: {LLAMA8}\n    gpu: {{type: H100, count: true}}\n"
                    "    engine: {name: vllm, tp: true, gpu_memory_utilization: true, max_model_len: true}\n"
                    "    requirements: {min_concurrency: true}\n")
    code, report = check_json(path)
    named = " ".join(f["message"] for f in report["findings"] if f["invalid_input"])
    assert code == 2
    for field in ("gpu.count", "engine.tp", "engine.gpu_memory_utilization", "engine.max_model_len",
                  "requirements.min_concurrency"):
        assert field in named, named


# ------------------------------------------------------------------------------------------------- fuzz

WORK = Path(tempfile.mkdtemp(prefix="kvplan-hostile-check-"))
MEMORY_BUDGET_KB = 512 * 1024

NUMBERS = st.sampled_from(["0", "-5", "1", "3", "8", "1.5", "1e308", "-1e308", "NaN", "Infinity", "true", "false",
                           "null", '"3"', '"x"', "7" * 40, "7" * 4299, "7" * 5000, "[]", "{}", "[3]", '"' + "x" * 300 + '"'])
LMCACHE_KEYS = st.sampled_from(["chunk_size", "max_local_cpu_size", "max_local_disk_size", "local_cpu", "local_disk",
                                "save_unfull_chunk", "remote_url", "extra_config", "enable_blending"])
ENV_VALUES = st.one_of(st.sampled_from(["0", "1", "256", "5", "-1", "1e308", "inf", "nan", "true", "x" * 5000,
                                        "'512'", '"7"', "/nvme", "file:///a,file:///b", "{}", DEEP[:1000],
                                        '{"save_only_first_rank": 1e308}', '{"first_rank_max_local_cpu_size": -1}']),
                       st.text(alphabet="0123456789.e-+x", max_size=12))


def _json(draw: st.DrawFn, depth: int = 0) -> str:
    """A JSON text made of the flags' own keys and hostile values."""
    kind = draw(st.sampled_from(["object", "object", "number", "deep", "garbage"] if depth == 0 else
                                ["number", "number", "object"] if depth < 3 else ["number"]))
    if kind == "number":
        return draw(NUMBERS)
    if kind == "deep":
        n = draw(st.sampled_from([10, 127, 129, 5000]))
        return "[" * n + "]" * n
    if kind == "garbage":
        return draw(st.sampled_from(["{", "", "nope", "{'a': 1}", '{"a": 1,}', "[1, 2]"]))
    keys = draw(st.lists(st.sampled_from(["kv_connector", "kv_role", "kv_connector_extra_config", "method",
                                          "num_speculative_tokens", "model", "draft_tensor_parallel_size",
                                          "lmcache.chunk_size", "lmcache.max_local_cpu_size", "lmcache.local_disk",
                                          "lmcache.max_local_disk_size", "lmcache.extra"]), max_size=4, unique=True))
    items = []
    for key in keys:
        if key == "kv_connector":
            value = draw(st.sampled_from(['"LMCacheConnectorV1"', '"LMCacheMPConnector"', '"Other"', "1", "null"]))
        elif key == "method":
            value = draw(st.sampled_from(['"ngram"', '"eagle"', '"deepseek_mtp"', '"medusa"', "1", '"' + "m" * 100 + '"']))
        elif key == "model":
            value = draw(st.sampled_from(['"ngram"', '"' + LLAMA8 + '"', "[1]", "null"]))
        else:
            value = _json(draw, depth + 1)
        items.append(f'"{key}": {value}')
    return "{" + ", ".join(items) + "}"


@st.composite
def deployments(draw: st.DrawFn) -> tuple[str, dict[str, str]]:
    """A shell script (and the files beside it) running vLLM, SGLang or TensorRT-LLM with hostile values."""
    engine = draw(st.sampled_from(["vllm", "vllm", "sglang", "trtllm"]))
    files: dict[str, str] = {}
    env = " ".join(f"LMCACHE_{draw(LMCACHE_KEYS).upper()}='{draw(ENV_VALUES)}'"
                   for _ in range(draw(st.integers(0, 3))))
    if engine == "vllm":
        flags = [f"--max-model-len {draw(st.sampled_from(['8192', '32k', '0', '-1', 'auto', '9' * 400 + 'k']))}"]
        for flag in draw(st.lists(st.sampled_from(["--kv-transfer-config", "--speculative-config"]), max_size=2,
                                  unique=True)):
            flags.append(f"{flag} '{_json(draw)}'")
        if draw(st.booleans()):
            flags.append(f"--kv-offloading-backend lmcache --kv-offloading-size {draw(NUMBERS)}")
        if draw(st.booleans()):
            flags.append(f"--num-speculative-tokens {draw(NUMBERS)} --speculative-model ngram")
        command = f"{env} vllm serve {LLAMA8} {' '.join(flags)}"
    elif engine == "sglang":
        flags = [f"{flag} {draw(NUMBERS)}" for flag in draw(st.lists(st.sampled_from([
            "--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens", "--hicache-size",
            "--hicache-ratio", "--cpu-offload-gb", "--context-length"]), max_size=3, unique=True))]
        algorithm = draw(st.sampled_from(["", "--speculative-algorithm EAGLE", "--speculative-algorithm NGRAM"]))
        command = (f"python -m sglang.launch_server --model-path {LLAMA8} --enable-hierarchical-cache {algorithm} "
                   + " ".join(flags))
    else:
        keys = draw(st.lists(st.sampled_from(["max_seq_len", "max_batch_size", "tensor_parallel_size", "backend",
                                              "kv_cache_config", "speculative_config"]), max_size=3, unique=True))
        lines = []
        for key in keys:
            if key == "kv_cache_config":
                value = (f"{{host_cache_size: {draw(NUMBERS)}, max_tokens: {draw(NUMBERS)}, "
                         f"free_gpu_memory_fraction: {draw(NUMBERS)}}}")
            elif key == "speculative_config":
                value = (f"{{decoding_type: {draw(st.sampled_from(['NGram', 'MTP', 'Eagle3', 'x']))}, "
                         f"max_draft_len: {draw(NUMBERS)}, num_nextn_predict_layers: {draw(NUMBERS)}}}")
            else:
                value = draw(NUMBERS)
            lines.append(f"{key}: {value}")
        files["extra.yaml"] = "\n".join(lines) + "\n"
        command = f"trtllm-serve {LLAMA8} --extra_llm_api_options extra.yaml"
    return command, files


@pytest.fixture(scope="module", autouse=True)
def _clean_work():
    yield
    import shutil

    shutil.rmtree(WORK, ignore_errors=True)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=deployments())
def test_generated_deployments_exit_0_1_2_in_one_piece(case):
    command, files = case
    folder = Path(tempfile.mkdtemp(dir=WORK))
    for name, text in files.items():
        (folder / name).write_text(text)
    path = script(folder, "serve.sh", command)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    code, report = check_json(path)  # no traceback, token never printed, findings one bounded line each
    event(f"exit {code}")
    assert code in (0, 1, 2)
    code, out, err = run("check", str(path))  # the table too
    assert code in (0, 1, 2) and err == ""
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < MEMORY_BUDGET_KB


@st.composite
def lmcache_configs(draw: st.DrawFn) -> str:
    """An LMCache YAML config file (``--lmcache-config``) of LMCache's names and hostile values."""
    yaml_values = st.sampled_from(["0", "-5", "256", "1.5", "1e308", "1.0e+308", ".inf", ".nan", "true", "null",
                                   "'512'", "[1, 2]", "{a: 1}", "7" * 4299, "7" * 5000, "x" * 300, "/nvme",
                                   "'" + DEEP[:300] + "'", "'{\"save_only_first_rank\": true}'",
                                   "'{\"first_rank_max_local_cpu_size\": 1e308}'", "{1: a, b: 2}", "[" * 200])
    keys = draw(st.lists(LMCACHE_KEYS, min_size=1, max_size=4, unique=True))
    return "".join(f"{key}: {draw(yaml_values)}\n" for key in keys)


@settings(max_examples=25, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(text=lmcache_configs(), backend=st.booleans())
def test_generated_lmcache_configs_exit_0_1_2_in_one_piece(text, backend):
    folder = Path(tempfile.mkdtemp(dir=WORK))
    config = folder / "lmcache.yaml"
    config.write_text(text)
    extra = ["--kv-offloading-backend", "lmcache", "--kv-offloading-size", "8"] if backend else []
    code, out, err = run("max-batch", LLAMA8, "--gpu", "H100", "--lmcache-config", str(config), *extra)
    event(f"exit {code}")
    assert code in (0, 1, 2)
    if code == 2:
        one_line(code, err)
        assert len(err) < 600, err[:200]
