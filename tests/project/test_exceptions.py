"""One exception hierarchy: every error tracescore exposes is a `TracescoreError` defined in one
module, and each stays importable, and catchable, as it was before it moved there."""

from __future__ import annotations

import importlib
import inspect

import pytest

from tracescore import _exceptions
from tracescore._exceptions import TracescoreError

PUBLIC_MODULES = ("tracescore", "tracescore.scoring", "tracescore.gateway", "tracescore.online",
                  "tracescore.instrument", "tracescore.evals", "tracescore.calibration",
                  "tracescore.testing", "tracescore.cli")

# where each error was defined before, and the built-in base callers may catch it by
FORMER_HOMES = [
    ("tracescore.scoring._judge_api", "JudgeStepError", Exception),
    ("tracescore.scoring._judge_api", "JudgeAuthenticationError", Exception),
    ("tracescore.scoring", "JudgeStepError", Exception),
    ("tracescore._targets", "SetupError", Exception),
    ("tracescore.cli._setup", "SetupError", Exception),
    ("tracescore._datasets", "DatasetError", Exception),
    ("tracescore.scoring._inputs", "InputError", ValueError),
    ("tracescore._otlp_json", "OtlpJsonError", ValueError),
    ("tracescore.testing._collector", "CollectorBuildError", RuntimeError),
]


def _exported_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in PUBLIC_MODULES:
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            value = getattr(module, attr)
            if inspect.isclass(value) and issubclass(value, BaseException):
                found[f"{name}.{attr}"] = value
    return found


def test_every_exported_exception_is_a_tracescore_error_from_the_one_module() -> None:
    exported = _exported_exceptions()
    assert "tracescore.JudgeAuthenticationError" in exported  # the walk sees the public API
    outside = {name: cls.__module__ for name, cls in exported.items()
               if not issubclass(cls, TracescoreError)
               or getattr(_exceptions, cls.__name__, None) is not cls}
    assert outside == {}


def _defined_in_the_one_module() -> list[type[BaseException]]:
    return [cls for _, cls in inspect.getmembers(_exceptions, inspect.isclass)
            if issubclass(cls, BaseException) and cls.__module__ in ("tracescore",
                                                                      _exceptions.__name__)]


def test_every_exception_of_the_one_module_is_a_tracescore_error() -> None:
    classes = _defined_in_the_one_module()
    assert len(classes) >= 10
    assert all(issubclass(cls, TracescoreError) for cls in classes)


def test_every_error_is_importable_from_the_top_under_its_public_module() -> None:
    import pickle

    import tracescore

    for cls in _defined_in_the_one_module():
        assert cls.__module__ == "tracescore", cls
        assert cls.__name__ in tracescore.__all__
        assert getattr(tracescore, cls.__name__) is cls
    error = pickle.loads(pickle.dumps(tracescore.ConfigurationError("boom")))  # by the public path
    assert type(error) is tracescore.ConfigurationError and str(error) == "boom"


@pytest.mark.parametrize(("module", "name", "base"), FORMER_HOMES)
def test_an_error_is_still_importable_and_catchable_where_it_was(
        module: str, name: str, base: type[BaseException]) -> None:
    cls = getattr(importlib.import_module(module), name)
    assert cls is getattr(_exceptions, name)
    assert issubclass(cls, TracescoreError) and issubclass(cls, base)

