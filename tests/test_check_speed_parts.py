"""The shortcuts ``kvplan check`` takes over many files give what the long ways give: PyYAML's patterns compiled on
first use, the remembered tag resolution, the line-recording constructor's plain scalars, the JSON report's writer,
a spec's remembered hash, the remembered releases and engine options, a deployment's status in one pass."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kvplan.deploy.report import DeploymentResult, Finding
from kvplan.deploy.yaml_lines import load_all
from kvplan.errors import UsageError
from kvplan.jsontext import dumps_indented
from kvplan.safe_io import _DeferredPattern, load_yaml_all, yaml_loader_class

REPO = Path(__file__).resolve().parent.parent

SCALARS = ["1", "-0x1f", "0o17", "1_000", "1.5", "-.inf", ".nan", "1e3", "true", "No", "off", "~", "null", "",
           "2024-01-02", "2024-01-02 10:11:12", "8k", "0.9.2", "v0.10.2", "'quoted 1'", '"2"', "!!str 5", "!!int '7'",
           "!!float 3", "H100-80GB", "0", "00", "+1", "1:30", "x y", "yes", "Y"]


def test_yaml_imported_with_deferred_patterns_reads_the_same() -> None:
    # a fresh interpreter: here yaml may have been imported already (yaml_module then returns it as it is)
    code = ("import sys\nfrom kvplan.safe_io import yaml_module\ny = yaml_module()\n"
            "import yaml.reader, yaml.constructor\n"
            "assert type(yaml.reader.Reader.NON_PRINTABLE).__name__ == '_DeferredPattern'\n"
            "assert type(yaml.constructor.SafeConstructor.timestamp_regexp).__name__ == '_DeferredPattern'\n"
            "import re\nassert re.compile('a') .__class__ is re.Pattern  # re itself left as it was\n"
            "text = sys.stdin.read()\n"
            "print(repr(y.load(text, Loader=y.SafeLoader)))\n"  # the pure-Python reader (NON_PRINTABLE) and resolver
            "print(repr(y.load(text, Loader=y.CSafeLoader)))\n"
            "try:\n    y.load('a: \\x07', Loader=y.SafeLoader)\nexcept y.YAMLError as e:\n    print(type(e).__name__)\n")
    text = "\n".join(f"k{i}: {s}" for i, s in enumerate(SCALARS)) + "\n"
    done = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True, cwd=REPO,
                          check=False)
    assert done.returncode == 0, done.stderr
    pure, c_loader, error = done.stdout.splitlines()
    expected = yaml.load(text, Loader=yaml.SafeLoader)
    assert pure == c_loader == repr(expected)
    assert error == "ReaderError"


def test_deferred_pattern_is_the_compiled_pattern() -> None:
    import re

    lazy = _DeferredPattern(re.compile, r"(\d+)-(\d+)", 0)
    assert lazy.match("12-34").groups() == ("12", "34")
    assert lazy.search("x 5-6").group(0) == "5-6"
    assert lazy.pattern == r"(\d+)-(\d+)"
    assert lazy.sub("n", "1-2 3-4") == "n n"
    import copy

    assert copy.deepcopy(_DeferredPattern(re.compile, "a+", 0)).match("aa").group(0) == "aa"


def test_remembered_resolution_is_the_loaders() -> None:
    text = "\n".join(f"- {s}" for s in SCALARS * 2) + "\n"  # every scalar twice: the second from the memo
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    assert yaml.load(text, Loader=yaml_loader_class()) == yaml.load(text, Loader=base)
    assert issubclass(yaml_loader_class(), base)


@pytest.mark.parametrize("text", [
    "\n".join(f"k{i}: {s}" for i, s in enumerate(SCALARS)) + "\n",
    "a: &x {b: 1, c: [2, 3]}\nd:\n  <<: *x\n  e: *x\n",
    "1: int key\n1.5: float\ntrue: bool\n~: null key\n",
    "- !!binary aGVsbG8=\n- 2024-02-03\n- 2024-02-30x\n- !!str 2024-02-03\n",
    "--- 1\n--- [a, b]\n--- {c: d}\n",
    "block: |\n  line one\n  line two\nfolded: >\n  x\n  y\n",
])
def test_line_recording_reader_reads_as_pyyaml(text: str) -> None:
    got = [data for data, _ in load_all(text, "t.yaml")]
    plain = [data for data, _ in load_yaml_all(text, "t.yaml")]
    assert got == plain == [d for d in yaml.safe_load_all(text)]


@pytest.mark.parametrize("text", [
    "a: &x {b: 1, c: [2, 3]}\nd:\n  <<: *x\n  e: *x\n  f: |\n    block\n",
    "k:\n  - one\n  - |\n    two\n  - >\n    three\n  - {x: 1}\n  - [y]\n? [p, q]\n: complex key\n",
    "base: &b {a: 1}\nm:\n  <<: [*b, {z: 2}]\n  =: value key\n  n: 3\n",
])
def test_line_recording_reader_lines_are_the_nodes(text: str) -> None:
    """Each value's line is where its node starts (a block scalar's: its first content line), merge keys flattened
    as PyYAML flattens them: the reader's short ways for scalars and plain mappings keep the lines it recorded."""
    def expected(node: yaml.Node) -> int:
        return node.start_mark.line + 1 + (node.id == "scalar" and node.style in ("|", ">"))

    def check(data: object, node: yaml.Node, loader: yaml.SafeLoader) -> None:
        if node.id == "mapping":
            loader.flatten_mapping(node)
            assert data.line == node.start_mark.line + 1  # type: ignore[attr-defined]
            for key_node, value_node in node.value:
                key = loader.construct_object(key_node, deep=True)
                key = key if isinstance(key, (str, int, float, bool, type(None))) else str(key)
                assert data.lines[key] == expected(value_node)  # type: ignore[attr-defined]
                check(data[key], value_node, loader)  # type: ignore[index]
        elif node.id == "sequence":
            assert data.lines == [expected(item) for item in node.value]  # type: ignore[attr-defined]
            for item, value in zip(node.value, data):  # type: ignore[call-overload]
                check(value, item, loader)

    loader = yaml.SafeLoader(text)
    nodes = [loader.get_node() for _ in iter(loader.check_node, False)]
    docs = [data for data, _ in load_all(text, "t.yaml")]
    assert len(docs) == len(nodes)
    for data, node in zip(docs, nodes):
        check(data, node, loader)


def test_line_recording_reader_refuses_what_pyyaml_refuses() -> None:
    for text in ("a: !!seq x\n", "a: !!map x\n", "a: !unknown x\n", "a: !!int x\n"):
        with pytest.raises(Exception) as ours:
            load_all(text, "t.yaml")
        with pytest.raises(Exception) as theirs:
            load_yaml_all(text, "t.yaml")
        assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


def _random_doc(rng: random.Random, depth: int = 0) -> object:
    leaves = [None, True, False, 0, -7, 2**70, 1.5, -0.0, 1e300, float("nan"), float("inf"), float("-inf"), "",
              "plain", 'quote " and \\ back', "tab\tnew\nline", "ünïcode ✓", "\x00\x1f", "\ud83d\ude00"]
    if depth > 4 or rng.random() < 0.4:
        return rng.choice(leaves)
    if rng.random() < 0.5:
        items = [_random_doc(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        return tuple(items) if rng.random() < 0.2 else items
    keys = ["a", "b é", "", 3, 2.5, True, False, None, -1]
    return {rng.choice(keys): _random_doc(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def test_report_writer_is_json_dumps_indent2() -> None:
    rng = random.Random(26)
    for _ in range(2000):
        doc = _random_doc(rng)
        assert dumps_indented(doc) == json.dumps(doc, indent=2)


def test_report_writer_leaves_other_types_to_json(tmp_path: Path) -> None:
    with pytest.raises(TypeError):  # json's own refusal, not a half-written document
        dumps_indented({"a": [tmp_path]})
    assert dumps_indented({3: [1.5]}) == json.dumps({3: [1.5]}, indent=2)  # a key json converts: json writes it


def test_report_writer_on_real_reports() -> None:
    from kvplan.deploy import check
    from kvplan.render.check_out import as_json

    report = check([str(REPO / "examples" / d) for d in ("pass", "fail", "invalid")], specs=REPO / "examples/specs")
    doc = report.to_dict()
    assert as_json(report) == json.dumps(doc, indent=2) + "\n"
    assert not any(isinstance(v, float) and math.isnan(v) for v in doc.values())


def test_spec_hash_is_the_dataclass_hash() -> None:
    from kvplan.record import field_names, replace
    from kvplan.sources.resolve import load_model

    for model in ("meta-llama/Llama-3.1-8B", "google/gemma-3-27b-it", "deepseek-ai/DeepSeek-V2-Lite"):
        spec = load_model(model)
        fields = tuple(getattr(spec, name) for name in field_names(spec))
        assert hash(spec) == hash(fields) == hash(spec)
        copy = replace(spec, id=spec.id)
        assert copy == spec and hash(copy) == hash(spec)
        other = replace(spec, id=spec.id + "-other")
        assert hash(other) == hash(tuple(getattr(other, name) for name in field_names(other)))


def test_remembered_release_and_its_refusals() -> None:
    from kvplan.engines.version import parse_version

    assert parse_version("v0.10.2") == parse_version("v0.10.2") == (0, 10, 2)
    for bad in ("", "0.0", "x", "1.2.3.4"):
        for _ in range(2):
            with pytest.raises(UsageError):
                parse_version(bad)


def test_engine_options_refused_every_time() -> None:
    from kvplan.engines import get_engine
    from kvplan.engines.protocol import check_options, make_engine_options

    vllm = get_engine("vllm")
    fine = make_engine_options(block_size=16, tp=2)
    check_options(vllm, fine)
    check_options(vllm, fine)
    odd = make_engine_options(kv_cache="quantized")
    for _ in range(2):
        with pytest.raises(UsageError):
            check_options(vllm, odd)


def test_status_in_one_pass() -> None:
    def slow(findings: list[Finding]) -> str:
        if any(f.invalid_input for f in findings):
            return "invalid"
        if any(f.severity == "error" for f in findings):
            return "fail"
        if any(f.severity == "warning" for f in findings):
            return "warn"
        return "pass"

    rng = random.Random(3)
    kinds = [("note", False), ("warning", False), ("error", False), ("error", True), ("warning", True)]
    for _ in range(500):
        findings = [Finding(s, "code", "m", "f", 1, invalid_input=i)
                    for s, i in (rng.choice(kinds) for _ in range(rng.randint(0, 5)))]
        result = DeploymentResult(name="d", file="f", line=1, source="kvplan", findings=findings)
        assert result.status == slow(findings)


def test_compose_command_without_quotes_splits_as_shlex() -> None:
    import shlex

    from kvplan.deploy.compose import _tokens

    rng = random.Random(7)
    chars = ["a", "-", "=", "#", " ", "\t", "\r", "\n", "\x0b", "\x0c", "\xa0", "\u2003", "\x85", "$", "(", ";", "|"]
    for _ in range(20000):
        text = "".join(rng.choice(chars) for _ in range(rng.randint(0, 16)))
        assert [t.text for t in _tokens(text, 3, None)] == shlex.split(text)
    assert [t.text for t in _tokens("--a 'b c' \"d\" e\\ f", 3, None)] == ["--a", "b c", "d", "e f"]


def test_check_imports_only_the_readers_its_files_need() -> None:
    # examples/pass holds kvplan, Kubernetes, compose, Helm (production stack) and shell files: no llm-d, SkyPilot,
    # Ray Serve, KServe, Dynamo or AIBrix reader is imported to tell them apart, and yaml's reader pattern stays
    # uncompiled (the C loader never reads it)
    code = ("import sys, io, contextlib\nfrom kvplan.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['check', 'examples/pass', '--specs', 'examples/specs', '-f', 'json'])\n"
            "import yaml.reader\n"
            "print(type(yaml.reader.Reader.__dict__['NON_PRINTABLE']).__name__)\n"
            "print(__import__('json').dumps(sorted(m for m in sys.modules if m.startswith('kvplan.deploy.'))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert done.returncode == 0, done.stderr
    pattern, modules = done.stdout.splitlines()
    assert pattern == "_DeferredPattern"
    loaded = json.loads(modules)
    for reader in ("llmd", "skypilot", "ray_serve", "kserve", "dynamo", "aibrix"):
        assert f"kvplan.deploy.{reader}" not in loaded
    assert {"kvplan.deploy.k8s", "kvplan.deploy.compose", "kvplan.deploy.helm", "kvplan.deploy.shell"} <= set(loaded)


def test_detection_is_the_readers() -> None:
    from kvplan.deploy import detect, llmd, ray_serve, skypilot

    assert llmd.looks_like is detect.llmd and skypilot.looks_like is detect.skypilot
    assert ray_serve.looks_like is detect.ray_serve


def test_check_in_a_program_leaves_the_collector_as_it_was() -> None:
    """``main`` run inside a program: the collector's thresholds and frozen set are as before (check slows it only
    while it runs; the heap is frozen only at the interpreter's exit), and garbage is collected as before."""
    probe = ("import gc, io, sys\n"
             "from kvplan.cli import main\n"
             "before = gc.get_threshold(), gc.get_freeze_count()\n"
             "out, sys.stdout = sys.stdout, io.StringIO()\n"
             "code = main(['check', 'examples/pass', '--specs', 'examples/specs', '-f', 'json'])\n"
             "sys.stdout = out\n"
             "cycle = []\n"
             "cycle.append(cycle)\n"
             "del cycle\n"
             "print(code, before == (gc.get_threshold(), gc.get_freeze_count()), gc.collect() >= 1)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, timeout=120,
                          check=True)
    assert done.stdout.split() == ["0", "True", "True"]
