"""Optional extras: one clear error when a feature needs a package that is not installed."""

from __future__ import annotations

__all__ = ["MissingExtraError"]


class MissingExtraError(ImportError):
    """``what`` needs the optional extra ``extra`` (its ``packages``), which is not installed.

    An ``ImportError`` (so ``except ImportError`` still works); the CLI prints its
    message as one line and exits 2.
    """

    def __init__(self, what: str, extra: str, packages: tuple[str, ...]) -> None:
        self.extra = extra
        super().__init__(
            f"{what} needs the optional extra [{extra}], which is not installed: run "
            f"pip install '.[{extra}]' in the spacl checkout (or pip install "
            f"{' '.join(packages)})"
        )
