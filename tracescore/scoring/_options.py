"""Scorer option helpers: reference-style `options` dicts merged with keyword arguments, and
the checks of options that several scorers share."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from tracescore._exceptions import ConfigurationError


def merge_options(options: Mapping[str, Any] | None, explicit: dict[str, Any],
                  aliases: Mapping[str, str]) -> dict[str, Any]:
    """Defaults and keyword arguments, overridden by a (partial) reference-style options dict.

    `aliases` maps the reference's camelCase names to ours; an unknown key is a
    ConfigurationError naming it.
    """
    merged = dict(explicit)
    if options is None:
        return merged
    if not isinstance(options, Mapping):
        raise ConfigurationError(f"options must be a mapping, got {type(options).__name__}")
    for key, value in options.items():
        name = aliases.get(key, key)
        if name not in merged:
            names = sorted(set(merged) | set(aliases))
            close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigurationError(f"unknown option {key!r} ({hint}known: {', '.join(names)})")
        merged[name] = value
    return merged


def check_fraction(name: str, value: object) -> float:
    """Validate an option that is a number between 0 and 1."""
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or not 0 <= value <= 1):  # NaN and infinities fail the comparison too
        raise ConfigurationError(f"{name} must be a number between 0 and 1, got {value!r}")
    return value


def check_flag(name: str, value: object) -> bool:
    """Validate an option that is True or False."""
    if not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be True or False, got {value!r}")
    return value
