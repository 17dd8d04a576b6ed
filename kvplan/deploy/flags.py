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
from collections.abc import Iterator

from kvplan.deploy.report import Finding
from kvplan.engines import DEFAULT_ENGINE
from kvplan.engines.serve import ServeFlags, serve_flags, serving_engines, shown
from kvplan.errors import ConfigError
from kvplan.lazy_re import lazy_pattern
from kvplan.record import dataclass, field


@dataclass
class Token:
    text: str
    line: int | None = None
    shell: bool = False
    """Whether the word comes from shell text (a script, ``sh -c``): a shell evaluates ``$((...))`` in it."""


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

_PYTHON = lazy_pattern(r"^(.*/)?python[0-9.]*$")


def _is_shell(word: str) -> bool:
    """``re.match(r"^(.*/)?(ba|da|z)?sh$", word)``, told as ``_is_python`` tells its pattern."""
    if "\n" in word:
        return re.match(r"^(.*/)?(ba|da|z)?sh$", word) is not None
    return word.rpartition("/")[2] in ("sh", "bash", "dash", "zsh")


def _names(word: str, command: str) -> bool:
    """``re.match(rf"^(.*/)?{re.escape(command)}$", word)``: ``word`` is the command, or a path ending in it."""
    if "\n" in word or "\n" in command:
        return re.match(rf"^(.*/)?{re.escape(command)}$", word) is not None
    return word == command or word.endswith("/" + command)


def _is_python(word: str) -> bool:
    """``_PYTHON.match(word)``: the name after the last ``/`` is ``python`` and version characters (a word without a
    newline, which ``.`` and ``$`` treat apart, is told without compiling the pattern)."""
    if "\n" in word:
        return _PYTHON.match(word) is not None
    base = word.rpartition("/")[2]
    return base.startswith("python") and all(c in "0123456789." for c in base[6:])


# ----------------------------------------------------------------------------- substitutions

# a default stops at the next '${' (not only at '}'): each '${' scans its own default, not the rest of the text
# ('${a:-' a million times, with no '}', was a quadratic search). '$((' runs to the next parenthesis only
# ([^()]*, then '))'): each '$((' scans its own run, which no other '$((' starts inside, so the search is linear;
# arithmetic with inner parentheses is left unknown.
_SUBST = lazy_pattern(r"\$\(\((?P<arith>[^()]*)\)\)"
                    r"|\$\((?P<k8s>[A-Za-z_][A-Za-z0-9_]*)\)"
                    r"|\$\{(?P<brace>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-=?+])(?P<default>(?:[^}$]|\$(?!\{))*))?\}"
                    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*)")
_KUBELET = lazy_pattern(r"\$\$|\$\((?P<name>[A-Za-z_][A-Za-z0-9_]*)\)")
_VAR_NAMES = lazy_pattern(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def substitute(text: str, env: dict[str, str], *, k8s: bool = False,
               arithmetic: bool = False) -> tuple[str, tuple[str, ...]]:
    """Replace ``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` (and ``$(VAR)`` where ``k8s``) from ``env``;
    ``arithmetic`` (shell text): ``$((...))`` too, evaluated as bash does (:func:`arithmetic_value`).
    Returns the text and the names left unresolved (kept as written)."""
    missing: list[str] = []

    def repl(m: re.Match[str]) -> str:
        if m.group("arith") is not None:
            if not arithmetic:
                return m.group(0)
            value, unknown = arithmetic_value(m.group("arith"), env)
            if value is None:
                missing.extend(unknown)
                return m.group(0)
            return str(value)
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


def kubelet_expand(text: str, env: dict[str, str]) -> str:
    """What the kubelet does to a container's command and args before anything runs: ``$(VAR)`` from the
    container's env (an undefined one is kept as written), ``$$`` to ``$``; nothing else (``${VAR}`` and
    ``$((...))`` are the shell's, later, with the script's own variables)."""
    if "$" not in text:
        return text

    def repl(m: re.Match[str]) -> str:
        name = m.group("name")
        if name is None:
            return "$"
        return env.get(name, m.group(0))

    return _KUBELET.sub(repl, text)


# ----------------------------------------------------------------------------- shell arithmetic

_ARITH_MAX_CHARS = 256  # '$((LWS_GROUP_SIZE * DP_SIZE_LOCAL))' is 30: longer is not a deployment's arithmetic
_ARITH_TOKEN = lazy_pattern(r"(?P<num>[0-9]{1,19})(?![0-9A-Za-z_])|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*/%])")
_ARITH_ADJACENT = lazy_pattern(r"[0-9A-Za-z_][ \t\n]+[0-9A-Za-z_]")  # '1 2': two operands in a row, bash's error
_INT64 = (1 << 63) - 1  # bash's arithmetic is on signed 64-bit integers (it wraps past them: said unknown here)


def arithmetic_value(expr: str, env: dict[str, str]) -> tuple[int | None, tuple[str, ...]]:
    """The value of a shell arithmetic expansion ``$((expr))``, as bash computes it, or (None, what is unknown).

    Read: decimal integers, variables (``NAME``, ``$NAME``, ``${NAME}``, ``${NAME:-default}``) whose value is a
    decimal integer, unary ``+ -``, ``* / %`` before ``+ -``, left to right, division truncating toward zero (C's,
    as bash). Anything else (an undefined variable: bash would take it as 0, but a value the file does not give is
    not known; octal or hex literals, ``**``, comparisons, parentheses, a value past 64 bits, a division by zero)
    leaves the value unknown: the names it uses, or the expression."""
    whole = f"$(({expr}))"
    shown_expr = whole if len(whole) <= 40 else whole[:37] + "..."
    if len(expr) > _ARITH_MAX_CHARS:
        return None, (shown_expr,)
    text, missing = substitute(expr, env)  # $VAR and ${VAR:-0} inside: the shell expands them first
    if missing:
        return None, missing
    if _ARITH_ADJACENT.search(text):
        return None, (shown_expr,)
    text = "".join(text.split())  # blanks only separate tokens (two operands in a row were refused above)
    tokens: list[tuple[str, str]] = []
    pos = 0
    unknown: list[str] = []
    while pos < len(text):
        m = _ARITH_TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            return None, (shown_expr,)
        pos = m.end()
        if m.group("num") is not None:
            digits = m.group("num")
            if len(digits) > 1 and digits.startswith("0"):  # octal in bash: not a deployment's number
                return None, (shown_expr,)
            tokens.append(("n", digits))
        elif m.group("name") is not None:
            name = m.group("name")
            value = env.get(name)
            if value is None:
                unknown.append(name)
                tokens.append(("n", "0"))
                continue
            literal = value.strip()
            if not re.fullmatch(r"-?(?:0|[1-9][0-9]{0,18})", literal):  # bash would evaluate it as an expression
                return None, (name,)
            tokens.append(("n", literal))
        else:
            tokens.append(("o", m.group("op")))
    if unknown:
        return None, tuple(dict.fromkeys(unknown))
    try:
        value = _arith_sum(tokens)
    except ValueError:
        return None, (shown_expr,)
    return value, ()


def _arith_sum(tokens: list[tuple[str, str]]) -> int:
    """Evaluate ``term (('+'|'-') term)*`` over the tokens (ValueError where bash would fail or wrap)."""
    terms: list[list[tuple[str, str]]] = [[]]
    signs = [1]
    for i, (kind, text) in enumerate(tokens):
        # a binary + or - follows a number; after an operator (or first) it is a unary sign of the next term
        if kind == "o" and text in "+-" and terms[-1] and terms[-1][-1][0] == "n":
            terms.append([])
            signs.append(1 if text == "+" else -1)
        else:
            terms[-1].append((kind, text))
    total = 0
    for sign, term in zip(signs, terms):
        total += sign * _arith_product(term)
        _check64(total)
    return total


def _arith_product(tokens: list[tuple[str, str]]) -> int:
    """``factor (('*'|'/'|'%') factor)*`` where a factor is a number after any unary signs."""
    if not tokens:
        raise ValueError("empty")
    value: int | None = None
    op: str | None = None
    sign = 1
    expect_number = True
    for kind, text in tokens:
        if expect_number:
            if kind == "o" and text in "+-":
                sign = -sign if text == "-" else sign
                continue
            if kind != "n":
                raise ValueError(text)
            number = sign * int(text)
            sign = 1
            if value is None:
                value = number
            elif op == "*":
                value *= number
            elif number == 0:  # bash: "division by 0"
                raise ValueError("division by zero")
            else:
                quotient = abs(value) // abs(number) * (1 if (value >= 0) == (number >= 0) else -1)
                value = quotient if op == "/" else value - quotient * number
            _check64(value)
            expect_number = False
        else:
            if kind != "o" or text not in "*/%":
                raise ValueError(text)
            op = text
            expect_number = True
    if expect_number or value is None:
        raise ValueError("trailing operator")
    return value


def _check64(value: int) -> None:
    if not -_INT64 - 1 <= value <= _INT64:
        raise ValueError("past 64 bits")


# ----------------------------------------------------------------------------- shell text

_SEPARATORS = {";", "&&", "||", "|", "&", "\n"}


def shell_commands(text: str, first_line: int | None) -> list[list[Token]]:
    """Split shell text into simple commands (at ``;``, ``&&``, ``||``, ``|``, newlines), each a list
    of tokens with the line each starts on. Backslash-newline continuations join lines; a quoted word may span
    lines (``--kv-transfer-config '{\\n "kv_connector": ...}'``), its newlines kept, as the shell keeps them;
    ``$(( a * b ))`` is one word. A quote never closed drops that command (the shell refuses it too)."""
    commands: list[list[Token]] = []
    physical = text.split("\n")
    i = 0
    while i < len(physical):
        # chunks: (text, index of its first physical line); a chunk ends where a line ends outside quotes
        chunks: list[tuple[str, int]] = []
        lines = [physical[i]]
        chunk_start = i
        state = _quote_state(physical[i], None)
        closed = True
        while True:
            if state is not None:  # inside a quote: the newline is part of the word
                if i + 1 >= len(physical):
                    closed = False
                    i += 1
                    break
                i += 1
                lines.append(physical[i])
                state = _quote_state(physical[i], state)
                continue
            last = lines[-1].rstrip()
            if last.endswith("\\") and i + 1 < len(physical):  # continuation: the next line joins this command
                lines[-1] = last[:-1]
                chunks.append(("\n".join(lines), chunk_start))
                i += 1
                lines, chunk_start = [physical[i]], i
                state = _quote_state(physical[i], None)
                continue
            chunks.append(("\n".join(lines), chunk_start))
            i += 1
            break
        if not closed:
            continue
        tokens: list[Token] = []
        for chunk, start in chunks:
            if chunk.lstrip().startswith("#"):  # a comment line: no words (and no shlex pass over it)
                continue
            words = _split_words(_one_word_arithmetic(chunk))
            if words is None:
                tokens = []
                break
            line = None if first_line is None else first_line + start
            tokens.extend(Token(w, line, shell=True) for w in words)
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


_ARITH_WORD = lazy_pattern(r"\$\(\(([^()]*)\)\)")  # as in _SUBST: linear


def _first_of(line: str, chars: str, start: int) -> int:
    """The index of the first of ``chars`` in ``line`` from ``start`` (-1: none), as a search for the class of them
    finds it: one ``find`` per character (linear), no pattern to compile."""
    found = -1
    for ch in chars:
        j = line.find(ch, start, found if found >= 0 else len(line))
        if j >= 0:
            found = j
    return found


def _quote_state(line: str, state: str | None) -> str | None:
    """The quote open at the end of ``line`` (``'``, ``"`` or None), given the one open at its start: a linear
    scan (a regex search to each quote, escape or comment), as the shell reads quotes (no escape inside ``'``)."""
    i, n = 0, len(line)
    while i < n:
        if state is None:
            j = _first_of(line, "'\"\\#", i)
            if j < 0:
                return None
            ch = line[j]
            if ch == "\\":
                i = j + 2
            elif ch == "#":
                if j == 0 or line[j - 1] in " \t;&|(":  # a comment: a quote in it ("don't") opens nothing
                    return None
                i = j + 1
            else:
                state, i = ch, j + 1
        elif state == "'":
            j = line.find("'", i)
            if j < 0:
                return state
            state, i = None, j + 1
        else:
            j = _first_of(line, '"\\', i)
            if j < 0:
                return state
            if line[j] == "\\":
                i = j + 2
            else:
                state, i = None, j + 1
    return state


def _one_word_arithmetic(text: str) -> str:
    """``$(( A * B ))`` without its blanks, so that splitting words keeps it one word (the shell does)."""
    if "$((" not in text:
        return text
    return _ARITH_WORD.sub(lambda m: "$((" + "".join(m.group(1).split()) + "))", text)


_NOT_PLAIN = "'\"\\#;&|"  # a quote, escape, comment or separator: without them shlex only splits on blanks


def _split_words(text: str) -> list[str] | None:
    if not any(c in text for c in _NOT_PLAIN):  # most lines: str split, without shlex's character-by-character loop
        return [w for w in text.replace("\t", " ").replace("\r", " ").replace("\n", " ").split(" ") if w]  # shlex's
    if not any(c in text for c in _BY_SHLEX):  # '--model "$MODEL"', 'a; b': without importing shlex
        return _double_quoted_words(text)
    import shlex  # blanks (space, tab, CR, LF) alone; shlex itself only where a line quotes, escapes or separates

    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return None


_BY_SHLEX = "'\\#"  # a single quote, an escape or a comment: shlex's own states, left to it


def _double_quoted_words(text: str) -> list[str] | None:
    """The words shlex (posix, whitespace_split, punctuation ``;&|``) makes of a text whose only special characters
    are double quotes and separators: blanks (space, tab, CR, LF) split words outside quotes, the quotes are removed
    (``""`` is an empty word), a run of ``;&|`` outside quotes is a word of its own, and an unclosed quote is no
    words (None, as shlex's ValueError is read). Importing shlex (a pattern compiled with it) and its loop over each
    character cost a check of a script or pod command ~0.6 ms."""
    words: list[str] = []
    parts = text.split('"')
    if len(parts) % 2 == 0:  # an odd number of quotes: one is not closed
        return None
    word: list[str] | None = None  # the word being read (None: between words)
    for i, part in enumerate(parts):
        if i % 2:  # inside quotes: kept whole, blanks and separators too
            word = [*(word or ()), part]
            continue
        pieces = part.replace("\t", " ").replace("\r", " ").replace("\n", " ").split(" ")
        for j, piece in enumerate(pieces):
            if j:  # a blank: the word before it ends
                if word is not None:
                    words.append("".join(word))
                word = None
            for run, separator in _separator_runs(piece):
                if separator:  # ends the word before it, and is a word itself
                    if word is not None:
                        words.append("".join(word))
                    words.append(run)
                    word = None
                else:
                    word = [*(word or ()), run]
    if word is not None:
        words.append("".join(word))
    return words


def _separator_runs(piece: str) -> list[tuple[str, bool]]:
    """``piece`` (no blank) cut into runs of ``;&|`` and runs of other characters, each with whether it separates."""
    if not any(c in piece for c in ";&|"):
        return [(piece, False)] if piece else []
    runs: list[tuple[str, bool]] = []
    for c in piece:
        separator = c in ";&|"
        if runs and runs[-1][1] == separator:
            runs[-1] = (runs[-1][0] + c, separator)
        else:
            runs.append((c, separator))
    return runs


_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")


def _assignment(text: str) -> tuple[str, str] | None:
    """(name, value) of a shell ``NAME=value`` word, as ``^([A-Za-z_][A-Za-z0-9_]*)=(.*)$`` (re.S) splits it (the
    name runs to the first ``=``), without a pattern to compile; None where it is no assignment."""
    name, eq, value = text.partition("=")
    if eq and name and name[0] in _NAME_START and _NAME_CHARS.issuperset(name):
        return name, value
    return None


def script_invocations(script: str, first_line: int | None, env: dict[str, str], path: str,
                       findings: list[Finding]) -> Iterator[tuple[list[Token], Invocation]]:
    """Each engine command of a shell script with its invocation, the script's own assignments followed in ``env``
    (updated in place, as the shell would); a command whose flags the engine would refuse is one invalid finding."""
    for command in shell_commands(script, first_line):
        if shell_assignments(command, env):
            continue
        try:
            inv = find_invocation(command, env)
        except FlagError as exc:
            findings.append(Finding("error", "invalid-input", str(exc), path, exc.line, invalid_input=True))
            continue
        if inv is not None:
            yield command, inv


def shell_assignments(command: list[Token], env: dict[str, str]) -> bool:
    """Record ``VAR=value`` / ``export VAR=value`` commands in ``env``; True when the command was one."""
    words = [t.text for t in command]
    if words[:1] in (["export"], ["readonly"], ["declare"], ["local"]):
        words = [w for w in words[1:] if not w.startswith("-")]
    if not words or not all(_assignment(w) for w in words):
        return False
    for w in words:
        m = _assignment(w)
        assert m
        value, missing = substitute(m[1], env, arithmetic=True)
        if not missing:
            env[m[0]] = value
    return True


# ----------------------------------------------------------------------------- invocations

def find_invocation(argv: list[Token], env: dict[str, str] | None = None, *, k8s: bool = False,
                    implicit: ServeFlags | None = None,
                    modules: dict[str, str] | None = None) -> Invocation | None:
    """The engine invocation in ``argv`` (a container's command + args, or one shell command), or None.

    ``implicit``: the server an image runs when argv holds only arguments (``vllm serve`` for
    vllm/vllm-openai). ``sh -c SCRIPT`` is searched inside its script. ``modules``: more ``python -m`` modules
    that run an engine with that engine's flags (a platform's wrapper: ``dynamo.vllm`` -> ``vllm``).
    """
    env = dict(env or {})
    words = [t.text for t in argv]
    # sh -c 'script'
    if words and _is_shell(words[0]):
        for j, w in enumerate(words[1:], start=1):
            if w.startswith("-") and "c" in w[1:] and j + 1 < len(argv):
                at = j + 2 if words[j + 1] == "--" and j + 2 < len(argv) else j + 1  # bash -c -- SCRIPT (AIBrix)
                script = argv[at]
                params = argv[at + 2:]  # sh -c SCRIPT $0 $1 ...: "$@" in the script is $1 ... (KServe's runtimes)
                for command in shell_commands(script.text, script.line):
                    if shell_assignments(command, env):
                        continue
                    if params:
                        command = [p for t in command for p in (params if t.text in ("$@", "${@}") else [t])]
                    found = find_invocation(command, env, k8s=k8s, modules=modules)
                    if found is not None:
                        return found
                return None
        return None
    start = _launcher(words, modules)
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
        m = _assignment(tok.text)
        if m:
            inv.environment[m[0]] = (substitute(m[1], env, k8s=k8s, arithmetic=tok.shell)[0], tok.line)
    return inv


def image_server(image: object) -> ServeFlags | None:
    """The server a container image runs by default (vllm/vllm-openai: ``vllm serve``), if kvplan knows it."""
    if not isinstance(image, str):
        return None
    return next((serve for serve in serving_engines() if serve.runs_image(image)), None)


def _launcher(words: list[str], modules: dict[str, str] | None = None) -> tuple[ServeFlags, str, int] | None:
    i = 0
    wrappers = {w for serve in serving_engines() for w in serve.wrappers}
    while i < len(words):  # exec / env / VAR=value / nohup prefixes, and the engines' own launch wrappers
        w = words[i]
        if w in ("exec", "env", "nohup", "time", "uv", "run") or _assignment(w) or (words[i - 1:i] == ["env"]
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
                if _names(rest[0], command):
                    return serve, f"{command} serve", i + 2
    for serve in servers:  # a command group whose default command is the server: trtllm-serve MODEL
        for command in serve.commands if serve.default_serve else ():
            if rest and _names(rest[0], command) and _default_command(rest[1:]):
                return serve, command, i + 1
    if rest and _is_python(rest[0]):
        for j in range(1, len(rest) - 1):
            if rest[j] == "-m":
                module = rest[j + 1]
                wrapped = serve_flags(modules[module]) if modules and module in modules else None
                if wrapped is not None:
                    return wrapped, f"python -m {module}", i + j + 2
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
        if m := _assignment(tok.text):
            value, missing = substitute(m[1], env, k8s=k8s, arithmetic=tok.shell)
            if not missing:
                env[m[0]] = value
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
                value, missing = substitute(text, env, k8s=k8s, arithmetic=tok.shell)
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
            raw, i, shell = inline, i + 1, tok.shell
        elif i + 1 < len(args) and (not args[i + 1].text.startswith("-") or _is_number(args[i + 1].text)):
            raw, i, shell = args[i + 1].text, i + 2, args[i + 1].shell
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
        value, missing = substitute(raw, env, k8s=k8s, arithmetic=shell)
        if value == "" and not missing:  # ${X-} / ${X:-} of a variable the file does not define: not known here
            missing = tuple(n for n in _VAR_NAMES.findall(raw) if n not in env) or (raw,)
            value = raw
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


def convert(key: str, raw: str, flag: str, line: int | None, engine: str = DEFAULT_ENGINE) -> object:
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
