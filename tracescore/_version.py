"""The tracescore release: a leaf module, so any layer can name it without importing the package
(pyproject.toml reads the project's version from here)."""

__version__ = "0.1.0"
