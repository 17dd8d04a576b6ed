"""Regular expressions compiled when first used (``lazy_pattern``): a module's patterns cost nothing at import.

``kvplan check`` imports the readers of every format a folder holds, and each reader's module held its patterns
compiled at import (some 20: about 10 ms of a check's start-up), most of which a run never matches. A lazy pattern
compiles on its first use, then its methods are the compiled pattern's own (as fast from then on).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    import re
    from typing import Any


class LazyPattern:
    """A regular expression compiled when first used, then as fast as the compiled one (its methods become this
    object's own)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags

    def compiled(self) -> re.Pattern[str]:
        done = self.__dict__.get("_compiled")
        if done is None:
            import re

            done = self.__dict__["_compiled"] = re.compile(self.pattern, self.flags)
            for name in ("search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"):
                setattr(self, name, getattr(done, name))
        return done  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:  # reached only for what is not set yet: before the first use
        if name.startswith("__"):  # copy, pickle and friends probe for these: not a pattern's
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy_pattern({self.pattern!r}, {self.flags!r})"


def lazy_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, compiled on first use (``LazyPattern``)."""
    return LazyPattern(pattern, flags)  # type: ignore[return-value]
