"""Cached side venvs outside the checkout, under the tracescore cache dir, keyed by what they hold."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tracescore.testing._tools import _file_lock, cache_dir

_READY_MARKER = ".tracescore-ready"


def cached_venv(
    name: str, requirement: str | list[str], *, python: str | None = None, quiet: bool = True
) -> Path:
    """A venv under cache_dir() with `requirement`(s) installed, created once and reused
    (process-safe)."""
    requirements = [requirement] if isinstance(requirement, str) else list(requirement)
    venv = cache_dir() / name
    with _file_lock(cache_dir() / f"{name}.lock"):
        if (venv / _READY_MARKER).exists():
            return venv
        shutil.rmtree(venv, ignore_errors=True)  # a half-finished earlier attempt
        base_python = python or getattr(sys, "_base_executable", None) or sys.executable
        subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check"]
        if quiet:
            pip.append("--quiet")
        subprocess.run([*pip, *requirements], check=True)
        (venv / _READY_MARKER).write_text("\n".join(requirements) + "\n")
    return venv


def pinned_venv(prefix: str, requirements: Sequence[str]) -> Path:
    """The cached venv `{prefix}-{digest of the pins}` with `requirements` installed."""
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:12]
    return cached_venv(f"{prefix}-{digest}", list(requirements))
