"""Optional extras: one clear error when a feature needs a package that is not installed."""

from __future__ import annotations

__all__ = ["MissingExtraError", "torch_build_mismatch"]

CPU_INSTALL = "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu"


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


def torch_build_mismatch(err: BaseException) -> str | None:
    """The one-line fix when ``err`` says torchvision was built for another torch, else ``None``.

    A CPU build of torch beside PyPI's torchvision (built against the CUDA torch) fails on
    ``import torchvision`` with ``RuntimeError: operator torchvision::nms does not exist``
    (seen with torch 2.13.0+cpu and torchvision 0.28.0 from PyPI).  The fix is to install
    both from the same index.

    Example:
        >>> torch_build_mismatch(RuntimeError("operator torchvision::nms does not exist"))[:36]
        "torchvision does not match torch's b"
        >>> torch_build_mismatch(RuntimeError("CUDA out of memory")) is None
        True
    """
    if not isinstance(err, RuntimeError) or "torchvision::" not in str(err):
        return None
    return (
        f"torchvision does not match torch's build ({err}); a CPU torch needs the CPU "
        f"torchvision from the same index: {CPU_INSTALL}"
    )
