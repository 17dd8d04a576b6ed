"""Every mistake on the command line is ONE line naming the flag, with exit status 2 (issue 15 item 10),
and the library's errors carry the field at fault instead of a flag (issue 10 item 4)."""

from __future__ import annotations

import pytest

from kvplan.cli import error_line, main
from kvplan.errors import KvplanError, ModelSpecError, SpecError, UsageError


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("args,line", [
    # the parser's own mistakes (typer/click), which it used to print as a five-line box
    (["estimate"], "kvplan: error: MODEL: missing"),
    (["estimate", "gpt2", "--bogus"], "kvplan: error: --bogus: no such option for kvplan estimate"),
    (["estimate", "gpt2", "--contxt", "2"], "(did you mean --context?)"),
    (["estimate", "gpt2", "-c"], "kvplan: error: -c: needs a value"),
    (["estimate", "gpt2", "--by-layer=yes"], "kvplan: error: --by-layer: is a switch and takes no value"),
    (["estimate", "gpt2", "extra"], "kvplan: error: kvplan estimate: got unexpected extra argument"),
    (["estimat", "gpt2"], "kvplan: error: kvplan: no such command 'estimat'"),
    (["--bogus"], "kvplan: error: --bogus: no such option for kvplan"),
    (["max-batch", "gpt2", "--tp", "x"], "kvplan: error: --tp: 'x' is not a whole number"),
    (["max-batch", "gpt2", "--gpu-memory-utilization", "most"], "kvplan: error: --gpu-memory-utilization: 'most' is not a number"),
    (["verify", "gpt2", "--repeats", "1e3"], "kvplan: error: --repeats: '1e3' is not a whole number"),
    (["estimate", "gpt2", "--block-size", "x"], "kvplan: error: --block-size: 'x' is not a whole number"),
    (["check"], "kvplan: error: PATHS: missing"),
    # kvplan's own errors: the library's field becomes this command's flag
    (["estimate", "gpt2", "--batch", "x"], "kvplan: error: --batch: 'x' is not a count"),
    (["estimate", "gpt2", "--context", "0"], "kvplan: error: --context: 0 must be positive"),
    (["estimate", "gpt2", "--format", "xml"], "kvplan: error: --format: unknown format 'xml'"),
    # a zero sampling width is refused, never read as 1
    (["estimate", "gpt2", "-c", "1k", "--n", "0"], "kvplan: error: --n: n 0 must be at least 1"),
    (["max-batch", "gpt2", "--gpu", "H100", "--beam-width", "0"], "kvplan: error: --beam-width:"),
    (["max-batch", "gpt2", "--gpu", "H100", "--max-model-len", "0"], "kvplan: error: --max-model-len: 0 must be positive"),
    (["max-batch", "gpt2", "--gpu", "H100", "--pp", "99"], "kvplan: error: --pp: 99 exceeds the model's 12 layers"),
    (["max-batch", "gpt2", "--gpu", "H100", "--kv-cache-memory", "lots"], "kvplan: error: --kv-cache-memory: 'lots' is not a size"),
    (["max-batch", "gpt2", "--gpu", "H100", "--weights-bytes", "-1"], "kvplan: error: --weights-bytes: '-1' must be a positive size"),
    (["schema", "nothing"], "kvplan: error: WHAT: unknown schema 'nothing'"),
])
def test_one_line_naming_the_flag_exit_2(capsys, args, line):
    code, out, err = run(capsys, *args)
    assert code == 2, err
    assert err.startswith("kvplan: error: ") and err.count("\n") == 1, err
    assert line in err, err
    assert "Traceback" not in err and "╭" not in err and "Usage:" not in err


def test_verify_errors_name_the_flag(capsys):
    pytest.importorskip("torch", reason="verify checks its device with torch")
    code, _, err = run(capsys, "verify", "gpt2", "--device", "tpu")
    assert code == 2 and err == "kvplan: error: --device: 'tpu' is not a device: use cpu or cuda:N\n"


def test_help_and_version_are_unchanged(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("kvplan ")
    code, out, _ = run(capsys, "estimate", "--help")
    assert code == 0 and "--context" in out and "Examples" in out
    code, out, _ = run(capsys)  # bare `kvplan`: the help, exit 2 as before
    assert code == 2 and "estimate" in out and "max-batch" in out


def test_verify_help_shows_the_extra(capsys):
    code, out, _ = run(capsys, "verify", "--help")
    assert code == 0 and "kvplan[verify]" in "".join(out.split())  # rich markup ate '[verify]' before


def test_errors_carry_the_field_and_read_alone():
    exc = UsageError("must be at least 1", field="max_model_len")
    assert isinstance(exc, KvplanError) and isinstance(exc, ValueError)
    assert exc.field == "max_model_len" and exc.message == "must be at least 1"
    assert str(exc) == "max_model_len: must be at least 1"  # a program's log says which parameter
    assert error_line(exc, {"max_model_len": "--max-model-len"}) == \
        "kvplan: error: --max-model-len: must be at least 1"
    assert error_line(exc, {}) == "kvplan: error: max_model_len: must be at least 1"
    assert error_line(UsageError("no field here"), {"x": "--x"}) == "kvplan: error: no field here"
    assert ModelSpecError is SpecError and ModelSpecError("bad", field="layers").field == "layers"


def test_library_maps_every_field_it_raises_to_a_flag():
    """Library parameter names that differ from a command's own are in that command's FIELDS table."""
    import typer

    from kvplan.cli.app import COMMANDS, app
    from kvplan.cli.usage import flag_table

    group = typer.main.get_command(app)
    for name, module in COMMANDS.items():
        table = flag_table(group.commands[name], getattr(module, "FIELDS", {}))
        assert set(getattr(module, "FIELDS", {})) <= set(table), name
    estimate = flag_table(group.commands["estimate"], COMMANDS["estimate"].FIELDS)
    assert estimate["contexts"] == "--context" and estimate["kv_dtypes"] == "--kv-dtype"
    from kvplan.cli.options import command_flags

    for name, module in COMMANDS.items():  # the reader's tables are the typer commands'
        assert command_flags(module) == flag_table(group.commands[name], getattr(module, "FIELDS", {})), name
    mb = flag_table(group.commands["max-batch"], COMMANDS["max-batch"].FIELDS)
    assert mb["kv_dtype"] == "--kv-cache-dtype" and mb["catalog"] == "--gpu-catalog"


@pytest.mark.parametrize("text", ["", "0", "0.0", "0.0.0.1", "x.y", "v", "1.-2"])
def test_what_cannot_be_a_version_is_refused(text):
    # issue 15 item 9: refuse what cannot be a version, naming the field
    import kvplan

    with pytest.raises(kvplan.UsageError) as refused:
        kvplan.estimate("gpt2", contexts=1024, engine_version=text)
    assert refused.value.field == "engine_version"


def test_a_version_newer_than_the_rules_is_said():
    import kvplan

    result = kvplan.estimate("gpt2", contexts=1024, engine_version="99.99")
    assert any("newer than the newest rules kvplan knows (0.33)" in a for a in result.assumptions)
    assert not any("newer than" in a for a in kvplan.estimate("gpt2", contexts=1024).assumptions)
