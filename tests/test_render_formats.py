"""The output-format registry (kvplan/render/formats.py): one place says which result prints in which format."""

from __future__ import annotations

import io
import json

import pytest

from kvplan.errors import UsageError
from kvplan.render import FORMATS
from kvplan.render.formats import check_format, formats_for, register, write


def test_each_result_type_prints_in_the_formats_its_command_offers():
    assert formats_for("EstimateResult") == FORMATS == ("table", "json", "csv", "markdown")
    assert formats_for("CapacityPlan") == formats_for("FitResult") == ("table", "json", "csv", "markdown")
    assert formats_for("CheckReport") == ("table", "json", "junit", "github", "markdown")
    for kind in ("VerifyResult", "RanksResult", "ParsedLog", "GPU", "BundledModel"):
        assert formats_for(kind) == ("table", "json")


def test_a_format_the_type_lacks_is_refused_by_field_naming_the_known_ones():
    with pytest.raises(UsageError) as info:
        check_format("VerifyResult", "csv")  # a format other results have
    assert info.value.field == "fmt"
    assert "unknown format 'csv' (known: table, json)" in str(info.value)
    with pytest.raises(UsageError, match="unknown format 'xml'"):
        check_format("EstimateResult", "xml")


def test_a_type_with_no_renderers_is_an_internal_error_not_a_usage_error():
    with pytest.raises(LookupError):
        check_format("NoSuchResult", "json")


def test_write_dispatches_on_the_result_type_and_passes_the_options():
    class Probe:
        pass

    seen = []
    register(Probe, "json")(lambda items, stream, **options: seen.append((items, options)) or stream.write("ok"))
    out = io.StringIO()
    probe = Probe()
    write(probe, "json", out, explain=True)
    assert out.getvalue() == "ok" and seen == [([probe], {"explain": True})]
    with pytest.raises(UsageError):
        write([probe], "table", out)


def test_estimate_json_is_the_result_document():
    from kvplan.estimate import estimate

    result = estimate("gpt2", contexts=[1024])
    out = io.StringIO()
    write([result], "json", out)
    assert json.loads(out.getvalue()) == json.loads(json.dumps(result.to_dict()))
    assert out.getvalue().endswith("}\n")


def test_json_never_imports_rich():
    import subprocess
    import sys

    code = ("import io, sys; from kvplan.estimate import estimate; from kvplan.render.formats import write; "
            "write(estimate('gpt2', contexts=[1024]), 'json', io.StringIO()); "
            "print('rich' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
