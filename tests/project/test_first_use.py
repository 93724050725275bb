"""What a new user sees the first time: the install, `tracescore demo`, every example script and
the first snippets (README, getting started, the testing page) print only what matters (no banner of
setuptools, litellm or pydantic, no warning, no traceback); and the first-use pages are true as
written (how to install, what is needed, which collector and judge).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tracescore.testing import _collector

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# scripts a new user runs as they are (support_bot_lib is imported by another; the FastAPI service
# runs until stopped and is run by tests/project/test_examples.py)
FIRST_RUN_SCRIPTS = sorted(path.name for path in (ROOT / "examples").glob("*.py")
                           if path.name not in {"support_bot_lib.py", "fastapi_service.py"})
FIRST_PAGES = ("README.md", "getting-started.md")
# lines a tool people run in production must not print
NOISE = re.compile(r"careful with folders|Provider List|Give Feedback|warning|Traceback",
                   re.IGNORECASE)


def _noise(text: str) -> list[str]:
    return [line for line in text.splitlines() if NOISE.search(line)]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "TRACESCORE_", "OPENAI_", "PHOENIX_", "LITELLM_"))}
    return {**env, **extra}


def test_editable_install_prints_no_banner(tmp_path: Path) -> None:
    # what `make venv` runs (`pip install -e .`): setuptools' PEP 660 hook, on a copy of the project
    project = tmp_path / "project"
    shutil.copytree(ROOT / "tracescore", project / "tracescore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, project / name)
    hook = "from setuptools import build_meta; print(build_meta.build_editable('wheels'))"
    done = subprocess.run([sys.executable, "-c", hook], cwd=project, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _noise(done.stdout + done.stderr) == []


def test_demo_prints_no_banner_or_warning(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tracescore", "demo"], cwd=tmp_path,
                          env=_clean_env(), capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "12 score events" in done.stdout
    assert done.stderr == ""
    assert _noise(done.stdout) == []


def _testing_page_example() -> str:
    page = (ROOT / "docs" / "testing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.DOTALL)
    return next(block for block in blocks if "def test_answers_are_scored" in block)


def test_the_testing_pages_example_runs_without_warnings(tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(_testing_page_example())
    # -p no:asyncio: pytest-asyncio (the test extra) warns about an unset option of its own
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:asyncio", "test_example.py"], cwd=tmp_path,
                          env=_clean_env(), capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:]
    assert re.search(r"^1 passed in ", done.stdout, re.MULTILINE), done.stdout
    assert _noise(done.stdout + done.stderr) == []


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.DOTALL)


@pytest.mark.parametrize("script", FIRST_RUN_SCRIPTS)
def test_each_example_script_prints_no_banner_or_warning(script: str) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script)], cwd=ROOT,
                          env=_clean_env(), capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0 or script == "batch_eval.py", done.stderr[-3000:]  # its gate
    assert _noise(done.stdout + done.stderr) == []


@pytest.mark.parametrize("block", [
    pytest.param(block, id=f"{page}-{number}")
    for page in FIRST_PAGES
    for number, block in enumerate(_python_blocks(next(p for p in PAGES if p.name == page)))
])
def test_the_first_pages_snippets_print_no_banner_or_warning(block: str, tmp_path: Path) -> None:
    # as written, with no key and no collector listening: the offline judge, export that fails
    (tmp_path / "snippet.py").write_text(block)
    done = subprocess.run([sys.executable, "snippet.py"], cwd=tmp_path, env=_clean_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert _noise(done.stdout + done.stderr) == []


# --- the pages are true as written ---------------------------------------------------------------

def _pip_installs() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for line in page.read_text().splitlines():
            for command in re.findall(r"pip install ([^`#\n]+)", line):
                found.append((page.name, command.strip()))
    return found


@pytest.mark.parametrize(("page", "command"), _pip_installs())
def test_every_pip_install_installs_from_a_checkout_or_a_built_wheel(page: str, command: str
                                                                     ) -> None:
    # tracescore is not on the package index: a bare `tracescore` (or `tracescore[extra]`) fails
    targets = [arg.strip("'\"") for arg in command.split() if not arg.startswith("-")]
    assert targets, (page, command)
    for target in targets:
        assert not re.match(r"tracescore(\[|$)", target), (page, command)
        assert target.startswith((".", "/", "dist/tracescore-")), (page, command)


def test_the_first_pages_judge_with_the_same_model() -> None:
    models = {page: set(re.findall(r'create_answer_relevancy_scorer\(model="([^"]+)"',
                                   "".join(_python_blocks(ROOT / "docs" / page if page != "README.md"
                                                          else ROOT / page))))
              for page in FIRST_PAGES}
    assert all(found == {"tracescore/offline"} for found in models.values()), models


def test_getting_started_names_what_each_command_needs_and_the_venv() -> None:
    page = (ROOT / "docs" / "getting-started.md").read_text()
    needs = page[page.index("## What you need"):page.index("## In your own code")]
    for tool in ("Python 3.11", "make", "Go", "npm", "Chromium", "make chromium"):
        assert tool in needs, tool
    assert ". .venv/bin/activate" in page
    examples = page[page.index("## Examples"):]
    assert ".venv" in examples.split("```")[0]  # said before the commands that need it


def test_the_backends_page_runs_the_collector_make_collector_builds() -> None:
    page = (ROOT / "docs" / "backends.md").read_text()
    binary = _collector._BINARY_NAME
    runs = [line for block in re.findall(r"```bash\n(.*?)```", page, re.DOTALL)
            for line in block.splitlines() if "--config collector_config/" in line]
    assert runs and all(line.startswith('"$OTELCOL"') for line in runs), runs
    assert "OTELCOL=$(make -s collector | tail -n 1)" in page
    assert f"`{binary}`" in page
    # `make collector` runs `_collector build`, whose last line is the binary's path
    assert "$(PY) -m tracescore.testing._collector build" in (ROOT / "Makefile").read_text()
    done = subprocess.run([sys.executable, "-m", "tracescore.testing._collector", "build"],
                          capture_output=True, text=True, timeout=1800, check=True)
    last = Path(done.stdout.splitlines()[-1])
    assert last.name == binary and last.is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_pages_name_no_private_module(page: Path) -> None:
    # the make targets' helpers (`python -m tracescore.testing._collector ...`) are commands, not API
    named = set(re.findall(r"tracescore(?:\.[a-z_]+)*\._[a-z_]+", page.read_text()))
    assert named <= {"tracescore.testing._collector"}, named
