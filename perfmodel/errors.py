"""One exception type for bad input: it names the file, the field and what is wrong."""
from __future__ import annotations


class SpecError(ValueError):
    """Bad YAML spec or bad CLI argument. ``str(err)`` is the one-line message the CLI prints."""

    def __init__(self, where: str, field: str | None, problem: str):
        self.where, self.field, self.problem = where, field, problem
        loc = f"{where}: {field}" if field else where
        super().__init__(f"{loc}: {problem}")
