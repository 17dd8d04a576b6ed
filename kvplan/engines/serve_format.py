"""How an engine is launched and how its serve command line reads, for ``kvplan check``: the object an engine
package exposes as ``Engine.serve``.

Each engine package with a server kvplan reads defines one ``ServeFlags`` (``engines/<engine>/flags.py``), written
with what this module holds; ``kvplan.deploy.flags`` finds launchers and parses flags through these objects only,
looked up by ``engines/serve.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

from kvplan.record import dataclass, field

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-/")
_ENDS = {"": None, "(:|@|$)": ":@", "(:|$)": ":"}
_IMAGE_FORMS: dict[str, tuple[tuple[str, str | None], ...] | None] = {}


def _image_form(pattern: str) -> tuple[tuple[str, str | None], ...] | None:
    """``pattern`` as (name, the characters that may follow it besides the end) alternatives where it is only
    ``(^|/)NAME``, ``(^|/)NAME(:|@|$)`` or ``(^|/)NAME(:|$)`` joined by ``|`` (what the engines' image patterns
    are), else None."""
    alternatives: list[tuple[str, str | None]] = []
    for part in pattern.split("|(^|/)"):
        part = part.removeprefix("(^|/)") if not alternatives else part
        if not alternatives and not pattern.startswith("(^|/)"):
            return None
        cut = next((i for i, c in enumerate(part) if c not in _NAME_CHARS), len(part))
        name, end = part[:cut], part[cut:]
        if not name or end not in _ENDS:
            return None
        alternatives.append((name, _ENDS[end]))
    return tuple(alternatives)


def image_search(pattern: str, image: str) -> bool:
    """``re.search(pattern, image) is not None``; the engines' image patterns (``_image_form``) are matched by hand,
    so that recognising a deployment's image compiles no regular expression (~0.3 ms each of a check's start)."""
    if pattern not in _IMAGE_FORMS:
        _IMAGE_FORMS[pattern] = _image_form(pattern)
    form = _IMAGE_FORMS[pattern]
    if form is None:
        import re

        return re.search(pattern, image) is not None
    for name, follow in form:
        at = image.find(name)
        while at >= 0:
            end = at + len(name)
            if (at == 0 or image[at - 1] == "/") and (
                    follow is None or end == len(image) or image[end] in follow
                    or (end == len(image) - 1 and image[end] == "\n")):  # '$' also matches before a final newline
                return True
            at = image.find(name, at + 1)
    return False


def plain_int(text: str) -> int:
    return int(text.strip())


@dataclass(frozen=True)
class ServeFlags:
    engine: str
    """The kvplan engine name these flags configure."""
    commands: tuple[str, ...] = ()
    """Executables whose ``serve`` subcommand starts the server, model positional (``vllm serve MODEL``)."""
    modules: tuple[str, ...] = ()
    """``python -m`` modules that start the server."""
    flags: tuple[tuple[str, str], ...] = ()
    """(flag, kvplan setting) pairs: ``--max-model-len`` -> ``max_model_len``."""
    underscores: bool = False
    """Whether ``--max_model_len`` is read as ``--max-model-len`` (vLLM's argparse does)."""
    images: tuple[str, ...] = ()
    """Container images (regular expressions) whose entry point is this server when no command is given."""
    fp8_kv_flag: str = "--kv-cache-dtype fp8"
    """The flag that asks for an fp8 KV cache, for suggestions."""
    parse_int: Callable[[str], int] = field(default=plain_int, compare=False)
    """How the engine reads an integer flag (vLLM accepts '32k')."""
    speculation: Callable[[Mapping[str, Any]], dict[str, Any]] | None = field(default=None, compare=False)
    """``max_batch``'s speculative keywords from the settings its flags gave (vLLM's
    ``--speculative-config``), where kvplan reads them; {} when none is asked."""
    booleans: tuple[str, ...] = ("enforce_eager",)
    """Settings whose flag takes no value (``--enable-hierarchical-cache``)."""
    floats: tuple[str, ...] = ()
    """Settings the engine reads as a float (``--kv-offloading-size 200``: GiB)."""
    env_prefixes: tuple[str, ...] = ()
    """Environment variables the server reads (``LMCACHE_`` for vLLM's LMCache connector): each one set in
    the deployment becomes a setting named as the variable in lower case (``lmcache_chunk_size``)."""
    reader: Callable[[Mapping[str, Any], str | None], "ServeReading"] | None = field(default=None, compare=False)
    """What the settings its flags gave mean for the plan beyond the budget's settings (offload tiers,
    prefix caching, speculation kvplan does not plan), given the engine version (None: the default)."""
    environment: tuple[str, ...] = ()
    """Environment variables that change the plan (``VLLM_USE_V1``): a deployment's values reach ``reader``
    among the settings, under their own names."""
    wrappers: tuple[str, ...] = ()
    """Commands that run the server command written after them (``trtllm-llmapi-launch trtllm-serve ...``)."""
    tagged_images: tuple[str, ...] = ()
    """Container images (regular expressions) whose tag is the engine's version even when the command is given
    (``nvcr.io/nvidia/tensorrt-llm/release:1.0.0``)."""
    default_serve: bool = False
    """Whether ``commands`` and ``modules`` take ``[serve] MODEL ...``: a command group whose default command
    is the server (``trtllm-serve MODEL``, ``trtllm-serve serve MODEL``)."""
    config_files: tuple[str, ...] = ()
    """Settings whose value is a YAML file the engine reads at start-up (TensorRT-LLM's
    ``--extra_llm_api_options``): ``kvplan/deploy`` reads the file where the deployment's files hold it and
    gives its mapping to ``merge`` under the setting's name."""
    config_keys: frozenset[str] = frozenset()
    """Top-level keys of those config files: a YAML file holding only such keys is the engine's config file, which
    ``kvplan check`` skips (it is read through the deployment that names it)."""
    merge: Callable[[Mapping[str, Any], str | None], "ServeMerge"] | None = field(default=None, compare=False)
    """The settings the engine runs with once its config files are merged with the flags, by the engine's
    precedence rule, given the engine version (None: the default)."""
    model_reader: Callable[[Any, Mapping[str, Any], str | None], tuple[Any, tuple["ServeRemark", ...]]] | None = \
        field(default=None, compare=False)
    """The model as the engine loads it under the settings its flags gave (``--dtype``, runtime ``--quantization``,
    a max model length past the model's own): (the ``ModelSpec`` to plan, remarks). A remark of severity 'error'
    is a start-up the engine refuses."""
    short_pool: Callable[[int, int, Mapping[str, Any]], "ServeRemark | None"] | None = \
        field(default=None, compare=False)
    """What the engine does when its pool (tokens) holds less than one request of the max model length: a remark
    (a warning where it still starts) or None (it refuses, as vLLM does)."""

    hosts: tuple[str, ...] = ()
    """Serving frameworks whose own configuration starts this engine's server with its flags ('ray-serve',
    'llm-d', 'production-stack', 'kserve'): ``kvplan/deploy`` asks ``hosted_by`` what a framework runs."""
    host_modules: tuple[tuple[str, str], ...] = ()
    """(framework, ``python -m`` module) pairs: a framework's module that takes this engine's flags."""
    unread_host_modules: tuple[tuple[str, str], ...] = ()
    """(framework, module) pairs: a framework's worker for this engine that takes the framework's own flags,
    which kvplan does not read (reported, never skipped)."""
    default_image: str = ""
    """The engine's own server image, where a chart leaves the repository out."""
    image_settings: Callable[[str], Mapping[str, Any]] | None = field(default=None, compare=False)
    """The settings the deployment's container image implies (vLLM's own image installs flashinfer), given to
    ``reader`` among the deployment's own, which win; {} for an image that implies nothing."""

    def setting(self, flag: str) -> str | None:
        return dict(self.flags).get(self.normal_flag(flag))

    def normal_flag(self, flag: str) -> str:
        if self.underscores and flag.startswith("--"):
            return "--" + flag[2:].replace("_", "-")
        return flag

    @property
    def default_launcher(self) -> str:
        return f"{self.commands[0]} serve" if self.commands else f"python -m {self.modules[0]}"

    @property
    def serve_words(self) -> tuple[str, ...]:
        """The words that start the server before the model (``<command> serve``), for frameworks that launch it."""
        return (self.commands[0], "serve")

    def runs_image(self, image: str) -> bool:
        return any(image_search(pattern, image) for pattern in self.images)


@dataclass(frozen=True)
class ServeRemark:
    """Something a deployment's flags say that the check reports (a note, or a warning where the plan
    leaves out what the engine does)."""

    severity: str
    code: str
    message: str
    setting: str
    """The setting whose line the finding points at."""


@dataclass(frozen=True)
class ServeMerge:
    """A deployment's settings once the engine's config files are merged with its flags."""

    settings: tuple[tuple[str, Any, str], ...] = ()
    """(kvplan setting, value, how it is spelled: 'extra.yaml: max_seq_len') for each setting a config file
    decides."""
    remarks: tuple[ServeRemark, ...] = ()


@dataclass(frozen=True)
class ServeReading:
    engine_options: tuple[tuple[str, Any], ...] = ()
    """``max_batch``'s ``engine_options`` (sorted pairs: a plan's cache key)."""
    settings: tuple[tuple[str, Any], ...] = ()
    """Budget ``Settings`` fields (``cpu_offload_bytes``)."""
    sharing: bool = True
    """Whether the engine shares common prefixes (vLLM prefix caching, SGLang's radix cache)."""
    remarks: tuple[ServeRemark, ...] = ()
    max_kv_tokens: int | None = None
    """A token cap on the GPU pool (TensorRT-LLM's ``kv_cache_config.max_tokens``): the pool holds the smaller of
    what the memory budget gives and this many tokens rounded up to whole blocks; None: no cap."""
    beam_width: int = 1
    """Beams every request runs with where the engine fixes it (TensorRT-LLM's PyTorch backend: max_beam_width)."""
    parallel: tuple[tuple[str, Any], ...] = ()
    """``max_batch``'s parallel keywords where the engine's flags change what tp and dp mean (sorted pairs of tp,
    dp, expert_parallel): SGLang's ``--enable-dp-attention`` runs attention over tp / dp ranks, TensorRT-LLM's
    ``enable_attention_dp`` over one; their MoE layers span all of them."""


SHOWN_CHARS = 40
"""How much of a value a message repeats: a 50,000-character environment variable is named, not echoed."""


def shown(value: object, *, quote: bool = True) -> str:
    """``value`` as a message repeats it: its repr (its text with ``quote=False``), cut to :data:`SHOWN_CHARS`
    characters with "..." after (the rest says nothing a user needs to find the value)."""
    if isinstance(value, bool):  # as the JSON or YAML that held it spells it
        return "true" if value else "false"
    if isinstance(value, str):
        head = value[:SHOWN_CHARS]
        return (repr(head) if quote else head) + ("..." if len(value) > SHOWN_CHARS else "")
    import reprlib

    short = reprlib.Repr()  # bounded work on a large list or dict: only what is shown is formatted
    short.maxlevel, short.maxdict, short.maxlist, short.maxtuple = 3, 6, 6, 6
    short.maxstring = short.maxlong = short.maxother = SHOWN_CHARS
    try:
        text = short.repr(value)
    except (ValueError, RecursionError):  # an int past Python's digit limit
        text = f"<{type(value).__name__}>"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


def json_object(raw: object, flag: str, field: str) -> dict[str, Any]:
    """A flag whose value is a JSON object (``--speculative-config``, ``--kv-transfer-config``), refused
    by name when it is not one, as the engine's own argument parser refuses it. Parsed by
    ``kvplan.safe_io.parse_json``: bounded depth and integer length, whatever the deployment file holds."""
    from kvplan.errors import KvplanError, UsageError
    from kvplan.safe_io import json_kind, parse_json

    if isinstance(raw, dict):  # already parsed (a kvplan deployment file, a library caller)
        value: Any = raw
    else:
        try:
            value = parse_json(str(raw), flag)
        except KvplanError as exc:
            detail = str(exc).removeprefix(flag).lstrip(":").strip()  # "1:5: invalid JSON: ..."
            raise UsageError(f"{flag} {shown(str(raw))}: {detail}", field=field) from None
    if not isinstance(value, dict):
        raise UsageError(f"{flag}: not a JSON object ({json_kind(value)})", field=field)
    return value


def loaded_with_remark(spec: Any, dtype: str, method: str | None, source: str, how: str,
                       remarks: list[ServeRemark]) -> Any:
    """The spec with the weights the engine loads (``kvplan.budgets.runtime_weights.loaded_weights``), the
    reading said as one ``weights-dtype`` note (``how``: the dtype's own reading) where there is one to say."""
    from kvplan.budgets.runtime_weights import loaded_weights

    loaded, note = loaded_weights(spec, dtype, method, source)
    if how or note:
        remarks.append(ServeRemark("note", "weights-dtype", "; ".join(t for t in (how, note) if t),
                                   "quantization" if method else "dtype"))
    return loaded
