"""Content capture: settings from code and env, JSON-safe serialization, redaction, truncation."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import json
import logging
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracescore import _config
from tracescore._config import ContentSettings, content_settings, set_content_capture
from tracescore._content import capture_enabled, redact, serialize, to_json_safe
from tracescore._exceptions import ConfigurationError

_ENV_VARS = (
    _config.ENV_OTEL_CAPTURE,
    _config.ENV_CAPTURE,
    _config.ENV_MAX_LENGTH,
    _config.ENV_REDACT,
)


@pytest.fixture(autouse=True)
def _clean_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for var in _ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    _config.reset_content_settings()
    yield
    monkeypatch.undo()
    _config.reset_content_settings()


def _from_env(monkeypatch: pytest.MonkeyPatch, **env: str) -> ContentSettings:
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    return _config.reset_content_settings()


# --- settings ----------------------------------------------------------------------------------


def test_defaults_capture_on_redaction_on() -> None:
    s = content_settings()
    assert (s.capture, s.max_length, s.redact, s.redaction_hook) == (True, 8192, True, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("false", False),
        ("NO_CONTENT", False),
        ("no_content", False),
        ("true", True),
        ("SPAN_ONLY", True),
        ("SPAN_AND_EVENT", True),
        ("EVENT_ONLY", True),
        (" False ", False),
    ],
)
def test_otel_capture_env(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    assert _from_env(monkeypatch, **{_config.ENV_OTEL_CAPTURE: value}).capture is expected


def test_tracescore_capture_env_wins_over_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _from_env(monkeypatch, **{_config.ENV_OTEL_CAPTURE: "true", _config.ENV_CAPTURE: "0"})
    assert s.capture is False
    s = _from_env(
        monkeypatch, **{_config.ENV_OTEL_CAPTURE: "NO_CONTENT", _config.ENV_CAPTURE: "yes"}
    )
    assert s.capture is True


def test_max_length_and_redact_env(monkeypatch: pytest.MonkeyPatch) -> None:
    s = _from_env(monkeypatch, **{_config.ENV_MAX_LENGTH: "100", _config.ENV_REDACT: "off"})
    assert (s.max_length, s.redact) == (100, False)


@pytest.mark.parametrize(
    ("var", "value", "field", "fallback"),
    [
        (_config.ENV_OTEL_CAPTURE, "maybe", "capture", True),
        (_config.ENV_CAPTURE, "perhaps", "capture", True),
        (_config.ENV_MAX_LENGTH, "lots", "max_length", 8192),
        (_config.ENV_MAX_LENGTH, "-5", "max_length", 8192),
        (_config.ENV_MAX_LENGTH, "0", "max_length", 8192),
        (_config.ENV_REDACT, "2", "redact", True),
    ],
)
def test_bad_env_value_warns_and_falls_back(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, field: str, fallback: object
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.warns(RuntimeWarning, match=var) as record:
        s = _config.reset_content_settings()
    assert getattr(s, field) == fallback
    assert len(record) == 1


def test_env_read_once_lazily(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_config, "_settings", None)
    monkeypatch.setenv(_config.ENV_MAX_LENGTH, "bad")
    with pytest.warns(RuntimeWarning):
        first = content_settings()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second read must not warn again
        assert content_settings() is first


def test_set_content_capture_changes_only_given_fields() -> None:
    def hook(text: str) -> str:
        return text.upper()

    s = set_content_capture(False)
    assert (s.capture, s.max_length, s.redact) == (False, 8192, True)
    s = set_content_capture(max_length=10, redaction_hook=hook)
    assert (s.capture, s.max_length, s.redaction_hook) == (False, 10, hook)
    s = set_content_capture(True, redact=False)
    assert (s.capture, s.redact, s.redaction_hook) == (True, False, hook)
    s = set_content_capture(redaction_hook=None)
    assert s.redaction_hook is None
    assert content_settings() == s


@pytest.mark.parametrize(
    "kwargs",
    [
        {"capture": "yes"},
        {"max_length": 0},
        {"max_length": -1},
        {"max_length": 2.5},
        {"max_length": True},
        {"redact": 1},
        {"redaction_hook": "not callable"},
    ],
)
def test_set_content_capture_rejects_bad_values(kwargs: dict[str, Any]) -> None:
    before = content_settings()
    with pytest.raises(ConfigurationError):
        set_content_capture(**kwargs)
    assert content_settings() == before


def test_capture_enabled_override_wins() -> None:
    assert capture_enabled() is True
    assert capture_enabled(False) is False
    set_content_capture(False)
    assert capture_enabled() is False
    assert capture_enabled(True) is True


# --- serialization -----------------------------------------------------------------------------


@dataclasses.dataclass
class _Point:
    x: int
    y: Any = None


class _Model(pydantic.BaseModel):
    name: str
    tags: list[str]
    when: dt.date


class _Color(enum.Enum):
    RED = "red"


class _BadRepr:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")


class _Plain:
    def __init__(self) -> None:
        self.a = 1
        self.b = [2, 3]


class _ExplodingMapping(Mapping[str, int]):
    def __getitem__(self, key: str) -> int:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("cannot iterate")

    def __len__(self) -> int:
        return 3


def test_str_stays_as_is() -> None:
    assert serialize("hello world") == "hello world"


def test_common_types_become_compact_json() -> None:
    Pair = collections.namedtuple("Pair", "left right")
    obj = {
        "point": _Point(1, 2),
        "model": _Model(name="n", tags=["a"], when=dt.date(2024, 1, 2)),
        "color": _Color.RED,
        "bytes": b"hi",
        "set": {3, 1, 2},
        "pair": Pair(1, "r"),
        "plain": _Plain(),
        "nan": float("nan"),
        "tuple": (1, None, True),
        7: "int key",
    }
    assert json.loads(serialize(obj)) == {
        "point": {"x": 1, "y": 2},
        "model": {"name": "n", "tags": ["a"], "when": "2024-01-02"},
        "color": "red",
        "bytes": "hi",
        "set": [1, 2, 3],
        "pair": {"left": 1, "right": "r"},
        "plain": {"a": 1, "b": [2, 3]},
        "nan": "nan",
        "tuple": [1, None, True],
        "7": "int key",
    }
    assert serialize([1, "a"]) == '[1,"a"]'


def test_binary_bytes_are_base64() -> None:
    assert serialize(b"\xff\x00") == "<2 bytes, base64: /wA=>"


def test_cycles_are_marked_not_followed() -> None:
    items: list[Any] = [1]
    items.append(items)
    mapping: dict[str, Any] = {"k": 1}
    mapping["self"] = mapping
    point = _Point(1)
    point.y = point
    assert json.loads(serialize(items)) == [1, "<cycle: list>"]
    assert json.loads(serialize(mapping)) == {"k": 1, "self": "<cycle: dict>"}
    assert json.loads(serialize(point)) == {"x": 1, "y": "<cycle: _Point>"}
    shared = [1]
    assert json.loads(serialize([shared, shared])) == [[1], [1]]  # sharing is not a cycle


def test_failing_repr_and_exploding_containers_never_raise() -> None:
    assert serialize(_BadRepr()) == "<_BadRepr object (repr failed)>"
    assert "repr failed" in serialize({"x": _BadRepr()})
    assert "_ExplodingMapping" in serialize(_ExplodingMapping())


def test_generators_are_not_consumed() -> None:
    consumed = []

    def gen() -> Iterator[int]:
        consumed.append(True)
        yield 1

    g = gen()
    assert "generator" in serialize(g)
    assert consumed == []


def test_exceptions_and_dates() -> None:
    assert serialize(ValueError("bad")) == "ValueError: bad"
    assert serialize(dt.datetime(2024, 5, 6, 7, 8, 9)) == "2024-05-06T07:08:09"


def test_lone_surrogates_become_valid_utf8() -> None:
    text = serialize("a\ud800b")
    text.encode("utf-8")  # would raise if invalid
    assert text.startswith("a") and text.endswith("b")


def test_deep_nesting_is_bounded() -> None:
    nested: Any = "leaf"
    for _ in range(5000):
        nested = [nested]
    out = serialize(nested)
    assert "<max depth: list>" in out


def test_long_string_truncated_with_exact_marker() -> None:
    set_content_capture(max_length=10)
    assert serialize("x" * 25) == "x" * 10 + "…[truncated 15 chars]"
    assert serialize("x" * 10) == "x" * 10


def test_huge_objects_bound_work_and_output() -> None:
    out = serialize(list(range(2_000_000)))
    assert len(out) < 8192 + 50
    assert out.endswith("+ chars]")
    big = {f"k{i}": "v" * 100 for i in range(200_000)}
    assert len(serialize(big)) < 8192 + 50
    data = to_json_safe(list(range(100_000)), max_chars=100)
    assert isinstance(data, list) and len(data) <= 101
    assert data[-1].startswith("…[") and data[-1].endswith("more items]")


def test_explicit_settings_argument_is_used() -> None:
    s = ContentSettings(max_length=4, redact=False)
    assert serialize("abcdefgh", s) == "abcd…[truncated 4 chars]"
    assert serialize("mail a@b.com", ContentSettings(redact=False)) == "mail a@b.com"


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers()
        | st.floats()
        | st.text()
        | st.binary()
        | st.dates(),
        lambda children: (
            st.lists(children)
            | st.dictionaries(st.text() | st.integers(), children)
            | st.frozensets(st.integers() | st.text())
            | st.tuples(children, children)
        ),
        max_leaves=30,
    ),
    st.integers(min_value=1, max_value=200),
)
def test_serialize_never_raises_and_respects_max_length(obj: object, max_length: int) -> None:
    out = serialize(obj, ContentSettings(max_length=max_length))
    assert isinstance(out, str)
    out.encode("utf-8")
    body = out.split("…[truncated ")[0]
    assert len(body) <= max_length


# --- redaction ---------------------------------------------------------------------------------

_GH = "ghp_" + "A1b2C3d4E5" * 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-abcdefghijklmnop1234567890XYZ end", "key [REDACTED:api_key] end"),
        ("sk-proj-Abc123def456ghi789jkl012mno", "[REDACTED:api_key]"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "aws [REDACTED:api_key] here"),
        (f"token {_GH}.", "token [REDACTED:api_key]."),
        ("slack xoxb-123456789012-abcdefABCDEF", "slack [REDACTED:api_key]"),
        ("api_key=s3cr3tvalue&x=1", "api_key=[REDACTED:api_key]&x=1"),
        ('{"api_key":"s3cr3tvalue"}', '{"api_key":"[REDACTED:api_key]"}'),
        ('{"password": "hunter22"}', '{"password": "[REDACTED:secret]"}'),
        (
            "Authorization: Bearer eyAbc.def-123_xyz~",
            "Authorization: Bearer [REDACTED:bearer_token]",
        ),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED:basic_auth]"),
        ("write to jane.doe+tag@mail.example.co.uk!", "write to [REDACTED:email]!"),
        ("card 4111 1111 1111 1111 ok", "card [REDACTED:card_number] ok"),
        ("card 4111-1111-1111-1111", "card [REDACTED:card_number]"),
        ("amex 378282246310005", "amex [REDACTED:card_number]"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            "[REDACTED:private_key]",
        ),
    ],
)
def test_builtin_redaction(text: str, expected: str) -> None:
    assert redact(text) == expected
    assert serialize(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "What is the capital of France? Paris, since 1789.",
        "card-like but not Luhn: 4111 1111 1111 1112",
        "order number 12345678901234567890123",  # digit run too long for a card
        "use scikit-learn or ask-me-anything-about-python",
        "sk-learn-is-not-a-key-at-all",
        "tokens: 42",
        "the key idea is simple",
    ],
)
def test_no_false_positives_on_ordinary_text(text: str) -> None:
    assert redact(text) == text


def test_redaction_inside_serialized_structures() -> None:
    out = serialize(
        {"user": "bob@example.com", "headers": {"Authorization": "Bearer abcdefgh12345"}}
    )
    assert "bob@example.com" not in out and "abcdefgh12345" not in out
    assert "[REDACTED:email]" in out and "[REDACTED:bearer_token]" in out


def test_hook_runs_after_builtin_redaction() -> None:
    seen: list[str] = []

    def hook(text: str) -> str:
        seen.append(text)
        return text.replace("Alice", "[NAME]")

    set_content_capture(redaction_hook=hook)
    assert serialize("Alice <alice@example.com>") == "[NAME] <[REDACTED:email]>"
    assert seen == ["Alice <[REDACTED:email]>"]


def test_redact_off_keeps_builtin_patterns_but_runs_hook() -> None:
    set_content_capture(redact=False, redaction_hook=lambda t: t.replace("x", "y"))
    assert serialize("x a@b.com") == "y a@b.com"


def test_failing_hook_withholds_content_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    def hook(text: str) -> str:
        raise ValueError("boom")

    set_content_capture(redaction_hook=hook)
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        assert serialize("secret stuff") == "[REDACTED:hook_error]"
        assert serialize({"a": 1}) == "[REDACTED:hook_error]"
    assert sum("redaction hook" in r.getMessage() for r in caplog.records) <= 1


def test_non_string_hook_result_withholds_content() -> None:
    set_content_capture(redaction_hook=lambda t: None)  # type: ignore[arg-type,return-value]
    assert serialize("anything") == "[REDACTED:hook_error]"


def test_secret_straddling_the_cut_is_still_redacted() -> None:
    set_content_capture(max_length=20)
    out = serialize("x" * 15 + " john.smith@example.com and more text")
    assert "john" not in out and "smith" not in out
    assert out.startswith("x" * 15)
    assert "…[truncated" in out
