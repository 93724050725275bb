"""The end-to-end tests' own fixtures (typed and checked in `_e2e_fixtures`)."""

from _e2e_fixtures import phoenix  # noqa: F401
