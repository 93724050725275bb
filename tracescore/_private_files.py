"""Files that hold span content (prompts, answers, whatever secrets an app put in them) are the
owner's alone: created mode 0600 whatever the umask, and an existing one tightened to it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

OWNER_ONLY = 0o600
_FLAGS = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def open_private(path: str | os.PathLike[str], mode: str = "w", *,
                 newline: str | None = None) -> IO[str]:
    """`open(path, mode)` for text ("w" or "a"), the file owner-only."""
    fd = os.open(path, _FLAGS[mode], OWNER_ONLY)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, OWNER_ONLY)  # a file that was there keeps its mode otherwise
        return os.fdopen(fd, mode, encoding="utf-8", newline=newline)
    except BaseException:
        os.close(fd)
        raise


def write_private(path: str | os.PathLike[str], text: str) -> None:
    """`Path(path).write_text(text)`, the file owner-only."""
    with open_private(path, "w") as handle:
        handle.write(text)


def make_private(path: str | os.PathLike[str]) -> None:
    """Create `path` empty and owner-only if missing, else tighten it (and its SQLite side files,
    which SQLite creates with the mode of the database file)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, OWNER_ONLY))
    for name in (str(path), *(f"{path}{side}" for side in ("-wal", "-shm", "-journal"))):
        if Path(name).exists():
            os.chmod(name, OWNER_ONLY)
