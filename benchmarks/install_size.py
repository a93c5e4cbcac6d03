"""Installed size of spacl in a fresh virtual environment: the default install and the CPU one.

Each scenario makes a new venv, clones this checkout (so the editable install writes
nothing here), runs its pip commands, then records the size of ``site-packages`` with its
largest entries, whether ``import torchvision`` works, and the wall time.

- ``default``: ``pip install -e ".[dev]"`` (PyPI's torch, a CUDA build on Linux x86_64);
- ``cpu``: README's CPU line first, ``pip install torch torchvision --index-url
  https://download.pytorch.org/whl/cpu``, then ``pip install -e ".[dev]"``.  Where that
  index is out of reach, ``--cpu-torch WHEEL`` installs a CPU torch wheel file instead and
  torchvision comes from PyPI (the file says so; PyPI's torchvision is built against the
  CUDA torch, so its import check shows what a mismatched pair does).

Usage::

    python benchmarks/install_size.py --out benchmarks/results/install_size.md
    python benchmarks/install_size.py --cpu-torch /opt/wheels/torch-2.13.0+cpu-*.whl --out ...
"""

from __future__ import annotations

import argparse
import datetime
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
README_CPU_LINE = f"pip install torch torchvision --index-url {CPU_INDEX}"


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)


def _du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sm", str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def _index_reachable() -> bool:
    probe = _run(["curl", "-s", "-o", "/dev/null", "--max-time", "15", f"{CPU_INDEX}/"], ROOT)
    return probe.returncode == 0


def measure(
    name: str, pre: list[list[str]], work: Path, extra: tuple[str, ...] = ()
) -> dict[str, object]:
    """Fresh venv + clone under ``work``; run ``pre`` (pip argument lists), then spacl[dev]."""
    venv, clone = work / f"venv-{name}", work / f"clone-{name}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    start = time.perf_counter()
    steps = [*pre, ["-e", ".[dev]", *extra]]
    for args in steps:
        done = _run(pip + args, clone)
        if done.returncode != 0:
            raise SystemExit(f"{name}: pip install {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    seconds = time.perf_counter() - start
    py = str(venv / "bin" / "python")
    site = Path(
        _run([py, "-c", "import site; print(site.getsitepackages()[0])"], clone).stdout.strip()
    )
    entries = sorted(
        ((p.name, _du_mb(p)) for p in site.iterdir() if p.is_dir()), key=lambda e: -e[1]
    )
    nvidia = sum(mb for n, mb in entries if n.startswith("nvidia"))
    versions = _run([py, "-c", "import torch; print(torch.__version__)"], clone).stdout.strip()
    vision = _run([py, "-c", "import torchvision; print(torchvision.__version__)"], clone)
    vision_line = (
        f"works ({vision.stdout.strip()})"
        if vision.returncode == 0
        else "fails: " + vision.stderr.strip().splitlines()[-1]
    )
    return {
        "name": name,
        "commands": [" ".join(["pip install", *a]) for a in steps],
        "venv_mb": _du_mb(venv),
        "site_mb": _du_mb(site),
        "nvidia_mb": nvidia,
        "largest": [e for e in entries if not e[0].startswith("nvidia")][:6],
        "torch": versions,
        "torchvision": vision_line,
        "seconds": seconds,
    }


def render(rows: list[dict[str, object]], note: str) -> str:
    lines = [
        "# Installed size of spacl[dev] in a fresh venv",
        "",
        f"Command: `python {' '.join(sys.argv)}`; {datetime.date.today()}, Python "
        f"{platform.python_version()} on {platform.machine()} ({platform.system()}).",
        "",
        note,
        "",
        "| install | commands | venv (GB) | CUDA libraries `nvidia/*` (GB) | torch "
        "| `import torchvision` | time (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cmds = "; ".join(f"`{c}`" for c in r["commands"])  # type: ignore[attr-defined]
        lines.append(
            f"| {r['name']} | {cmds} | {float(r['venv_mb']) / 1024:.2f} | "  # type: ignore[arg-type]
            f"{float(r['nvidia_mb']) / 1024:.2f} | {r['torch']} | {r['torchvision']} | "  # type: ignore[arg-type]
            f"{float(r['seconds']):.0f} |"  # type: ignore[arg-type]
        )
    lines += ["", "Largest other entries of site-packages (MB):", ""]
    for r in rows:
        largest = ", ".join(f"{n} {mb:.0f}" for n, mb in r["largest"])  # type: ignore[attr-defined]
        lines.append(f"- {r['name']}: {largest}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--cpu-torch",
        type=Path,
        help="a CPU torch wheel, used when the CPU index is out of reach",
    )
    args = parser.parse_args()
    if shutil.which("git") is None:
        raise SystemExit("git is needed to clone the checkout")
    reachable = _index_reachable()
    if reachable:
        cpu_pre = [["torch", "torchvision", "--index-url", CPU_INDEX]]
        note = f"The CPU row runs README's line, `{README_CPU_LINE}`, as written."
    elif args.cpu_torch is not None:
        cpu_pre = [[str(args.cpu_torch)]]
        note = (
            f"{CPU_INDEX} was out of reach from this machine: the CPU row installs the CPU torch "
            f"wheel `{args.cpu_torch.name}` (a file that index serves) and torchvision comes "
            "from PyPI, built against the CUDA torch; its import check is what a CPU torch "
            "beside PyPI's torchvision does, which is why README's line takes both from the CPU "
            "index.  `-c` keeps the wheel's torch release (else pip would replace it with the "
            "CUDA build that PyPI's newest torchvision asks for)."
        )
    else:
        raise SystemExit(f"{CPU_INDEX} is out of reach: pass --cpu-torch WHEEL")
    with tempfile.TemporaryDirectory(prefix="spacl-install-") as tmp:
        extra: tuple[str, ...] = ()
        if not reachable:  # keep the wheel's torch: torchvision of its release, not the newest
            release = args.cpu_torch.name.split("-")[1].split("+")[0]
            pin = Path(tmp) / "keep-torch.txt"
            pin.write_text(f"torch=={release}\n")
            extra = ("-c", str(pin))
        rows = [measure("default", [], Path(tmp)), measure("cpu", cpu_pre, Path(tmp), extra)]
    args.out.write_text(render(rows, note))
    print(args.out.read_text())


if __name__ == "__main__":
    main()
