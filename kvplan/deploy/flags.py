"""Engine command lines, parsed as the engines parse them.

Recognized launchers: ``vllm serve MODEL ...``, ``python -m vllm.entrypoints.openai.api_server ...``
and ``python -m sglang.launch_server ...`` (any ``python``/``python3.x``, behind ``exec``, ``env``,
``VAR=value`` prefixes, ``sh -c '...'``). Flags are read like argparse: ``--flag value`` and
``--flag=value``; vLLM also accepts underscores (``--max_model_len``) and its short ``-tp``/``-pp``/``-dp``.
A value with an environment substitution (``$VAR``, ``${VAR}``, Kubernetes' ``$(VAR)``) that cannot be
resolved from what the file itself defines is kept as unknown and reported.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from kvplan.engines.serve import ServeFlags, serve_flags, serving_engines, shown
from kvplan.errors import ConfigError


@dataclass
class Token:
    text: str
    line: int | None = None


class FlagError(ConfigError):
    """A flag without its value, or a value the engine would reject: carries the line."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Option:
    key: str
    """kvplan's setting name (max_model_len, tp, ...), or 'model'."""
    flag: str
    """As written: --max-model-len."""
    value: str
    line: int | None
    unresolved: tuple[str, ...] = ()


@dataclass
class Invocation:
    engine: str
    launcher: str
    line: int | None
    model: Option | None = None
    options: dict[str, Option] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)
    """Flags kvplan does not use (kept for the report)."""
    environment: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    """The server's environment as far as the file says it: name -> (value, line)."""


_BOOLEAN_KEYS = {"enforce_eager"}
_BOOLEAN_FLAGS = {
    "--trust-remote-code", "--enforce-eager", "--disable-log-requests", "--disable-log-stats",
    "--enable-prefix-caching", "--enable-chunked-prefill", "--enable-auto-tool-choice", "--enable-lora",
    "--disable-custom-all-reduce", "--enable-expert-parallel", "--skip-tokenizer-init", "--disable-cuda-graph",
    "--enable-torch-compile", "--disable-radix-cache", "--enable-metrics", "--enable-dp-attention",
    "--headless", "--enable-log-requests", "--async-scheduling", "--disable-frontend-multiprocessing",
}
_BOOLEAN_PREFIXES = ("--enable-", "--disable-", "--no-")

_PYTHON = re.compile(r"^(.*/)?python[0-9.]*$")


# ----------------------------------------------------------------------------- substitutions

# a default stops at the next '${' (not only at '}'): each '${' scans its own default, not the rest of the text
# ('${a:-' a million times, with no '}', was a quadratic search)
_SUBST = re.compile(r"\$\((?P<k8s>[A-Za-z_][A-Za-z0-9_]*)\)"
                    r"|\$\{(?P<brace>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-=?+])(?P<default>(?:[^}$]|\$(?!\{))*))?\}"
                    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")


def substitute(text: str, env: dict[str, str], *, k8s: bool = False) -> tuple[str, tuple[str, ...]]:
    """Replace ``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` (and ``$(VAR)`` where ``k8s``) from ``env``.
    Returns the text and the names left unresolved (kept as written)."""
    missing: list[str] = []

    def repl(m: re.Match) -> str:
        if m.group("k8s"):
            if not k8s:
                return m.group(0)
            name = m.group("k8s")
            if name in env:
                return env[name]
            missing.append(name)
            return m.group(0)
        name = m.group("brace") or m.group("plain")
        op, default = m.group("op"), m.group("default")
        value = env.get(name)
        if op in (":-", ":=") and not value:
            return default or ""
        if op in ("-", "=") and value is None:
            return default or ""
        if value is not None:
            return value
        missing.append(name)
        return m.group(0)

    if "$" not in text:
        return text, ()
    if k8s:
        text_out = _SUBST.sub(repl, text.replace("$$", "\0"))  # $$(VAR) is a literal $(VAR) in Kubernetes
        return text_out.replace("\0", "$"), tuple(dict.fromkeys(missing))
    return _SUBST.sub(repl, text), tuple(dict.fromkeys(missing))


# ----------------------------------------------------------------------------- shell text

_SEPARATORS = {";", "&&", "||", "|", "&", "\n"}


def shell_commands(text: str, first_line: int | None) -> list[list[Token]]:
    """Split shell text into simple commands (at ``;``, ``&&``, ``||``, ``|``, newlines), each a list
    of tokens with the line each starts on. Backslash-newline continuations join lines."""
    commands: list[list[Token]] = []
    physical = text.split("\n")
    i = 0
    while i < len(physical):
        start = i
        segments = [physical[i]]
        while segments[-1].rstrip().endswith("\\") and i + 1 < len(physical):
            segments[-1] = segments[-1].rstrip()[:-1]
            i += 1
            segments.append(physical[i])
        i += 1
        tokens: list[Token] = []
        ok = True
        for offset, segment in enumerate(segments):
            words = _split_words(segment)
            if words is None:
                ok = False
                break
            line = None if first_line is None else first_line + start + offset
            tokens.extend(Token(w, line) for w in words)
        if not ok:  # a quote spans lines: tokenize the joined text, all on the first line
            words = _split_words(" ".join(segments)) or []
            line = None if first_line is None else first_line + start
            tokens = [Token(w, line) for w in words]
        current: list[Token] = []
        for tok in tokens:
            if tok.text in _SEPARATORS:
                if current:
                    commands.append(current)
                current = []
            else:
                current.append(tok)
        if current:
            commands.append(current)
    return commands


_PLAIN_WORDS = re.compile(r"[^'\"\\#;&|]*")  # no quote, escape, comment or separator: shlex only splits on blanks
_BLANKS = re.compile(r"[ \t\r\n]+")  # shlex's whitespace


def _split_words(text: str) -> list[str] | None:
    if _PLAIN_WORDS.fullmatch(text):  # most lines: str split, without shlex's character-by-character loop
        return [w for w in _BLANKS.split(text) if w]
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return None


_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)


def shell_assignments(command: list[Token], env: dict[str, str]) -> bool:
    """Record ``VAR=value`` / ``export VAR=value`` commands in ``env``; True when the command was one."""
    words = [t.text for t in command]
    if words[:1] in (["export"], ["readonly"], ["declare"], ["local"]):
        words = [w for w in words[1:] if not w.startswith("-")]
    if not words or not all(_ASSIGN.match(w) for w in words):
        return False
    for w in words:
        m = _ASSIGN.match(w)
        assert m
        value, missing = substitute(m.group(2), env)
        if not missing:
            env[m.group(1)] = value
    return True


# ----------------------------------------------------------------------------- invocations

def find_invocation(argv: list[Token], env: dict[str, str] | None = None, *, k8s: bool = False,
                    implicit: ServeFlags | None = None) -> Invocation | None:
    """The engine invocation in ``argv`` (a container's command + args, or one shell command), or None.

    ``implicit``: the server an image runs when argv holds only arguments (``vllm serve`` for
    vllm/vllm-openai). ``sh -c SCRIPT`` is searched inside its script.
    """
    env = dict(env or {})
    words = [t.text for t in argv]
    # sh -c 'script'
    if words and re.match(r"^(.*/)?(ba|da|z)?sh$", words[0]):
        for j, w in enumerate(words[1:], start=1):
            if w.startswith("-") and "c" in w[1:] and j + 1 < len(argv):
                script = argv[j + 1]
                for command in shell_commands(script.text, script.line):
                    if shell_assignments(command, env):
                        continue
                    found = find_invocation(command, env, k8s=k8s)
                    if found is not None:
                        return found
                return None
        return None
    start = _launcher(words)
    if start is None:
        if implicit is not None and (not words or words[0].startswith("-") or "/" in words[0]):
            line = argv[0].line if argv else None
            inv = _parse(implicit, implicit.default_launcher, [], argv, env, k8s, line)
            inv.environment = {name: (value, None) for name, value in env.items()}
            return inv
        return None
    serve, launcher, index = start
    if serve.default_serve and not launcher.endswith(" serve") and words[index:index + 1] == ["serve"]:
        index += 1  # python -m tensorrt_llm.commands.serve serve MODEL: the subcommand named
    line = argv[index - 1].line if index > 0 else (argv[0].line if argv else None)
    inv = _parse(serve, launcher, argv[:index], argv[index:], env, k8s, line)
    inv.environment = {name: (value, None) for name, value in env.items()}
    for tok in argv[:index]:  # VAR=value prefixes: the server's environment only
        m = _ASSIGN.match(tok.text)
        if m:
            inv.environment[m.group(1)] = (substitute(m.group(2), env, k8s=k8s)[0], tok.line)
    return inv


def image_server(image: object) -> ServeFlags | None:
    """The server a container image runs by default (vllm/vllm-openai: ``vllm serve``), if kvplan knows it."""
    if not isinstance(image, str):
        return None
    return next((serve for serve in serving_engines() if serve.runs_image(image)), None)


def _launcher(words: list[str]) -> tuple[ServeFlags, str, int] | None:
    i = 0
    wrappers = {w for serve in serving_engines() for w in serve.wrappers}
    while i < len(words):  # exec / env / VAR=value / nohup prefixes, and the engines' own launch wrappers
        w = words[i]
        if w in ("exec", "env", "nohup", "time", "uv", "run") or _ASSIGN.match(w) or (words[i - 1:i] == ["env"]
                                                                                      and w.startswith("-")) \
                or w.rsplit("/", 1)[-1] in wrappers:
            i += 1
            continue
        break
    rest = words[i:]
    servers = serving_engines()
    if len(rest) >= 2 and rest[1] == "serve":
        for serve in servers:
            for command in serve.commands:
                if re.match(rf"^(.*/)?{re.escape(command)}$", rest[0]):
                    return serve, f"{command} serve", i + 2
    for serve in servers:  # a command group whose default command is the server: trtllm-serve MODEL
        for command in serve.commands if serve.default_serve else ():
            if rest and re.match(rf"^(.*/)?{re.escape(command)}$", rest[0]) and _default_command(rest[1:]):
                return serve, command, i + 1
    if rest and _PYTHON.match(rest[0]):
        for j in range(1, len(rest) - 1):
            if rest[j] == "-m":
                module = rest[j + 1]
                for serve in servers:
                    if module in serve.modules and (not serve.default_serve or _default_command(rest[j + 2:])):
                        return serve, f"python -m {module}", i + j + 2
                return None
            if not rest[j].startswith("-"):
                return None
    return None


def _default_command(args: list[str]) -> bool:
    """Whether a command group with a default server command runs the server: ``serve`` or no subcommand
    (trtllm-serve's ``DefaultGroup`` treats a first argument that names no subcommand as ``serve``'s MODEL)."""
    return not args or args[0] == "serve" or args[0] not in _OTHER_SUBCOMMANDS


# trtllm-serve's other subcommands (tensorrt_llm/commands/serve.py ``main``): not the OpenAI server kvplan reads
_OTHER_SUBCOMMANDS = {"grpc", "disaggregated", "disaggregated_mpi_worker", "mm_embedding_serve", "--help", "-h"}


def _parse(serve: ServeFlags, launcher: str, head: list[Token], args: list[Token], env: dict[str, str], k8s: bool,
           line: int | None) -> Invocation:
    inv = Invocation(engine=serve.engine, launcher=launcher, line=line)
    env = dict(env)
    for tok in head:  # VAR=value before the command (also behind env)
        if m := _ASSIGN.match(tok.text):
            value, missing = substitute(m.group(2), env, k8s=k8s)
            if not missing:
                env[m.group(1)] = value
    positional_model = launcher.endswith(" serve") or serve.default_serve
    i = 0
    while i < len(args):
        tok = args[i]
        text = tok.text
        if text == "--":
            i += 1
            continue
        if not text.startswith("-") or _is_number(text):
            if positional_model and inv.model is None and "model" not in inv.options:
                value, missing = substitute(text, env, k8s=k8s)
                inv.model = Option("model", "MODEL (positional)", value, tok.line, missing)
            i += 1
            continue
        flag, has_eq, inline = text.partition("=")
        flag = serve.normal_flag(flag)
        key = serve.setting(flag)
        boolean = (key in serve.booleans or key in _BOOLEAN_KEYS or flag in _BOOLEAN_FLAGS
                   or (key is None and flag.startswith(_BOOLEAN_PREFIXES)))
        if boolean:
            if key is not None:
                value = inline if has_eq else "true"
                inv.options[key] = Option(key, flag, value, tok.line)
            else:
                inv.others.append(flag)
            i += 1
            continue
        if has_eq:
            raw, i = inline, i + 1
        elif i + 1 < len(args) and (not args[i + 1].text.startswith("-") or _is_number(args[i + 1].text)):
            raw, i = args[i + 1].text, i + 2
        elif key is not None:
            raise FlagError(f"{flag} has no value (the engine would refuse to start)", tok.line)
        else:
            inv.others.append(flag)
            i += 1
            continue
        if key is None:
            inv.others.append(flag)
            continue
        if raw == "" and key is not None:
            raise FlagError(f"{flag} has an empty value", tok.line)
        value, missing = substitute(raw, env, k8s=k8s)
        option = Option(key, flag, value, tok.line, missing)
        if key == "model":
            inv.model = option
        else:
            inv.options[key] = option  # argparse: the last one wins
    return inv


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------- values

_INT_KEYS = ("tp", "pp", "dp", "max_num_seqs", "max_num_batched_tokens", "block_size", "num_speculative_tokens",
             "hicache_size", "speculative_num_draft_tokens", "cpu_offload_gb", "speculative_num_steps",
             "speculative_eagle_topk")
# counts a server refuses below 1 (vLLM's and SGLang's argument checks): a 0 or -5 here is a typo in the
# deployment, invalid input (exit 2), not a deployment that does not fit (exit 1)
_POSITIVE_KEYS = frozenset(_INT_KEYS) - {"hicache_size", "cpu_offload_gb"} | {"max_model_len"}
_MAX_INT_SETTING = 1 << 40  # a trillion tokens, sequences or GiB: past any deployment; 10^4000 is a typo
_FLOAT_KEYS = ("gpu_memory_utilization", "mem_fraction_static")
_MAX_FLOAT_SETTING = 1 << 20  # GiB sizes and ratios: 1 PiB of host memory, a 10^6 ratio, beyond any machine


def apply_invocation(dep: "Deployment", inv: Invocation) -> None:  # noqa: F821 - see the import below
    """Fill a deployment's engine, model and settings from a parsed command line."""
    from kvplan.deploy.deployment import Unknown, Value

    dep.engine = inv.engine
    if inv.model is not None:
        if inv.model.unresolved:
            dep.unknowns.append(Unknown(inv.model.flag, inv.model.value, inv.model.line, inv.model.unresolved))
        else:
            dep.model = Value(inv.model.value, inv.model.line, inv.model.flag, inv.model.value)
    for key, opt in inv.options.items():
        if opt.unresolved:
            dep.unknowns.append(Unknown(opt.flag, opt.value, opt.line, opt.unresolved))
            continue
        if key == "config":
            dep.notes.append(f"{opt.flag} {shown(opt.value, quote=False)}: settings in the engine's config file are "
                             "not read")
            continue
        dep.settings[key] = Value(convert(key, opt.value, opt.flag, opt.line, inv.engine), opt.line, opt.flag, opt.value)
    serve = serve_flags(inv.engine)
    for name, (value, line) in sorted(inv.environment.items()):  # the variables the engine reads
        at = line if line is not None else inv.line
        if serve is None:
            continue
        if name in serve.environment:  # VLLM_USE_V1, VLLM_USE_SIMPLE_KV_OFFLOAD: read by the engine's flags
            dep.settings[name] = Value(value, at, f"{name}={value}", value)
        elif serve.env_prefixes and name.startswith(serve.env_prefixes):  # LMCACHE_*: LMCache's settings
            dep.settings[name.lower()] = Value(value, at, name, value)


def convert(key: str, raw: str, flag: str, line: int | None, engine: str = "vllm") -> object:
    """A flag's text as the engine reads it; FlagError where the engine would refuse it."""
    from kvplan.errors import KvplanError
    from kvplan.hardware import parse_bytes

    serve = serve_flags(engine)
    parse_int = serve.parse_int if serve is not None else int

    def count(text: str) -> int:
        value = parse_int(text)
        if not (1 if key in _POSITIVE_KEYS else 0) <= value <= _MAX_INT_SETTING:
            raise ValueError(text)
        return value

    text = str(raw).strip()
    try:
        if key == "max_model_len":
            if text.lower() == "auto" or text == "-1":
                return "auto"
            return count(text)
        if serve is not None and key in serve.floats:  # argparse type=float: GiB sizes, ratios
            number = float(text)
            if not 0 <= number <= _MAX_FLOAT_SETTING:  # nan, inf and 1e300 (int(1e300 x GiB) overflows)
                raise ValueError(text)
            return number
        if key in _INT_KEYS:
            return count(text)
        if key in _FLOAT_KEYS:
            return float(text)
        if key == "enforce_eager" or (serve is not None and key in serve.booleans):
            return text.lower() not in ("false", "0", "no")
        if key == "kv_cache_memory":
            try:
                return parse_int(text)
            except ValueError:
                return parse_bytes(text, flag.lstrip("-"))
        return text
    except (ValueError, OverflowError, KvplanError):
        why = "not a valid value"
        if key in _INT_KEYS or key == "max_model_len":
            low = 1 if key in _POSITIVE_KEYS else 0
            why += f" (a whole number from {low} to {_MAX_INT_SETTING:,})"
        raise FlagError(f"{flag} {shown(str(raw), quote=False)}: {why}", line) from None
