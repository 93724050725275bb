import subprocess
import sys

import tracescore


def test_import_is_light() -> None:
    code = "import sys, tracescore; print('litellm' in sys.modules, 'rapidfuzz' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_public_api_names_resolve() -> None:
    for name in tracescore.__all__:
        assert getattr(tracescore, name) is not None, name


def test_unknown_attribute_is_attribute_error() -> None:
    try:
        tracescore.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_all_matches_the_lazy_export_table() -> None:
    assert set(tracescore.__all__) == {"__version__", *tracescore._EXPORTS}
