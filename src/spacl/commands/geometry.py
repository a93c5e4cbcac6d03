"""``spacl geometry`` and ``spacl align``: diagnostics on saved features.

Feature files: ``.pt`` (a tensor, or a dict with ``features`` and optional ``labels``),
``.npz`` (arrays ``features`` and optional ``labels``) or ``.npy`` (the feature array).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spacl.commands import check_file_out

if TYPE_CHECKING:  # torch and numpy are imported where used: `spacl geometry --help` is quick
    from torch import Tensor

__all__ = ["load_features", "register"]

_SUFFIXES = (".pt", ".pth", ".npz", ".npy")
#: the first bytes of NumPy's files: a .npy header, a .npz zip archive
_MAGIC = {".npy": b"\x93NUMPY", ".npz": b"PK"}


def register(subparsers: Any) -> None:
    """Add the ``geometry`` and ``align`` sub-commands."""
    geo = subparsers.add_parser(
        "geometry",
        help="neural/dimensional collapse, effective rank and uniformity of saved features",
        description=(
            "Print the geometry report (NC1-NC4, CDNV, spectra, effective rank, RankMe, "
            "uniformity) of a feature file and write a log-spectrum plot (PNG)."
        ),
    )
    geo.add_argument("features", type=Path, help="features file: .pt, .npz or .npy, shape [N, d]")
    geo.add_argument("--labels", type=Path, help="labels file (.pt, .npz or .npy), shape [N]")
    geo.add_argument(
        "--plot",
        type=Path,
        help="PNG path for the spectrum plot (default: FEATURES_spectrum.png next to the input)",
    )
    geo.add_argument("--no-plot", action="store_true", help="do not write the plot")
    geo.add_argument(
        "--uniformity-sample",
        type=int,
        default=2048,
        help="points drawn for the uniformity estimate (0: all points, O(N^2)); default 2048",
    )
    geo.add_argument("--seed", type=int, default=0, help="seed of the uniformity subsample")
    geo.add_argument("--json", type=Path, help="also write the full report as JSON")
    geo.set_defaults(func=run_geometry)

    align = subparsers.add_parser(
        "align",
        help="CKA and RSA between two saved representations of the same samples",
        description=(
            "Print linear, debiased and minibatch CKA and RSA (Pearson and Spearman) between "
            "two feature files of the same samples, and write their log spectra (PNG)."
        ),
    )
    align.add_argument("a", type=Path, help="first features file [N, dA]")
    align.add_argument("b", type=Path, help="second features file [N, dB]")
    align.add_argument("--batch-size", type=int, default=256, help="minibatch CKA batch size")
    align.add_argument(
        "--rdm", choices=("cosine", "sqeuclidean", "euclidean"), default="cosine", help="RDM"
    )
    align.add_argument(
        "--rsa-sample",
        type=int,
        default=5000,
        help="RSA uses at most this many samples (O(N^2) pairs; 0: all); default 5000",
    )
    align.add_argument("--seed", type=int, default=0, help="seed of the RSA subsample")
    align.add_argument("--plot", type=Path, help="PNG path (default: A_align.png next to A)")
    align.add_argument("--no-plot", action="store_true", help="do not write the plot")
    align.add_argument("--json", type=Path, help="also write the results as JSON")
    align.set_defaults(func=run_align)


def load_features(path: Path, labels_path: Path | None = None) -> tuple[Tensor, Tensor | None]:
    """Load ``features [N, d]`` and optional ``labels [N]`` from the supported file types."""
    features, labels = _load(path, "features")
    if features is None:
        raise ValueError(f"{path}: no feature array found (expected key 'features')")
    if labels_path is not None:
        loaded, other = _load(labels_path, "labels")
        labels = other if other is not None else loaded
        if labels is None:
            raise ValueError(f"{labels_path}: no label array found (expected key 'labels')")
    return features, labels


def _load(path: Path, role: str) -> tuple[Tensor | None, Tensor | None]:
    """Return (main array, labels) from a file; ``role`` names what a bare array is."""
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if path.is_dir():
        made = (path / "config.yaml").is_file()
        raise ValueError(
            f"{path} is a {'run ' if made else ''}directory: spacl geometry reads a features "
            f"file ({', '.join(_SUFFIXES)})"
            + (f"; write one with: spacl embed {path} --split test --out test.npz" if made else "")
        )
    suffix = path.suffix.lower()
    if suffix not in _SUFFIXES:
        raise ValueError(f"{path}: unsupported file type {suffix!r}; use one of {_SUFFIXES}")
    magic = _MAGIC.get(suffix)
    if magic is not None:
        with path.open("rb") as handle:
            if handle.read(len(magic)) != magic:
                raise ValueError(
                    f"{path} is not a {suffix} array file (it does not start as NumPy's "
                    f"{suffix} files do); write one with numpy.save / numpy.savez or spacl embed"
                )
    import pickle
    import struct
    import zipfile

    try:
        return _read(path, suffix, role)
    except (
        ValueError,
        OSError,
        EOFError,
        RuntimeError,
        KeyError,  # torch's weights-only reader on a file that is not a torch archive
        TypeError,
        AttributeError,
        IndexError,
        pickle.UnpicklingError,
        struct.error,  # a short file torch's legacy reader takes for its header (b"junk")
        zipfile.BadZipFile,
    ) as err:
        if str(err).startswith(f"{path}:"):  # our own check of what the file holds
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if isinstance(err, KeyError | TypeError | AttributeError | IndexError | struct.error):
            kind = "struct.error" if isinstance(err, struct.error) else type(err).__name__
            first = f"{kind} {first} while reading it"  # a reader's own error
        raise ValueError(f"{path} is not a readable {suffix} file ({first})") from None


def _read(path: Path, suffix: str, role: str) -> tuple[Tensor | None, Tensor | None]:
    """:func:`_load` of a file of a known suffix (errors as the readers raise them)."""
    import numpy as np
    import torch
    from torch import Tensor

    if suffix in (".pt", ".pth"):
        obj = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(obj, Tensor):
            return obj, None
        if isinstance(obj, dict):
            main = obj.get(role, obj.get("features"))
            return _tensor(main, path), _tensor(obj.get("labels"), path)
        raise ValueError(f"{path}: expected a tensor or a dict, got {type(obj).__name__}")
    if suffix == ".npy":
        return torch.from_numpy(np.load(path, allow_pickle=False)), None
    with np.load(path, allow_pickle=False) as archive:
        names = list(archive.files)
        main_name = role if role in names else ("features" if "features" in names else None)
        if main_name is None and len(names) == 1:
            main_name = names[0]
        main = torch.from_numpy(archive[main_name]) if main_name else None
        labels = torch.from_numpy(archive["labels"]) if "labels" in names else None
    return main, labels


def _tensor(value: Any, path: Path) -> Tensor | None:
    import numpy as np
    import torch
    from torch import Tensor

    if value is None or isinstance(value, Tensor):
        return value
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    raise ValueError(f"{path}: expected tensors in the dict, got {type(value).__name__}")


def run_geometry(args: argparse.Namespace) -> int:
    """Entry point of ``spacl geometry``."""
    _check_outputs(args)
    if args.uniformity_sample < 0:
        raise ValueError(f"--uniformity-sample must be >= 0, got {args.uniformity_sample}")
    features, labels = load_features(args.features, args.labels)
    from spacl.geometry import geometry_report  # torch: once the inputs are read

    report = geometry_report(
        features,
        labels,
        uniformity_sample=args.uniformity_sample or None,
        seed=args.seed,
    )
    scalars = {k: v for k, v in report.items() if not isinstance(v, list)}
    print(f"geometry of {args.features} (N={features.shape[0]}, d={features.shape[1]})")
    print(_table(scalars))
    if not args.no_plot:
        plot = args.plot or args.features.with_name(args.features.stem + "_spectrum.png")
        curves = {"features (covariance)": report["log_spectrum"]}
        if "class_mean_log_spectrum" in report:
            curves["class means"] = report["class_mean_log_spectrum"]
        _plot_spectra(curves, plot, f"spectrum of {args.features.name}")
        print(f"spectrum plot: {plot}")
    if args.json:
        _write_json(report, args.json)
    return 0


def run_align(args: argparse.Namespace) -> int:
    """Entry point of ``spacl align``."""
    import torch

    from spacl.alignment import debiased_cka, linear_cka, minibatch_cka, rsa
    from spacl.geometry.spectrum import spectrum

    _check_outputs(args)
    a, _ = load_features(args.a)
    b, _ = load_features(args.b)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"A has {a.shape[0]} samples but B has {b.shape[0]}; they must match")
    if args.rsa_sample < 0:
        raise ValueError(f"--rsa-sample must be >= 0, got {args.rsa_sample}")
    n = a.shape[0]
    results: dict[str, float] = {
        "n": float(n),
        "linear_cka": linear_cka(a, b),
        "debiased_cka": debiased_cka(a, b),
        "minibatch_cka": minibatch_cka(a, b, min(args.batch_size, n)),
    }
    ra, rb = a, b
    if args.rsa_sample and n > args.rsa_sample:
        gen = torch.Generator().manual_seed(args.seed)
        idx = torch.randperm(n, generator=gen)[: args.rsa_sample]
        ra, rb = a[idx], b[idx]
        results["rsa_samples"] = float(args.rsa_sample)
    results[f"rsa_pearson_{args.rdm}"] = rsa(ra, rb, rdm=args.rdm, method="pearson")
    results[f"rsa_spearman_{args.rdm}"] = rsa(ra, rb, rdm=args.rdm, method="spearman")
    print(f"alignment of {args.a} and {args.b} (N={n})")
    print(_table(results))
    if not args.no_plot:
        plot = args.plot or args.a.with_name(args.a.stem + "_align.png")
        curves = {
            args.a.name: spectrum(a)["log_spectrum"],
            args.b.name: spectrum(b)["log_spectrum"],
        }
        _plot_spectra(curves, plot, "covariance spectra")
        print(f"spectrum plot: {plot}")
    if args.json:
        _write_json(results, args.json)
    return 0


def _check_outputs(args: argparse.Namespace) -> None:
    """``--plot`` writes a PNG and ``--json`` JSON: names that say otherwise are refused
    before any work (one line)."""
    if args.plot is not None and not args.no_plot:
        check_file_out(args.plot, "--plot", (".png",))
    if args.json is not None:
        check_file_out(args.json, "--json", (".json",))


def _table(values: dict[str, Any]) -> str:
    width = max(len(k) for k in values)
    lines = [f"{'metric':<{width}}  value", f"{'-' * width}  {'-' * 12}"]
    for key, value in values.items():
        lines.append(f"{key:<{width}}  {value:.6g}")
    return "\n".join(lines)


def _plot_spectra(curves: dict[str, Any], path: Path, title: str) -> None:
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    lowest = 0.0
    for label, values in curves.items():
        y = np.asarray(values, dtype=float)
        x = np.arange(1, y.size + 1)
        finite = np.isfinite(y)
        if finite.any():
            lowest = min(lowest, float(y[finite].min()))
        ax.plot(x[finite], y[finite], marker=".", markersize=3, linewidth=1.2, label=label)
    # log ratios below about -37 are float64 rounding of the eigenvalues: do not zoom out to them
    ax.set_ylim(bottom=max(-40.0, lowest - 1.0), top=1.0)
    ax.set_xlabel("singular value index k")
    ax.set_ylabel(r"$\log(\sigma_k / \sigma_{\max})$ of the covariance")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)


def _write_json(values: dict[str, Any], path: Path) -> None:
    def clean(v: Any) -> Any:
        if isinstance(v, list):
            return [clean(u) for u in v]
        if isinstance(v, float) and not math.isfinite(v):
            return None  # strict JSON has no NaN / infinity
        return v

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({k: clean(v) for k, v in values.items()}, indent=2))
