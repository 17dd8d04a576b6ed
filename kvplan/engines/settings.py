"""An engine's settings declared as data: one ``Setting`` per knob the engine has (its flag on kvplan's
command line, where the value goes, how it is read, what the engine's own flag and kvplan's deployment file
call it). Each engine package lists its own in ``engines/<engine>/settings.py`` (``Engine.settings``); the
command line is generated from them (``kvplan/cli/options.py``), so no command names an engine.

This module is imported by the estimate fast path: it stays free of typer, pydantic and the engines.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, Literal

from kvplan.errors import UsageError
from kvplan.record import dataclass, replace

if TYPE_CHECKING:  # a type: no typing at run time
    Target = Literal["settings", "options", "plan", "model", "env"]
"""Where a setting's value goes: ``Settings`` (the GPU budget), ``EngineOptions`` (layout and host tiers),
a keyword of ``kvplan.max_batch`` (``plan``), the engine's model reader (``model``: the engine's flag;
``env``: the engine's environment variables, each set to the value)."""


@dataclass(frozen=True)
class Setting:
    """One engine setting, declared once."""

    name: str
    """kvplan's name for it: the command's parameter (``--max-num-seqs`` -> ``max_num_seqs``), the error field."""
    flags: tuple[str, ...]
    """kvplan's command-line flags (the first long one names it in errors); () where only a file sets it."""
    help: str
    target: Target
    field: str | None = None
    """The destination's field (default: ``name``)."""
    convert: Callable[[Any, str], Any] | None = None
    """Text (or a switch's True) -> the destination's value, refusing a bad one by ``name``; None: as given."""
    switch: bool = False
    """A flag without a value."""
    estimate: bool = False
    """Also an option of ``kvplan estimate`` (a layout setting)."""
    file_key: str | None = None
    """The key of kvplan's deployment file (``engine.<key>``) that passes the engine's own flag (refused for an
    engine whose launch command has no such flag)."""
    serve: tuple[str, ...] = ()
    """The engine's own flag or environment variable names for it."""
    refusal: str = "{title} has no {option} option"
    """What is said when another engine is given it ({engine}, {title}, {owners}, {option}, {flag} filled in)."""
    combined: bool = False
    """Read together with others by the engine's ``combine`` (``engines/<engine>/settings.py``), not alone."""

    @property
    def dest(self) -> str:
        return self.field or self.name

    @property
    def flag(self) -> str:
        longs = [f for f in self.flags if f.startswith("--")]
        return (longs or list(self.flags) or [self.name])[0]

    def given(self, value: Any) -> bool:
        """Whether the user gave it: a switch turned on, any other value present (an empty text is given)."""
        return bool(value) if self.switch else value is not None

    def value(self, raw: Any) -> Any:
        return raw if self.convert is None else self.convert(raw, self.name)


@dataclass(frozen=True)
class Owned:
    """One setting as every engine that has it declares it: the union of the engines' tables."""

    setting: Setting
    engines: tuple[str, ...]
    titles: tuple[str, ...]
    own_names: tuple[str, ...] = ()
    """Per title, the engine's own name for it where it differs from kvplan's flag ('' where it does not)."""

    def refuse(self, engine: Any) -> UsageError:
        """The setting given for ``engine``, which lacks it: one line naming the flag."""
        s = self.setting
        text = s.refusal.format(engine=engine.name, title=engine.title, owners=join_titles(self.titles),
                                option=s.dest.replace("_", "-"), flag=s.flag)
        return UsageError(text, field=s.name)

    @property
    def help(self) -> str:
        """The help, with the engines that have it and their own names for it (generated, never by hand)."""
        named = [f"{title} {own}".strip() for title, own in zip(self.titles, self.own_names or [""] * len(self.titles))]
        text = self.setting.help
        text = text if text.endswith("...") else text.removesuffix(".")
        return f"{text} ({', '.join(named)})."


def join_titles(titles: Iterable[str]) -> str:
    """'vLLM', 'vLLM and SGLang', 'vLLM, SGLang and TensorRT-LLM'."""
    names = list(titles)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def short_title(engine: Any) -> str:
    """The engine's title without its variant ('transformers (DynamicCache)' -> 'transformers')."""
    return str(engine.title).split(" (")[0]


def union(engines: Iterable[Any]) -> dict[str, Owned]:
    """Every engine's settings by name, each with the engines that have it (a flag two engines declare
    must read alike on kvplan's command line: the same flags, destination and kind)."""
    found: dict[str, Owned] = {}
    for engine in engines:
        for s in settings_of(engine):
            seen = found.get(s.name)
            own = s.serve[0] if s.serve and s.serve[0] not in s.flags and s.target != "env" else ""
            if seen is None:
                found[s.name] = Owned(s, (engine.name,), (short_title(engine),), (own,))
                continue
            first = seen.setting
            if (first.flags, first.target, first.dest, first.switch) != (s.flags, s.target, s.dest, s.switch):
                raise TypeError(f"setting {s.name}: {engine.name} declares it unlike {seen.engines[0]}")
            engines_ = (*seen.engines, engine.name)
            if short_title(engine) in seen.titles:  # a variant of an engine listed (hf-static)
                found[s.name] = replace(seen, engines=engines_)
                continue
            found[s.name] = replace(seen, engines=engines_, titles=(*seen.titles, short_title(engine)),
                                    own_names=(*seen.own_names, own))
    return found


def own(engine: Any, name: str) -> Setting | None:
    """The engine's own declaration of setting ``name``, or None where it lacks it."""
    return next((s for s in settings_of(engine) if s.name == name), None)


def convert_given(settings: Iterable[Setting], raw: Mapping[str, Any], target: Target) -> dict[str, Any]:
    """The given settings of one target as the destination's keywords, each value read by its converter."""
    out: dict[str, Any] = {}
    for s in settings:
        if s.target == target and not s.combined and s.name in raw and s.given(raw[s.name]):
            out[s.dest] = s.value(raw[s.name])
    return out


# ------------------------------------------------------------------------------------- shared converters
# Numbers typed on the command line, converted by kvplan (not by the parser) so that every mistake reads
# the same under any typer version: ``--tp: 'x' is not a whole number``.

_MAX_DIGITS = 30  # int() of a huge string costs quadratic time and is never a setting


def whole(text: str | int | None, field: str) -> int | None:
    """'4' -> 4; None stays None. Signs are kept (the library says what range it accepts)."""
    if text is None or isinstance(text, int):
        return text
    raw = text.strip().replace("_", "")
    digits = raw.lstrip("+-")
    if not digits.isascii() or not digits.isdigit() or len(digits) > _MAX_DIGITS or len(raw) - len(digits) > 1:
        raise UsageError(f"'{text}' is not a whole number", field=field)
    return int(raw)


def number(text: str | float | None, field: str) -> float | None:
    """'0.9' -> 0.9; None stays None; inf and nan are not numbers here."""
    if text is None or isinstance(text, float):
        return text
    raw = text.strip()
    try:
        if len(raw) > 40:
            raise ValueError
        value = float(raw)
    except ValueError:
        raise UsageError(f"'{text}' is not a number", field=field) from None
    if value != value or value in (float("inf"), float("-inf")):
        raise UsageError(f"'{text}' is not a number", field=field)
    return value


def plain_float(text: str, field: str) -> float:
    """Python's float(), refused by name (a ratio the engine's own rule bounds)."""
    try:
        return float(text)
    except ValueError:
        raise UsageError(f"'{text}' is not a number", field=field) from None


def lower(text: str, field: str) -> str:
    """A name, case and surrounding space ignored."""
    return text.strip().lower()


def switch_or_none(value: bool, field: str) -> bool | None:
    return value or None


def byte_size(text: str, field: str) -> int:
    from kvplan.hardware import parse_bytes

    return parse_bytes(text, field)


_HUMAN_SUFFIX = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_int(text: str) -> int:
    """The engines' human-readable integers (vLLM's ``human_readable_int``): '32768', '32k' (10^3), '32K' (2^10),
    '1M'; ValueError otherwise."""
    import re

    m = re.fullmatch(r"^(\d+(?:\.\d+)?)([kmgtKMGT])$", text.strip())  # anchored: linear under search too
    if m:
        digits, suffix = m.groups()
        if suffix.islower():
            scaled = float(digits) * _HUMAN_SUFFIX[suffix]
            if scaled == float("inf"):  # 400 digits and a 'k': int(inf) raises OverflowError
                raise ValueError(text)
            return int(scaled)
        if "." in digits:
            raise ValueError(text)
        return int(digits) * _HUMAN_SUFFIX[suffix]
    return int(text.strip())


def engine_int(text: str | int | None, field: str) -> int | None:
    """A count named like the engines' flags, read as they read it ('32k' = 32,000, '32K' = 32,768, '1M');
    kvplan's own --context and --batch keep k = 1024."""
    if text is None or isinstance(text, int):
        return text
    try:
        value = human_int(text)
    except ValueError:
        raise UsageError(f"'{text}' is not a whole number (vLLM reads 32k as 32,000 and 32K as 32,768)",
                         field=field) from None
    if value < 1:
        raise UsageError(f"{value} must be positive", field=field)
    from kvplan.units import MAX_COUNT

    if value > MAX_COUNT:  # 10^20 batched tokens planned an activation peak larger than any GPU, exit 1
        raise UsageError(f"{value:,} is absurdly large (at most {MAX_COUNT:,})", field=field)
    return value


MAX_HOST_GIB = 1 << 20
"""1 PiB: far beyond any host's memory (the bound kvplan.hardware puts on a device's bytes)."""


def gib(text: str | None, field: str) -> int | None:
    """A host size as the engines take it: a bare number is GiB, a size with a unit is read as written."""
    if text is None:
        return None
    bare = text.strip()
    try:
        value = float(bare)
    except ValueError:
        return byte_size(bare, field)
    # nan, inf, 1e300 and negative sizes would overflow int() or plan negative blocks
    if not 0 <= value <= MAX_HOST_GIB:
        raise UsageError(f"'{text}' must be a size in GiB from 0 to {MAX_HOST_GIB:,} (e.g. 200 or 200GiB)",
                         field=field)
    return int(value * (1 << 30))


def gib_or_none(text: str | None, field: str) -> int | None:
    """``gib``, where 0 is the same as not given."""
    return gib(text, field) or None


def choice(*names: str) -> Callable[[str, str], str]:
    """One of ``names``, case and space ignored; any other refused listing them."""
    def read(text: str, field: str) -> str:
        mode = str(text).strip().lower()
        if mode not in names:
            raise UsageError(f"'{mode}': choose {' or '.join(names)}", field=field)
        return mode

    return read


# -------------------------------------------------------------------- settings several engines share
# Declared once here; each engine that has one lists it in its own table.

MAX_NUM_BATCHED_TOKENS = Setting(
    "max_num_batched_tokens", ("--max-num-batched-tokens",), "Tokens per forward pass.", "settings",
    convert=engine_int)
MAX_NUM_SEQS = Setting("max_num_seqs", ("--max-num-seqs",), "Sequences per batch.", "settings", convert=engine_int)
ENFORCE_EAGER = Setting("enforce_eager", ("--enforce-eager",), "No CUDA graphs.", "settings", switch=True)
CPU_OFFLOAD_GB = Setting(
    "cpu_offload_gb", ("--cpu-offload-gb",), "GiB of weights per GPU kept in host memory (the GPU holds the rest).",
    "settings", field="cpu_offload_bytes", convert=gib_or_none, file_key="cpu_offload_gb",
    serve=("--cpu-offload-gb",), refusal="kvplan plans weight offload for {owners} only, not {engine}")
OFFLOAD_LINK = Setting("offload_link", ("--offload-link",),
                       "GPU-host link of the offload tier: pcie4-x16, pcie5-x16 (default), nvlink-c2c.", "options")
def expert_parallel(own: str) -> Setting:
    """--enable-expert-parallel as the engine's flag ``own`` turns it on."""
    return Setting(
        "enable_expert_parallel", ("--enable-expert-parallel", "-ep"),
        "MoE: the --dp ranks share one copy of the routed experts, spread over tp x dp GPUs: attention and the KV "
        "cache stay per rank.", "plan", field="expert_parallel", convert=switch_or_none, switch=True, serve=(own,),
        refusal="{engine} has no expert parallelism kvplan plans ({owners} do)")
QUANTIZATION = Setting(
    "quantization", ("--quantization", "-q"), "Runtime quantization of an unquantized checkpoint, as the engine "
    "loads it: fp8 (linear layers 1 byte a weight) or bitsandbytes (4-bit nf4).", "model",
    refusal="kvplan plans the engine's quantization for {owners} only, not {engine}")
DTYPE = Setting(
    "dtype", ("--dtype",), "The model dtype, as the engine reads --dtype (auto, half, float16, bfloat16, float, "
    "float32): weights, activations and the auto KV cache follow it.", "model",
    refusal="kvplan plans the engine's dtype for {owners} only, not {engine}")


def allow_long(variable: str) -> Setting:
    """--allow-long-max-model-len as the engine's environment ``variable`` (set to 1) allows it."""
    return Setting("allow_long_max_model_len", ("--allow-long-max-model-len",),
                   "Plan a --max-model-len past the model's limit, as the engine does with its environment variable "
                   "set to 1; refused without it.", "env", convert=lambda value, field: "1", switch=True,
                   serve=(variable,))


def settings_of(engine: Any) -> tuple[Setting, ...]:
    """The engine's settings (``Engine.settings``); an engine that declares none has none."""
    return tuple(getattr(engine, "settings", ()))


def combine(engine: Any, values: Mapping[str, Any], ranks: int) -> dict[str, Any]:
    """The values the engine reads from several of its settings together (``combined``), where it has any."""
    read = getattr(engine, "combine_settings", None)
    mine = {s.name: values[s.name] for s in settings_of(engine) if s.combined and s.given(values.get(s.name))}
    return read(mine, ranks) if read is not None else {}
