"""The GPU catalog (kvplan/data/gpus.yaml), name lookup, byte sizes and ``kvplan gpus``."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import ConfigError, KvplanError, UsageError
from kvplan.hardware import GPU, find_gpu, gpu_from_memory, load_catalog, parse_bytes

GIB = 1 << 30
REQUIRED_NAMES = [
    "V100-16GB", "V100-32GB", "T4", "A10", "A10G", "L4", "L40S", "A100-SXM4-40GB", "A100-PCIe-40GB",
    "A100-SXM4-80GB", "A100-PCIe-80GB", "H100-SXM-80GB", "H100-PCIe-80GB", "H100-NVL", "H200", "H20",
    "GH200", "B200", "GB200", "RTX-3090", "RTX-4090", "RTX-5090", "RTX-A6000", "RTX-6000-Ada", "MI300X",
    "MI325X",
]


@pytest.fixture(scope="module")
def catalog() -> tuple[GPU, ...]:
    return load_catalog()


def test_catalog_loads_with_positive_numbers_and_sources(catalog):
    assert len(catalog) >= len(REQUIRED_NAMES)
    for g in catalog:
        assert g.memory_bytes > 0 and isinstance(g.memory_bytes, int), g.name
        assert g.bandwidth and g.bandwidth > 0, g.name
        assert g.tflops and g.tflops > 0, g.name
        assert g.marketing_memory_gb and g.marketing_memory_gb > 0, g.name
        assert g.sources["memory"].strip() and g.sources["spec"].strip(), g.name
        assert g.vendor in ("nvidia", "amd"), g.name
        assert g.memory_precision in ("exact", "mib", "gib"), g.name
        # torch reports less than the marketing size (even read as GiB), and more than 85% of it
        assert 0.85 * g.marketing_memory_gb * 1e9 < g.memory_bytes < g.marketing_memory_gb * GIB, g.name
        if g.estimate:
            assert "ESTIMATE" in g.sources["memory"], g.name


def test_every_required_gpu_is_there(catalog):
    for name in REQUIRED_NAMES:
        find_gpu(name, catalog)


def test_names_and_aliases_are_unambiguous(catalog):
    seen: dict[str, str] = {}
    for g in catalog:
        for n in (g.name, *g.aliases):
            key = n.lower().replace(" ", "").replace("-", "").replace("_", "")
            assert seen.setdefault(key, g.name) == g.name, f"{n} names {seen[key]} and {g.name}"


def test_h100_sxm_reports_79_18_gib_not_80(catalog):
    h100 = find_gpu("H100", catalog)
    assert h100.name == "H100-SXM-80GB"
    assert h100.memory_bytes == 85_017_755_648
    assert round(h100.memory_bytes / GIB, 2) == 79.18
    assert h100.memory_bytes < 80 * GIB
    assert h100.marketing_memory_gb == 80


@pytest.mark.parametrize("name, canonical", [
    ("NVIDIA H100 80GB HBM3", "H100-SXM-80GB"),
    ("h100 sxm 80gb", "H100-SXM-80GB"),
    ("H100_80GB", "H100-SXM-80GB"),
    ("NVIDIA H100 PCIe", "H100-PCIe-80GB"),
    ("NVIDIA H100 NVL", "H100-NVL-94GB"),
    ("NVIDIA H200", "H200-141GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"),
    ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"),
    ("Tesla T4", "T4"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ("rtx_4090", "RTX-4090"),
    ("4090", "RTX-4090"),
    ("NVIDIA GeForce RTX 3090", "RTX-3090"),
    ("NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"),
    ("NVIDIA RTX A6000", "RTX-A6000"),
    ("NVIDIA GH200 480GB", "GH200-96GB"),
    ("NVIDIA B200", "B200-180GB"),
    ("NVIDIA H20", "H20-96GB"),
    ("AMD Instinct MI300X", "MI300X"),
    ("mi325x", "MI325X"),
])
def test_aliases_and_torch_device_names_resolve(catalog, name, canonical):
    assert find_gpu(name, catalog).name == canonical


@pytest.mark.parametrize("name, expected", [
    ("A100", ["A100-SXM4-40GB", "A100-PCIe-40GB", "A100-SXM4-80GB", "A100-PCIe-80GB"]),
    ("H10", ["H100-SXM-80GB"]),
    ("MI300", ["MI300X"]),
])
def test_unknown_names_suggest_close_ones(catalog, name, expected):
    with pytest.raises(UsageError) as err:
        find_gpu(name, catalog)
    message = err.value.message
    assert message.startswith(f"unknown GPU '{name}' (did you mean ")
    assert "\n" not in message
    for e in expected:
        assert e in message


def test_unknown_name_without_neighbours_points_to_the_list(catalog):
    with pytest.raises(UsageError, match=r"unknown GPU 'zzzz' \(see `kvplan gpus`"):
        find_gpu("zzzz", catalog)


@pytest.mark.parametrize("text, expected", [
    ("69524783104", 69_524_783_104),
    ("30.5GiB", 30.5 * GIB),
    ("80GB", 80_000_000_000),
    ("512MiB", 512 << 20),
    ("47.5 GiB", int(47.5 * GIB)),
    ("1TiB", 1 << 40),
    ("2tb", 2 * 10**12),
    ("1kb", 1000),
    ("3KiB", 3072),
    ("100B", 100),
    (" 16 gib ", 16 * GIB),
    ("0.1GB", 100_000_000),
    ("1.0000000001KB", 1000),  # rounded down to whole bytes
])
def test_parse_bytes(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "-1GB", "-5", "0", "0GiB", "1e9", "nanGB", "12 parsecs",
                                  "1.5.2GB", "GB", "10G", "0.1B"])
def test_parse_bytes_rejects_garbage_in_one_line(text):
    with pytest.raises(UsageError) as err:
        parse_bytes(text)
    assert "\n" not in str(err.value) and err.value.field == "gpu_memory"


def test_gpu_from_memory():
    g = gpu_from_memory("47.5GiB")
    assert g.memory_bytes == int(47.5 * GIB)
    assert g.bandwidth is None and g.tflops is None
    assert "47.50 GiB" in g.name


USER_CATALOG = """\
version: 1
gpus:
  - name: h100 sxm 80gb              # same GPU, spelled differently: replaces the shipped entry
    aliases: [H100, my-h100]
    vendor: nvidia
    memory_bytes: 85045477376
    memory_source: our nodes, deviceQuery on driver 12.7
    hbm_bandwidth_bytes_per_s: 3.35e12
    bf16_dense_tflops: 989.4
    spec_source: NVIDIA H100 datasheet
  - name: RTX-PRO-6000-Blackwell
    aliases: ["NVIDIA RTX PRO 6000 Blackwell Server Edition"]
    vendor: nvidia
    memory_mib: 97249
    memory_source: our nodes
    marketing_memory_gb: 96
    hbm_bandwidth_bytes_per_s: 1.6e12
    bf16_dense_tflops: 500
    spec_source: vendor sheet
"""


def test_user_catalog_overrides_and_extends(tmp_path, catalog):
    path = tmp_path / "mine.yaml"
    path.write_text(USER_CATALOG)
    merged = load_catalog(path)
    assert len(merged) == len(catalog) + 1
    h100 = find_gpu("H100", merged)
    assert h100.memory_bytes == 85_045_477_376 and h100.origin == str(path)
    assert find_gpu("my-h100", merged) is h100
    # the replacement keeps its place in the list
    assert [g.name for g in merged].index("h100 sxm 80gb") == [g.name for g in catalog].index("H100-SXM-80GB")
    pro = find_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition", merged)
    assert pro.memory_bytes == 97249 << 20 and pro.memory_precision == "mib"
    # the shipped catalog is untouched
    assert find_gpu("H100", load_catalog()).memory_bytes == 85_017_755_648


_BASE = ("vendor: nvidia, memory_gib: 80, hbm_bandwidth_bytes_per_s: 1, bf16_dense_tflops: 1, "
         "memory_source: s, spec_source: s")


def _gpu(fields: str) -> str:
    return f"  - {{{fields}}}\n"


@pytest.mark.parametrize("body, message", [
    ("gpus: []\nversion: 2\n", "version: 2 is not supported"),
    ("- just a list\n", "a mapping with a 'gpus:' list"),
    ("gpus: [\n", "malformed YAML"),
    ("gpus:\n" + _gpu("name: X, vendor: nvidia"), "field 'hbm_bandwidth_bytes_per_s' is required"),
    ("gpus:\n" + _gpu("name: X, " + _BASE.replace("memory_gib: 80, ", "")),
     "give exactly one of memory_bytes, memory_mib, memory_gib"),
    ("gpus:\n" + _gpu("name: X, memory_bytes: -4, " + _BASE.replace("memory_gib: 80, ", "")),
     "(X): field 'memory_bytes' must be a positive"),
    ("gpus:\n" + _gpu("name: X, " + _BASE.replace("bytes_per_s: 1", "bytes_per_s: fast")),
     "field 'hbm_bandwidth_bytes_per_s' must be a positive"),
    ("gpus:\n" + _gpu("name: X, " + _BASE.replace("nvidia", "acme")), "vendor 'acme'"),
    ("gpus:\n" + _gpu("name: X, colour: red, " + _BASE), "unknown field 'colour'"),
    ("gpus:\n" + _gpu("name: X, aliases: [4090], " + _BASE), "field 'aliases' must be a list of names"),
    ("gpus:\n" + _gpu("name: X, aliases: [Y], " + _BASE) + _gpu("name: Y, " + _BASE), "'Y' already names X"),
])
def test_bad_user_catalogs_fail_in_one_line_naming_file_and_field(tmp_path, body, message):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError) as err:
        load_catalog(path)
    text = str(err.value)
    assert text.startswith(str(path)) and message in text and "\n" not in text


def test_missing_user_catalog(tmp_path):
    with pytest.raises(ConfigError, match="GPU catalog not found"):
        load_catalog(tmp_path / "nope.yaml")


def test_memory_gib_and_mib_are_converted(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""\
        gpus:
          - {name: G, vendor: amd, memory_gib: 184.31, hbm_bandwidth_bytes_per_s: 1,
             bf16_dense_tflops: 1, memory_source: s, spec_source: s, estimate: true}
        """))
    g = find_gpu("g", load_catalog(path))
    assert g.memory_bytes == int(184.31 * GIB) and g.memory_precision == "gib" and g.estimate


# ----------------------------------------------------------------------------------- CLI

def test_gpus_command_json(capsys):
    from kvplan.cli import gpus
    from kvplan.cli.options import typer_command

    gpus_command = typer_command(gpus, "gpus")

    gpus_command(fmt="json", catalog=None)
    data = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in data["gpus"]}
    h100 = rows["H100-SXM-80GB"]
    assert h100["memory_bytes"] == 85_017_755_648
    assert set(h100) == {"name", "aliases", "vendor", "memory_bytes", "memory_gib", "memory_precision",
                         "marketing_memory_gb", "hbm_bandwidth_bytes_per_s", "bf16_dense_tflops",
                         "estimate", "unified_memory", "memory_source", "spec_source", "notes"}
    assert rows["GB10"]["unified_memory"] is True and h100["unified_memory"] is False
    doc = (Path(__file__).resolve().parent.parent / "docs" / "output.md").read_text()
    assert all(f"`{key}`" in doc for key in h100)  # every field is documented
    assert "NVIDIA H100 80GB HBM3" in h100["aliases"]


def test_gpus_command_table_through_typer(tmp_path):
    import typer
    from typer.testing import CliRunner

    from kvplan.cli import gpus
    from kvplan.cli.options import typer_command

    gpus_command = typer_command(gpus, "gpus")

    app = typer.Typer()
    app.command()(gpus_command)
    path = tmp_path / "mine.yaml"
    path.write_text(USER_CATALOG)
    result = CliRunner().invoke(app, ["--catalog", str(path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "RTX-PRO-6000-Blackwell" in result.output
    assert "85,045,477,376" in result.output and "79.20" in result.output
    plain = CliRunner().invoke(app, [], env={"COLUMNS": "200"})
    assert "79.18" in plain.output and "85,017,755,648" in plain.output


def test_gpus_command_rejects_unknown_format():
    from kvplan.cli import gpus
    from kvplan.cli.options import typer_command

    gpus_command = typer_command(gpus, "gpus")

    with pytest.raises(KvplanError, match="fmt: unknown format 'xml'"):
        gpus_command(fmt="xml", catalog=None)


@given(st.floats(min_value=1e-6, max_value=1e6, allow_nan=False, allow_infinity=False) | st.integers(1, 1 << 40)
       | st.sampled_from([139.8, 184.31, 255.98, 79.18, 0.5, 1e-05, 1e16, 123456789.123456789]))
@settings(max_examples=500, deadline=None, derandomize=True, database=None)
def test_gib_sizes_convert_as_decimal_does(value):
    """The catalog's GiB sizes are converted on integers where they can be (no decimal import): the same bytes."""
    from decimal import Decimal

    from kvplan.hardware import _gib_bytes

    assert _gib_bytes(value) == int(Decimal(str(value)) * (1 << 30))


def test_catalog_text_is_its_words_joined_by_one_space() -> None:
    """A catalog text is read as its words joined by one space; text already so is taken as it is, which holds
    because every whitespace character but the space is unprintable (``str.isprintable``)."""
    import random
    import sys

    from kvplan.hardware import _text

    spaces = [chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()]
    assert [c for c in spaces if c.isprintable()] == [" "]
    rng = random.Random(26)
    alphabet = [*spaces, *"ab é✓-_."]
    for _ in range(20_000):
        value = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        if value.strip():
            assert _text({"k": value}, "k", "label") == " ".join(value.split())


def test_names_are_normalised_alike_by_either_path():
    """hardware._norm removes whitespace with str.split: the same characters as str.isspace (every whitespace
    character, '_' and '-' removed, then lower case)."""
    from kvplan import hardware

    def general(name: str) -> str:
        return "".join(c for c in name if not (c.isspace() or c in "_-")).lower()

    import sys

    spaces = [c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace()]
    names = ["x" + chr(i) + "y" for i in range(0x3100)] + ["a" + c + "b" for c in spaces] + ["H100 SXM_80-GB", "a\x1cb\x1fc\x0bd", "RTX\t4090\r\n", "Ä100 x", "\u00a0h100"]
    names += [n for g in hardware.load_catalog() for n in (g.name, *g.aliases)]
    for name in names:
        hardware._NORMS.clear()
        assert hardware._norm(name) == general(name), repr(name)
