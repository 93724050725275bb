"""What a new user sees the first time: the install, `tracescore demo` and the testing page's example
print only what matters (no banner of setuptools, litellm or pydantic, no warning, no traceback).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
