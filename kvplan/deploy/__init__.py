"""``kvplan check``: deployments read where they are, checked with ``kvplan.max_batch``.

``check(paths_or_globs)`` reads every file (kvplan deployment files, Kubernetes manifests, docker
compose files, Helm values of the vLLM production stack, llm-d modelservice and vLLM's chart, SkyPilot tasks, Ray
Serve LLM configs, shell scripts), checks each deployment and returns a
:class:`CheckReport` whose ``exit_code`` is 0 (all fit and meet their requirements), 1 (one does not)
or 2 (an input is invalid). A bad file is reported and the others are still checked.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any
    from collections.abc import Callable, Iterable

import os

from kvplan.deploy.report import CheckReport, DeploymentResult, FileResult, Finding

__all__ = ["check", "CheckReport", "DeploymentResult", "FileResult", "Finding", "expand_paths"]

_SUFFIXES = (".yaml", ".yml", ".sh", ".bash")

PARALLEL_FROM = 64
"""Files from which ``check(jobs=None)`` (the default) checks in worker processes, one per CPU
(``deploy/workers.py``): below, starting them (a fork each, ~0.1 s of imports in a spawned one) costs about what
they save."""


MAX_GLOB_ENTRIES = 200_000
"""Directory entries one path or glob may walk: ``kvplan check`` refuses the argument past this (a glob of many
``*`` levels over links to parent directories matches without end; a real tree of deployments is far smaller)."""


class _WalkTooLong(Exception):
    pass


def expand_paths(paths_or_globs: Iterable[str | os.PathLike]) -> tuple[list[str], list[Finding]]:
    """Files named by paths, directories (their YAML and shell files, recursively) and globs ('**' too).

    Each file is named once, by the first path that reaches it: two paths to one file (a symlink, a glob
    through a link to a directory) are the same file (the same device and inode: its real path). A walk past
    :data:`MAX_GLOB_ENTRIES` entries is refused as an invalid argument."""
    files: list[str] = []
    problems: list[Finding] = []
    for item in paths_or_globs:
        text = os.fspath(item)
        try:
            if any(ch in text for ch in "*?["):
                matched = _glob_files(text)
                if not matched:
                    problems.append(Finding("error", "no-files", f"'{text}' matches no file", text,
                                            invalid_input=True))
                files += matched
            elif os.path.isdir(text):
                found = [f for f in _walk(text, ["**", "*"], hidden=True) if f.endswith(_SUFFIXES)]
                if not found:
                    problems.append(Finding("error", "no-files", f"{text}: no YAML or shell file in this directory",
                                            text, invalid_input=True))
                files += found
            elif os.path.exists(text):
                files.append(text)
            else:
                problems.append(Finding("error", "no-files", f"{text}: no such file", text, invalid_input=True))
        except _WalkTooLong:
            problems.append(Finding("error", "no-files", f"'{text}' walks more than {MAX_GLOB_ENTRIES:,} directory "
                                    "entries (links to parent directories?): name fewer files", text,
                                    invalid_input=True))
    seen: set[object] = set()
    unique = []
    for name in files:
        try:  # one stat a file (realpath lstats every component): the same device and inode is the same file
            info = os.stat(name)
            real: object = (info.st_dev, info.st_ino)
        except OSError:  # vanished or unreadable: read_file says so
            real = os.path.realpath(name)
        if real not in seen:
            seen.add(real)
            unique.append(name)
    return unique, problems


def _glob_files(pattern: str) -> list[str]:
    """Files matching ``pattern`` ('**' spans directories), named as ``glob.glob`` names them (see ``_walk``)."""
    parts = pattern.split(os.sep)
    first = next(i for i, part in enumerate(parts) if any(ch in part for ch in "*?["))
    root = os.sep.join(parts[:first]) or (os.sep if first == 1 else "")
    rest = [part if part == "**" else part.replace("**", "*") for part in parts[first:] if part]
    if rest and rest[-1] == "**":  # glob.glob: every file below
        rest.append("*")
    return _walk(root, rest)


def _walk(root: str, rest: list[str], *, hidden: bool = False) -> list[str]:
    """The files below ``root`` whose path parts match the glob parts ``rest``, in a bounded walk.

    ``glob.glob`` (and pathlib's ``*``) follow symlinked directories: a pattern of many ``*`` levels over two
    links to a parent directory matches 2^levels paths to the same few files, and two such links under '**'
    never end. Here '**' does not follow links, each real directory is listed once per pattern part
    (``os.path.realpath``), and the walk stops after :data:`MAX_GLOB_ENTRIES` entries (``_WalkTooLong``). A
    wildcard skips dot names unless its part starts with '.' (as glob.glob); ``hidden``: it takes them too (a
    directory argument, as ``Path.rglob`` lists it)."""
    if not rest:
        return []
    matchers = [None if part == "**" else _any_name if part == "*" else _name_pattern(part) for part in rest]
    budget = MAX_GLOB_ENTRIES
    visited: set[tuple[str, int]] = set()
    found: list[str] = []
    stack = [(root, 0)]  # explicit: a deep tree must not exhaust Python's recursion limit
    while stack:
        directory, index = stack.pop()
        key = (os.path.realpath(directory or "."), index)
        if key in visited:
            continue
        visited.add(key)
        try:
            with os.scandir(directory or ".") as it:
                listed = []
                for entry in it:
                    budget -= 1
                    if budget < 0:
                        raise _WalkTooLong()
                    listed.append(entry)
        except OSError:  # unreadable or vanished: glob.glob skips it too
            continue
        match = matchers[index]
        if match is None:  # '**': no directory here (the next part matches in this one), or one more level
            stack.append((directory, index + 1))
            stack.extend((os.path.join(directory, e.name), index) for e in listed
                         if (hidden or not e.name.startswith(".")) and e.is_dir(follow_symlinks=False))
            continue
        dots = hidden or rest[index].startswith(".")
        last = index == len(rest) - 1
        for entry in listed:
            if (entry.name.startswith(".") and not dots) or not match(entry.name):
                continue
            path = os.path.join(directory, entry.name)
            if last:
                if entry.is_file():
                    found.append(path)
            elif entry.is_dir():
                stack.append((path, index + 1))
    return sorted(dict.fromkeys(found))


def _name_pattern(part: str) -> Any:
    """The matcher of one glob part ('*.yaml'): fnmatch's pattern (imported only for a glob)."""
    import fnmatch
    import re

    return re.compile(fnmatch.translate(part)).match


def _any_name(name: str) -> bool:
    """What ``fnmatch.translate("*")`` matches: any name (a directory argument's walk: no pattern to compile)."""
    return True


def load_specs(directory: str | os.PathLike | None) -> dict[str, Any]:
    """Pinned model specs in a directory, by id and alias (lower case): YAML specs (``kvplan spec`` output), and
    model directories holding a config.json named as the Hub names the model (``DIR/<org>__<name>/config.json``
    or ``DIR/<org>/<name>/config.json``, kvplan.sources.pinned), read when a deployment names that model. A YAML
    spec wins over a model directory of the same id."""
    if directory is None:
        return {}
    from kvplan.errors import UsageError
    from kvplan.safe_io import path_is_dir, path_text
    from kvplan.sources.pinned import PinnedSpecs, config_dirs
    from kvplan.sources.yaml_spec import load_user_spec

    root = path_text(directory)
    if not path_is_dir(root):
        raise UsageError(f"{directory}: not a directory", field="specs")
    out = PinnedSpecs()
    for path in _spec_files(root):
        spec = load_user_spec(path)
        for key in (spec.id, *spec.aliases):
            out.setdefault(key.lower(), spec)
    out.dirs = {key: found for key, found in config_dirs(root).items() if key not in out}
    return out


def _spec_files(root: str) -> list[str]:
    """``sorted([*Path(root).rglob("*.yaml"), *Path(root).rglob("*.yml")])`` as text, without pathlib (~5 ms of a
    check's start): every entry so named below ``root`` (hidden ones too), symlinked directories not entered, an
    unreadable directory passed over, in the order of their Paths (part by part)."""
    from kvplan.safe_io import path_text

    if os.name != "posix":
        from pathlib import Path

        return [str(p) for p in sorted([*Path(root).rglob("*.yaml"), *Path(root).rglob("*.yml")])]
    found: list[list[str]] = []
    stack: list[list[str]] = [[]]
    while stack:
        below = stack.pop()
        try:
            with os.scandir(os.path.join(root, *below)) as it:
                entries = list(it)
        except PermissionError:  # as pathlib's glob: an unreadable directory holds nothing
            continue
        for entry in entries:
            if entry.name.endswith((".yaml", ".yml")):
                found.append([*below, entry.name])
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir and not entry.is_symlink():
                stack.append([*below, entry.name])
    return [path_text(root, *parts) for parts in sorted(found)]


def check(paths_or_globs: Iterable[str | os.PathLike] | str, *, gpu: str | None = None,
          catalog: str | os.PathLike | None = None, specs: str | os.PathLike | None = None,
          online: bool = False, strict: bool = False, ignore_unrecognized: bool = False,
          calibration: str | os.PathLike | None = None, jobs: int | None = None,
          progress: Callable[[int, int], None] | None = None) -> CheckReport:
    """Check every deployment in the given files.

    ``gpu``: the GPU type for deployments that name none. ``catalog``: a user GPU catalog file.
    ``specs``: a directory of pinned model specs. ``online``: allow the Hugging Face Hub for models
    neither bundled nor pinned (off: CI stays offline). ``strict``: warnings fail too.
    ``ignore_unrecognized``: skip files that hold no deployment (for pre-commit, which passes every file); one
    that runs an engine kvplan cannot read is reported as a warning (``engine-not-read``), never skipped.
    ``calibration``: a calibration file (``kvplan log --save``) for the deployments it matches.
    ``jobs``: processes to check the files with (1: this one alone); None: from ``PARALLEL_FROM`` files on, one per CPU,
    each with half that many files or more (``deploy.workers.workers_for``). The report is the same whichever.
    ``progress(done, total)``: called as each file's result is in (in order).
    """
    from kvplan._version import __version__
    from kvplan.deploy.checks import Context

    if isinstance(paths_or_globs, (str, os.PathLike)):
        paths_or_globs = [paths_or_globs]
    if jobs is not None:
        from kvplan.deploy.workers import check_jobs

        check_jobs(jobs)
    files, problems = expand_paths(paths_or_globs)
    if catalog:
        from pathlib import Path  # only with a catalog: pathlib's import is ~5 ms of a check's start

        catalog = Path(catalog)
    ctx = Context(catalog_file=catalog or None, gpu=gpu, specs=load_specs(specs), online=online)
    if calibration is not None:
        from kvplan.errors import KvplanError
        from kvplan.logs.calibration import load

        try:
            ctx.calibration = load(calibration)
        except KvplanError as exc:  # an invalid input of this report (exit 2), not its end: the files are checked
            where = os.fspath(calibration)
            problems.append(Finding("error", "invalid-input", f"calibration not read: "
                                    f"{exc.message.removeprefix(where + ': ')}; the deployments are checked without it",
                                    where, invalid_input=True))
    report = CheckReport(strict=strict, kvplan_version=__version__)
    for problem in problems:
        report.files.append(FileResult(path=problem.file, findings=[problem]))
    report.files.extend(_check_files(files, ctx, ignore_unrecognized, jobs, progress))
    return report


def _check_files(files: list[str], ctx: Any, ignore_unrecognized: bool, jobs: int | None,
                 progress: Callable[[int, int], None] | None = None) -> list[FileResult]:
    """Each file's result in order: in worker processes for a fleet (``deploy/workers.py``), else here."""
    total = len(files)
    done: list[FileResult] = []

    def add(result: FileResult) -> None:
        done.append(result)
        if progress is not None:
            progress(len(done), total)

    if jobs is not None or total >= PARALLEL_FROM:  # else a few files: no worker (nor its module's import)
        from kvplan.deploy.workers import check_in_workers, workers_for

        workers = workers_for(jobs, total, PARALLEL_FROM)
        if workers > 1:
            # the first file here: the modules a check imports are imported once, before the workers are forked
            add(checked_file(files[0], ctx, ignore_unrecognized))
            for result in check_in_workers(checked_file, files[1:], ctx, ignore_unrecognized,
                                           min(workers, total - 1)):
                add(result)
    for path in files[len(done):]:  # all of them, or those the workers left (they could not start, or one died)
        add(checked_file(path, ctx, ignore_unrecognized))
    return done


def checked_file(path: str, ctx: Any, ignore_unrecognized: bool = False) -> FileResult:
    """``check_file``'s result, or a finding saying the file could not be checked."""
    try:
        return check_file(path, ctx, ignore_unrecognized=ignore_unrecognized)
    except Exception as exc:  # noqa: BLE001 - one file's failure is that file's finding, never the run's end
        return FileResult(path=path, findings=[Finding(
            "error", "invalid-input", f"kvplan could not check this file ({_brief(exc)}); please report it", path,
            invalid_input=True)])


def check_file(path: str, ctx: Any, *, ignore_unrecognized: bool = False) -> FileResult:
    from kvplan.deploy.checks import check_deployment

    result = FileResult(path=path)
    try:
        fmt, deployments, findings = read_file(path)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not hide the other files
        from kvplan.errors import KvplanError

        line = getattr(exc, "line", None)
        code = "malformed-yaml" if "malformed YAML" in str(exc) else "invalid-input"
        message = str(exc) if isinstance(exc, KvplanError) else f"cannot read ({_brief(exc)})"
        result.findings.append(Finding("error", code, message.removeprefix(f"{path}: "), path, line,
                                       invalid_input=True))
        return result
    if fmt == "engine-config":  # an engine's config file: checked through the deployment that names it
        result.skipped = True
        return result
    result.format = fmt
    if ignore_unrecognized:
        findings = _unrecognized(path, findings, fmt)
        if not deployments and not findings:
            result.skipped = True
            return result
    result.findings.extend(findings)
    checked_by_dep = []
    for dep in deployments:
        try:
            checked = check_deployment(dep, ctx)
        except Exception as exc:  # noqa: BLE001 - one deployment's failure must not end the report
            checked = [_failed(dep, exc)]
        for r in checked:
            if r.status == "invalid":  # not planned: say what the file says, not the defaults
                _as_written(r, dep, ctx.gpu)
        result.deployments.extend(checked)
        checked_by_dep.append((dep, checked))
    if any(dep.devices is not None for dep in deployments):
        from kvplan.deploy.shared import check_shared

        check_shared(checked_by_dep)
    return result


UNRECOGNIZED = frozenset({"unknown-format", "no-serving-container", "unknown-kind"})
"""Findings ``--ignore-unrecognized`` drops, for a file (or, ``unknown-kind``, a document) that runs no engine."""


SERVING_FORMATS = frozenset({"helm", "llm-d", "vllm-chart", "ray-serve"})
"""Formats whose files exist to run an engine: a container or config of theirs kvplan cannot read is reported."""


def _unrecognized(path: str, findings: list[Finding], fmt: str | None = None) -> list[Finding]:
    """``--ignore-unrecognized`` (pre-commit passes every YAML file): a file kvplan does not read is skipped unless
    it runs an engine (a launcher or an engine image in its text: the file's document for an unknown kind), which
    is said as a warning (``engine-not-read``): a deployment kvplan cannot check is never passed over silently."""
    if not any(f.code in UNRECOGNIZED for f in findings):
        return findings
    from kvplan.safe_io import read_text

    try:
        lines = read_text(path).splitlines()
    except Exception:  # noqa: BLE001 - read once already; a file changed since is read as nothing
        lines = []
    starts = [i for i, line in enumerate(lines) if line.startswith("---")]  # document separators (0-based)
    kept: list[Finding] = []
    for f in findings:
        if f.code not in UNRECOGNIZED:
            kept.append(f)
            continue
        lo, hi = 0, len(lines)
        if f.code == "unknown-kind" and f.line:  # this document only
            lo = max([s for s in starts if s < f.line] or [0])
            hi = min([s for s in starts if s >= f.line] or [len(lines)])
        mention = engine_mention(lines, lo, hi) or ((f"a {fmt} file", f.line or 1) if fmt in SERVING_FORMATS
                                                     else None)
        if mention is not None:
            what, at = mention
            kept.append(Finding("warning", "engine-not-read", f"{f.message} (it runs an engine: {what} on line {at}; "
                                "kvplan cannot read it, so it is not checked)", path,
                                f.line if f.code == "unknown-kind" and f.line else at,
                                deployment=f.deployment))
    return kept


_LIST_PUNCTUATION = str.maketrans({c: " " for c in "\"'[],"})


def engine_mention(lines: list[str], lo: int = 0, hi: int | None = None) -> tuple[str, int] | None:
    """The first engine launcher or engine image named in ``lines[lo:hi]``: (what, 1-based line), or None."""
    import re

    from kvplan.engines.serve import serving_engines

    needles: list[str] = []
    patterns: list[Any] = []
    for serve in serving_engines():
        needles += [f"{c} serve" for c in serve.commands] + list(serve.modules)
        needles += [c for c in serve.commands if serve.default_serve]  # trtllm-serve MODEL
        patterns += [re.compile(p) for p in serve.images]
    end = len(lines) if hi is None else hi

    def words(i: int) -> str:
        """Line i as words: quotes, brackets and commas of a YAML list dropped (``["vllm", "serve"]``), a block
        list's dash too, so that argv split into items reads as the command it is."""
        text = lines[i].translate(_LIST_PUNCTUATION)
        return " ".join(text.split()).removeprefix("- ")

    for i in range(lo, end):
        line = words(i)
        joined = f"{line} {words(i + 1)}" if i + 1 < end and lines[i + 1].lstrip().startswith("-") else line
        for needle in needles:
            if needle in line or needle in joined:  # "- vllm" then "- serve": a block list's items, line by line
                return needle, i + 1
        for pattern in patterns:
            m = pattern.search(lines[i])
            if m:  # the image as written (the word the pattern matched in), not the pattern's part of it
                word = next((w for w in lines[i].translate(_LIST_PUNCTUATION).split() if m.group(0) in w), m.group(0))
                return f"image {word.removeprefix('image:')[:80]}", i + 1
    return None


def _as_written(result: DeploymentResult, dep: Any, default_gpu: str | None = None) -> None:
    """A deployment that was not planned shows the parallelism, GPUs, length and KV dtype its file gives: the value
    where it is written, None where it is an unresolved substitution, the engine's default (1) where not written;
    the GPU type as the file names it (the first, where it names several), else --gpu."""
    from kvplan.engines.serve import serve_flags

    serve = serve_flags(dep.engine)
    unknown = {serve.setting(u.spelled) if serve is not None else None for u in dep.unknowns}
    for key in ("tp", "pp", "dp"):
        value = dep.setting(key)
        if isinstance(value, int) and not isinstance(value, bool):
            setattr(result, key, value)
        else:
            setattr(result, key, None if key in unknown else 1)
    if result.gpu is None:
        named = next((str(g.value) for g in dep.gpus if isinstance(g.value, str)), None)
        result.gpu = named or default_gpu
    if result.gpu_count is None and dep.gpu_count is not None and isinstance(dep.gpu_count.value, int):
        result.gpu_count = dep.gpu_count.value
    mml = dep.setting("max_model_len")
    if result.max_model_len is None and isinstance(mml, int) and not isinstance(mml, bool):
        result.max_model_len = mml
    if result.kv_dtype is None and dep.setting("kv_cache_dtype") is not None:
        result.kv_dtype = str(dep.setting("kv_cache_dtype"))
    if result.engine_version is None and dep.engine_version is not None:
        result.engine_version = str(dep.engine_version.value)


def _brief(exc: BaseException) -> str:
    """An unexpected exception in one line of at most 200 characters (findings are one line each)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:200]


def _failed(dep: Any, exc: Exception) -> DeploymentResult:
    """A deployment whose check raised: its one invalid finding (a KvplanError's line, or what broke)."""
    from kvplan.errors import KvplanError

    if isinstance(exc, KvplanError):
        message = str(exc)
    else:  # a bug in kvplan's reading of this input: say so, and which input
        message = f"kvplan could not check this deployment ({_brief(exc)}); please report it"
    finding = Finding("error", "invalid-input", message, dep.file, getattr(exc, "line", None) or dep.line,
                      deployment=dep.name, invalid_input=True)
    return DeploymentResult(name=dep.name, file=dep.file, line=dep.line, source=dep.source, engine=dep.engine,
                            findings=[finding])


def read_file(path: str) -> tuple[str | None, list[Any], list[Finding]]:
    """(format, deployments, findings) of one file."""
    from kvplan.deploy import compose, helm, k8s, kvplan_file, shell
    from kvplan.deploy.yaml_lines import load_all

    from kvplan.safe_io import path_parent, read_text

    text = read_text(path)  # regular files only, bounded size, UTF-8
    if "\0" in text:  # a binary file (or a script with a NUL shlex would cut a word at): not a deployment
        from kvplan.errors import ConfigError

        line = text.count("\n", 0, text.index("\0")) + 1
        error = ConfigError(f"{path}: not a text file (a NUL byte on line {line})")
        error.line = line  # type: ignore[attr-defined]
        raise error
    base_dir = path_parent(path)  # str(Path(path).parent)
    if not path.endswith((".yaml", ".yml", ".json")) and shell.looks_like(text, path):
        deployments, findings, _ = shell.read(text, path, base_dir)
        if not deployments and not findings:
            findings = [_none(path, "shell", 1)]
        return "shell", deployments, findings
    docs = load_all(text, path)
    data = [d for d, _ in docs if d is not None]
    if not data:
        return None, [], [Finding("error", "unknown-format", "empty file: no deployment", path, 1, invalid_input=True)]
    first = data[0]
    if kvplan_file.looks_like(first):
        deployments, findings = kvplan_file.read(first, path, base_dir)
        return "kvplan", deployments, findings
    if helm.looks_like(first):
        deployments, findings, _ = helm.read(first, path, base_dir)
        if not deployments and not findings:
            findings = [_none(path, "helm", getattr(first, "line", 1))]
        return "helm", deployments, findings
    for fmt, looks, reader in _values_formats():  # Helm values of other charts, task files, Serve configs
        if looks(first):
            deployments, findings, _ = reader(first, path, base_dir)
            if not deployments and not findings:
                findings = [_none(path, fmt, getattr(first, "line", 1))]
            return fmt, deployments, findings
    if compose.looks_like(first):
        deployments, findings, _ = compose.read(first, path, base_dir)
        if not deployments and not findings:
            findings = [_none(path, "compose", getattr(first, "line", 1))]
        return "compose", deployments, findings
    if _engine_config(first) and len(data) == 1:
        return "engine-config", [], []
    if any(k8s.looks_like(d) for d in data):
        deployments, findings, _ = k8s.read(docs, path, base_dir)
        if not deployments and not any(f.invalid_input for f in findings):
            findings.append(_none(path, "kubernetes", docs[0][1]))
        return "kubernetes", deployments, findings
    return None, [], [Finding("error", "unknown-format", "not a deployment kvplan reads (a kvplan deployment file, "
                              "Kubernetes manifest, docker compose file, Helm values of production-stack, llm-d or "
                              "vLLM's chart, SkyPilot task, Ray Serve LLM config or shell script)", path, getattr(first, "line", 1), invalid_input=True)]


def _values_formats() -> list[tuple[str, Any, Any]]:
    """(format, looks_like, read) of the readers tried after the production stack; a reader's module is imported
    when a file is of its format (``deploy/detect.py`` tells them apart without them)."""
    from kvplan.deploy import detect, helm

    return [("llm-d", detect.llmd, _reader("llmd")), ("vllm-chart", helm.looks_like_vllm_chart, helm.read_vllm_chart),
            ("skypilot", detect.skypilot, _reader("skypilot")), ("ray-serve", detect.ray_serve, _reader("ray_serve"))]


def _reader(module: str) -> Any:
    def read(data: Any, path: str, base_dir: Any) -> Any:
        return __import__(f"kvplan.deploy.{module}", fromlist=["read"]).read(data, path, base_dir)

    return read


def _engine_config(data: Any) -> bool:
    """Whether a YAML mapping is an engine's own config file (TensorRT-LLM's extra_llm_api_options): read through
    the deployment whose command names it, skipped on its own."""
    from kvplan.engines.serve import serving_engines

    if not isinstance(data, dict) or not data:
        return False
    keys = {str(k) for k in data}
    return any(serve.config_keys and keys <= serve.config_keys for serve in serving_engines())


def _none(path: str, fmt: str, line: int | None) -> Finding:
    what = {"kubernetes": "no container", "compose": "no service", "helm": "no enabled modelSpec",
            "shell": "no command", "llm-d": "no decode or prefill container", "vllm-chart": "image.command",
            "skypilot": "no command of run:", "ray-serve": "no LLMConfig"}.get(fmt, "nothing")
    return Finding("error", "no-serving-container", f"{what} runs an engine (vllm serve MODEL, python -m "
                   "vllm.entrypoints.openai.api_server, python -m sglang.launch_server, trtllm-serve MODEL)", path, line,
                   invalid_input=True)
