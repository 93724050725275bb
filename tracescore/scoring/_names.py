"""The names of the built-in scorers: what each scorer class declares about itself (`id`,
`aliases`, `uses_judge`, its factory), collected as the classes are defined.

A leaf module (it imports nothing of tracescore), so any layer may read the alias table; the
registry (`_registry`) builds scorers from it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Declared:
    """One built-in scorer as its class declares it."""

    id: str
    aliases: tuple[str, ...]  # other accepted names
    uses_judge: bool
    named_by_user: bool  # its id is the `name` option it is built with (the LLM judge)
    module: str
    factory: str  # the name of its factory function in `module`

    @property
    def short_name(self) -> str:
        """The name the command's help shows: the shortest (the id on a tie)."""
        return min((self.id, *self.aliases), key=len)


DECLARED: dict[str, Declared] = {}  # scorer id -> declaration, in declaration order
ALIASES: dict[str, str] = {}  # accepted name -> scorer id (ids are names too)


def normal_name(name: str) -> str:
    """A scorer name as the tables hold it (`_` and `-` interchangeable, any case)."""
    return name.strip().lower().replace("_", "-")


def declare(entry: Declared) -> None:
    """Add a built-in scorer's names (a name taken by another scorer is a programming error)."""
    for name in (entry.id, *entry.aliases):
        taken = ALIASES.get(name)
        if taken is not None and taken != entry.id:
            raise RuntimeError(f"scorer name {name!r} is declared by {taken!r} and {entry.id!r}")
        ALIASES[name] = entry.id
    DECLARED[entry.id] = entry
