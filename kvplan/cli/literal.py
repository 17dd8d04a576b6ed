"""``kvplan check -- <command>`` and ``kvplan check -``: one literal launch command, checked as a one-line
script, its fixes written back into the command ready to paste."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

import os
import sys

from kvplan.record import replace

MAX_COMMAND = 1 << 16
"""A launch command read from stdin: far longer than any real one; more is refused, not read."""
SHOWN = "command"


def literal_command(paths: list[str]) -> list[str] | None:
    """The words of a literal command, or None where ``paths`` are files, directories or globs: ``-`` reads one
    command from stdin; otherwise the first word must be no file and start an engine the registry knows."""
    if paths == ["-"]:
        import shlex  # here, not at import nor above: a check of files reads no literal command (shlex, ~0.5 ms)

        from kvplan.errors import UsageError

        text = sys.stdin.read(MAX_COMMAND + 1)
        if len(text) > MAX_COMMAND:
            raise UsageError(f"a command on stdin longer than {MAX_COMMAND:,} characters", field="paths")
        try:
            words = shlex.split(text.replace("\\\n", " "), comments=True)
        except ValueError as exc:
            raise UsageError(f"stdin: not a command line ({exc})", field="paths") from None
        if not words:
            raise UsageError("stdin: no command", field="paths")
        return words
    # os.path.exists: a name too long or with a NUL is no file (Path.exists raises for those)
    if not paths or os.path.exists(paths[0]) or any(c in paths[0] for c in "*?["):
        return None
    import shlex

    from kvplan.engines.serve import launch_pattern

    return list(paths) if launch_pattern().search(shlex.join(paths)) else None


def run_literal(words: list[str], check: Callable[[list[str]], Any]) -> Any:
    """Check ``words`` as a one-line script; the report names it 'command' and each fix carries the command it
    makes."""
    # tempfile here, not at import: it imports random, shutil and the compressors, ~10 ms of every check
    import shlex
    import tempfile
    from pathlib import Path

    from kvplan.deploy.fixes import apply

    with tempfile.TemporaryDirectory(prefix="kvplan-check-") as tmp:
        script = Path(tmp) / "command.sh"
        script.write_text(shlex.join(words) + "\n")
        report = check([str(script)])
    for f in report.files:
        f.path = SHOWN
        for finding in f.findings:
            finding.file = SHOWN
    for d in report.deployments:
        d.file = SHOWN
        d.name = SHOWN
        for finding in d.findings:
            finding.file, finding.deployment = SHOWN, SHOWN
        d.fixes = [replace(fix, command=shlex.join(apply(words, fix)) if fix.flag else "") for fix in d.fixes]
    return report
