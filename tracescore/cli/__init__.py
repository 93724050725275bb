"""The `tracescore` command (click + rich): demo, eval, score, serve, rescore.

`main` is the click group behind the `tracescore` console script and `python -m tracescore`. It
loads on first use, so the command's helper modules (scorer setup, dataset loading) import
without click.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracescore.cli._app import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        from tracescore.cli._app import main

        return main
    raise AttributeError(f"module 'tracescore.cli' has no attribute {name!r}")
