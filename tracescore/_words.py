"""Counts in words for what the commands print: `counted(1, "run")` is "1 run", `counted(2,
"run")` "2 runs" (`plural` for nouns that do not take an "s")."""

from __future__ import annotations


def counted(count: float, singular: str, plural: str | None = None) -> str:
    """"{count} {noun}", the noun singular for exactly 1 (and -1), plural otherwise."""
    number = int(count) if float(count).is_integer() else count
    word = singular if abs(number) == 1 else plural or f"{singular}s"
    return f"{number} {word}"
