"""The sdist and wheel build without a warning, hold what they should, and the wheel works when
installed into a fresh venv, outside the checkout.

The build is `make wheel` (`python -m build --no-isolation`: sdist, then the wheel from the
unpacked sdist, so a file missing from the sdist breaks the wheel), run with this interpreter. The fresh venv gets the wheel itself with
`--no-deps`; its dependencies come from this venv's site-packages through a `.pth` line, since
tests stay offline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from email.parser import Parser
from pathlib import Path, PurePosixPath

import pytest

import tracescore

ROOT = Path(__file__).resolve().parents[2]
NAME = f"tracescore-{tracescore.__version__}"
WHEEL = f"{NAME}-py3-none-any.whl"

pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    # byte-compiling on, as for a user (PYTHONDONTWRITEBYTECODE makes setuptools warn it skips it);
    # no PYTHONPATH, which would put a checkout before the installed wheel
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run(  # -o: this venv is installed already, make must not build .venv
        ["make", "-s", "-C", str(ROOT), "-o", ".venv/.installed", f"PY={sys.executable}",
         f"DIST={out}", "wheel"],
        check=False, capture_output=True, text=True, env=_env(), timeout=600,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    return out, log


def test_build_prints_no_warning(dist: tuple[Path, str]) -> None:
    _, log = dist
    noisy = [line for line in log.splitlines()
             if "warning" in line.lower() or "deprecat" in line.lower()]
    assert noisy == []


def test_wheel_holds_the_package_its_license_and_entry_points(dist: tuple[Path, str]) -> None:
    out, _ = dist
    with zipfile.ZipFile(out / WHEEL) as wheel:
        names = set(wheel.namelist())
        info = f"{NAME}.dist-info"
        metadata = Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
        entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert {"tracescore/__init__.py", "tracescore/py.typed", f"{info}/licenses/LICENSE",
            "tracescore/scoring/stopwords_en.txt"} <= names
    assert not [n for n in names if n.startswith(("tests/", "docs/", "benchmarks/"))]
    # the suite's rigs (tests/rigs: Phoenix, rotel, Chromium, the side environments' agents) are
    # not test helpers for users: none of them is shipped under tracescore/testing
    shipped = {PurePosixPath(n).stem.lstrip("_") for n in names if n.startswith("tracescore/testing/")}
    rigs = {p.stem for p in (ROOT / "tests" / "rigs").rglob("*") if p.suffix in (".py", ".mjs")}
    assert {"phoenix", "convention_agent"} <= rigs and not shipped & rigs, shipped & rigs
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE"
    assert "Typing :: Typed" in metadata.get_all("Classifier", [])
    assert "tracescore = tracescore.cli:main" in entry_points
    assert "tracescore = tracescore.testing.pytest_plugin" in entry_points


def test_sdist_holds_docs_tests_examples_and_configs(dist: tuple[Path, str]) -> None:
    out, _ = dist
    with tarfile.open(out / f"{NAME}.tar.gz") as sdist:
        names = {n.removeprefix(f"{NAME}/") for n in sdist.getnames()}
    expected = {"LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "mkdocs.yml", "Makefile",
                "docs/index.md", "docs/assets/overview.png", "tests/project/test_packaging.py",
                "tests/rigs/agents/convention_agent.mjs",
                "examples/minimal_agent.py", "collector_config/production.yaml",
                "tracescore/__init__.py"}
    assert expected <= names
    assert not [n for n in names if "__pycache__" in n or n.startswith((".ci/", ".venv/"))]


def test_installed_wheel_runs_version_and_demo_outside_the_checkout(
    dist: tuple[Path, str], tmp_path: Path
) -> None:
    out, _ = dist
    fresh = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(fresh)
    python = fresh / "bin" / "python"
    wheel = out / WHEEL
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
                    "--no-deps", "--no-index", str(wheel)], check=True, timeout=300, env=_env())
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "_tracescore_test_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    run = tmp_path / "run"
    run.mkdir()

    where = subprocess.run([str(python), "-c", "import tracescore; print(tracescore.__file__)"],
                           cwd=run, capture_output=True, text=True, check=True, env=_env()).stdout
    assert where.startswith(str(site)), where
    version = subprocess.run([str(fresh / "bin" / "tracescore"), "--version"], cwd=run,
                             capture_output=True, text=True, check=True, env=_env())
    assert version.stdout.strip() == f"tracescore {tracescore.__version__}"
    demo = subprocess.run([str(fresh / "bin" / "tracescore"), "demo"], check=False, cwd=run,
                          capture_output=True, text=True, timeout=300,
                          env={**_env(), "OTEL_EXPORTER_OTLP_ENDPOINT": ""})
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "12 score events" in demo.stdout
    assert (run / "tracescore-demo-spans.jsonl").is_file()
