"""The command line's options, each declared once: the engine-neutral ones here, shared by the commands that
take them, and every engine's own settings from its package's table (``Engine.settings``,
``kvplan/engines/<engine>/settings.py``). The typer commands are built from these tables (``build``), so
that no command lists an engine or declares an engine's flag by hand.

Imported by the estimate fast path: no typer here except inside ``build``.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

from kvplan.render import FORMATS


class _Value:
    """A frozen value class without a generated method: the option tables build some 80 instances at every start,
    and a ``kvplan.record`` class compiles its ``__init__`` at its 16th instance (about 1 ms). Compared, hashed and
    shown by its fields (``_FIELDS``), as a frozen dataclass would be."""

    __slots__ = ()
    _FIELDS: tuple[str, ...] = ()

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return other.__class__ is self.__class__ and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__qualname__}({shown})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)


class Opt(_Value):
    """One option of a command.

    - ``dest``: the command's parameter name (its run function's keyword);
    - ``flag``: a switch without a value; every other option takes text, which the command converts;
    - ``path``: a file, handed to ``run`` as a ``pathlib.Path`` (``--gpu-catalog``);
    - ``integer``: a whole number the parser converts (``int``); a value that is not one is the parser's usage
      error;
    - ``required``: the command cannot run without it (a missing one is the parser's usage error);
    - ``file_dest``: a switch that may take a file: ``--plot kv.svg`` (the next word ending in one of
      ``file_suffixes``) or ``--plot=kv.svg`` sets this parameter instead of the switch (read by ``cli/parse.py``;
      typer knows the switch and the option of that name).
    """

    __slots__ = ("dest", "names", "default", "help", "flag", "path", "integer", "required", "file_dest",
                 "file_suffixes")
    _FIELDS = __slots__
    dest: str
    names: tuple[str, ...]
    default: Any
    help: str
    flag: bool
    path: bool
    integer: bool
    required: bool
    file_dest: str | None
    file_suffixes: tuple[str, ...]

    def __init__(self, dest: str, names: tuple[str, ...], default: Any, help: str, flag: bool = False,
                 path: bool = False, integer: bool = False, required: bool = False, file_dest: str | None = None,
                 file_suffixes: tuple[str, ...] = ()) -> None:
        self._set(dest=dest, names=names, default=default, help=help, flag=flag, path=path, integer=integer,
                  required=required, file_dest=file_dest, file_suffixes=file_suffixes)

    def but(self, **changes: Any) -> Opt:
        """This option as one command words it (another help, another first flag)."""
        return Opt(**{name: changes.pop(name) if name in changes else getattr(self, name) for name in self._FIELDS},
                   **changes)


def engine_help(lead: str, names: Iterable[str] | None = None, several: bool = False) -> str:
    """--engine's help: the engines from the registry (kvplan/engines/__init__.py), never listed by hand;
    ``several``: a list compares them (``lead`` then shows two)."""
    import kvplan.engines as engines

    listed = list(engines.ENGINE_NAMES if names is None else names)
    example = f", e.g. {','.join(listed[:2])}" if several and len(listed) > 1 else ""
    return f"{lead}{example}: {', '.join(listed)} (default {engines.DEFAULT_ENGINE})."


def engine_opt(lead: str, names: Iterable[str] | None = None, several: bool = False) -> Opt:
    from kvplan.engines import DEFAULT_ENGINE

    return Opt("engine", ("--engine", "-e"), DEFAULT_ENGINE, engine_help(lead, names, several))


# ------------------------------------------------------------------------------- engine-neutral options

MODEL_HELP = ("Bundled model id (e.g. meta-llama/Llama-3.1-8B), a config.json, a model directory, a YAML spec, "
              "or any Hugging Face Hub model id (org/name or org/name@revision; read from config.json and the "
              "safetensors headers, cached for HF_HUB_OFFLINE=1).")
ENGINE_VERSION = Opt("engine_version", ("--engine-version",), None,
                     "Which release's rules apply (e.g. 0.10 or 4.57). Default: the newest kvplan knows.")
KV_DTYPE = Opt("kv_dtype", ("--kv-dtype", "-d"), "auto",
               "KV cache dtypes, comma separated: auto (the engine's default), bf16, fp16, fp32, fp8, fp8_e5m2, "
               "int8_per_token_head, fp8_per_token_head, int4_per_token_head, nvfp4, fp8_ds_mla (MLA), "
               "q8_0, q4_0, ...")
FORMAT = Opt("fmt", ("--format", "-f"), "table", f"Output format: {', '.join(FORMATS)}.")
BLOCK_SIZE = Opt("block_size", ("--block-size",), None, "Override the engine's page size in tokens.")
CONTEXT = Opt("context", ("--context", "-c"), None, "Tokens per sequence: 8192 or 8k (k = 1024).")
BATCH = Opt("batch", ("--batch", "-b"), "1", "Concurrent sequences.")
GPU = Opt("gpu", ("--gpu", "-g"), None, "GPU type from `kvplan gpus` (H100-80GB, A100-80GB, RTX-4090, ...).")
GPU_MEMORY = Opt("gpu_memory", ("--gpu-memory",), None, "Any other GPU: its total memory, e.g. 47.5GiB.")
GPU_CATALOG = Opt("gpu_catalog", ("--gpu-catalog",), None, "A YAML file adding GPUs to the catalog.", path=True)
TP = Opt("tp", ("--tp",), None, "Tensor-parallel size (default 1).")
PP = Opt("pp", ("--pp",), None, "Pipeline-parallel size (default 1).")
PROMPT_LEN = Opt("prompt_len", ("--prompt-len",), None,
                 "Prompt tokens per request (context = prompt + output), e.g. 6k.")
OUTPUT_LEN = Opt("output_len", ("--output-len",), None, "Generated tokens per request, e.g. 2k.")
SHARED_PREFIX = Opt("shared_prefix", ("--shared-prefix",), None,
                    "Leading prompt tokens common to every request (a system prompt), e.g. 4k, stored as the engine "
                    "shares them (default 0: none).")
N = Opt("n", ("--n",), None, "Parallel samples per request (default 1), e.g. 4; --batch counts requests "
        "(vLLM, SGLang, transformers).")
BEAM_WIDTH = Opt("beam_width", ("--beam-width",), None, "Beams per request (default 1); --batch counts requests "
                 "(vLLM, TensorRT-LLM, transformers); not with --n.")
SPECULATIVE_METHOD = Opt("speculative_method", ("--speculative-method",), None,
                         "Speculative decoding (vLLM, SGLang, TensorRT-LLM, transformers): ngram, eagle, eagle3, mtp "
                         "or draft_model (default with --speculative-model: from its name, as vLLM infers it).")
NUM_SPECULATIVE_TOKENS = Opt("num_speculative_tokens", ("--num-speculative-tokens",), None,
                             "Draft tokens per step (k), e.g. 5; needed except with mtp (default: the MTP layer "
                             "count).")
SPECULATIVE_MODEL = Opt("speculative_model", ("--speculative-model",), None,
                        "The draft model or EAGLE head (bundled id, config.json, directory or YAML spec).")
SHARING = (PROMPT_LEN, OUTPUT_LEN, SHARED_PREFIX, N, BEAM_WIDTH, SPECULATIVE_METHOD, NUM_SPECULATIVE_TOKENS,
           SPECULATIVE_MODEL)
"""Samples, beams, a shared prefix and speculation: read alike by estimate, max-batch and verify
(``values.sharing_args``)."""


# ------------------------------------------------------------------------------- every engine's settings

def engine_settings(estimate_only: bool = False) -> dict[str, Any]:
    """Every registered engine's settings by name (``kvplan.engines.settings.Owned``: the setting and the
    engines that have it), in registry order; ``estimate_only``: the layout settings estimate takes."""
    import kvplan.engines as engines
    from kvplan.engines.settings import union

    table = union(engines.get_engine(name) for name in engines.ENGINE_NAMES)
    return {k: v for k, v in table.items() if v.setting.flags and (v.setting.estimate or not estimate_only)}


def setting_opts(table: dict[str, Any]) -> tuple[Opt, ...]:
    """The command-line options of the engines' settings, each help saying which engines have it."""
    return tuple(Opt(name, owned.setting.flags, False if owned.setting.switch else None, owned.help,
                     flag=owned.setting.switch) for name, owned in table.items())


def setting_fields(table: dict[str, Any]) -> dict[str, str]:
    """Library field -> this command's parameter, where an engine setting's destination is named otherwise."""
    fields: dict[str, str] = {}
    for name, owned in table.items():
        fields.setdefault(owned.setting.dest, name)
    return {dest: name for dest, name in fields.items() if dest != name}


def refuse_foreign(engine: Any, table: dict[str, Any], values: dict[str, Any]) -> None:
    """An engine setting given for an engine that lacks it: refused, naming the flag (exit 2)."""
    for name, owned in table.items():
        if owned.setting.given(values.get(name)) and engine.name not in owned.engines:
            raise owned.refuse(engine)


class Arg(_Value):
    """A command's positional argument: ``many``, one or more values (a list, e.g. check's files), otherwise exactly
    one; ``default``, the value when none is given (None: the argument is required)."""

    __slots__ = ("dest", "help", "many", "default")
    _FIELDS = __slots__
    dest: str
    help: str
    many: bool
    default: str | None

    def __init__(self, dest: str, help: str, many: bool = False, default: str | None = None) -> None:
        self._set(dest=dest, help=help, many=many, default=default)


def flags_of(opts: Iterable[Opt], argument: Arg | None, fields: dict[str, str]) -> dict[str, str]:
    """Library field -> this command's flag, for one-line errors: each option under its own name, the argument
    as its upper-case name, then the library's names for them (``fields``: field -> parameter)."""
    table = {opt.dest: opt.names[0] for opt in opts}
    if argument is not None:
        table[argument.dest] = argument.dest.upper()
    return table | {field: table[dest] for field, dest in fields.items() if dest in table}


# ------------------------------------------------------------------------------- the typer command

def help_text(doc: str) -> str:
    """A command's ``DOC`` as its ``--help`` shows it: each paragraph of prose on one line, for the help to wrap at
    the terminal's width (typer keeps a docstring's line breaks, so prose wrapped in the source printed as ragged
    lines); indented lines (the examples) and blank lines kept as they are."""
    import inspect

    out: list[str] = []
    prose = False  # the line before is prose: an unindented line goes on with it
    for line in inspect.cleandoc(doc).splitlines():
        if line and not line[0].isspace():
            if prose:
                out[-1] += " " + line
                continue
            prose = True
        else:
            prose = False
        out.append(line)
    return "\n".join(out)


def build(opts: Iterable[Opt], run: Callable[..., Any], doc: str, argument: Arg | None = None,
          name: str = "command") -> Callable[..., None]:
    """A typer command whose parameters are ``opts`` (and ``argument``): typer reads them from the function's
    signature, which is built here, and the function calls ``run`` with every value by keyword; the status
    ``run`` returns (1: a verdict) becomes typer's exit."""
    import inspect
    from pathlib import Path
    from typing import List, Optional

    import typer

    params, hints = [], {}
    if argument is not None:
        info = typer.Argument(... if argument.default is None else argument.default, help=argument.help,
                              show_default=argument.default is not None)
        params.append(inspect.Parameter(argument.dest, inspect.Parameter.KEYWORD_ONLY, default=info))
        hints[argument.dest] = List[str] if argument.many else str
    for opt in opts:
        info = typer.Option(... if opt.required else opt.default, *opt.names, help=opt.help,
                            show_default=opt.default not in (None, False) and not opt.required)
        params.append(inspect.Parameter(opt.dest, inspect.Parameter.KEYWORD_ONLY, default=info))
        kind: Any = Path if opt.path else int if opt.integer else str
        hints[opt.dest] = bool if opt.flag else kind if opt.required else Optional[kind]

    def command(**values: Any) -> None:
        from kvplan.cli.guard import Exit

        try:
            code = run(**values)
        except Exit as done:
            code = done.code
        if code:
            raise typer.Exit(code)

    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = hints
    command.__doc__ = help_text(doc)
    command.__name__ = command.__qualname__ = name
    return command


def command_flags(module: Any) -> dict[str, str]:
    """A command module's field -> flag table (its ``options()``, ``ARGUMENT`` and ``FIELDS`` or ``fields()``)."""
    fields = module.fields() if callable(getattr(module, "fields", None)) else getattr(module, "FIELDS", {})
    return flags_of(module.options(), getattr(module, "ARGUMENT", None), fields)


def typer_command(module: Any, name: str) -> Callable[..., None]:
    """The typer command of a command module, built from its table."""
    return build(module.options(), module.run, module.DOC, getattr(module, "ARGUMENT", None),
                 name=f"{name.replace('-', '_')}_command")
