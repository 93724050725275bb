"""Built-in redaction, by family: secret key names in text and in structures, token shapes, URL
passwords. Property-based: names, values and surrounding text are generated."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracescore
from tracescore import _config
from tracescore._content import redact, serialize
from tracescore._secret_rules import RULES, rules_markdown, secret_name_label
from tracescore.testing import OTLPReceiver, StubLLMServer

_PROPERTY = settings(max_examples=150, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _default_settings() -> Iterator[None]:
    _config.reset_content_settings()
    yield
    _config.reset_content_settings()


# --- generated names ---------------------------------------------------------------------------

_PLAIN_WORDS = ["db", "user", "openai", "github", "aws", "app", "main", "prod", "my", "smtp",
                "service", "stripe", "x", "admin", "new", "old", "primary"]
# (words, label): the words end a secret name; any plain words may come before them
_SECRET_TAILS = [
    (["api", "key"], "api_key"), (["apikey"], "api_key"), (["access", "key"], "api_key"),
    (["secret", "access", "key"], "api_key"), (["private", "key"], "api_key"),
    (["client", "secret"], "secret"), (["password"], "secret"), (["passwd"], "secret"),
    (["pwd"], "secret"), (["passphrase"], "secret"), (["token"], "secret"),
    (["access", "token"], "secret"), (["auth", "token"], "secret"), (["secret"], "secret"),
    (["credentials"], "secret"), (["pass"], "secret"), (["refresh", "token"], "secret"),
    (["session", "key"], "api_key"), (["signing", "key"], "api_key"),
]
_PLAIN_NAMES = ["max_tokens", "token_count", "input_tokens", "cache_key", "key", "tokens",
                "sort_key", "primary_key", "keyboard", "monkey", "token_type", "passenger",
                "bypass_cache", "compass", "passage", "user_id", "model", "question"]


def _style(words: list[str], style: str) -> str:
    if style == "snake":
        return "_".join(words)
    if style == "upper":
        return "_".join(words).upper()
    if style == "kebab":
        return "-".join(words)
    if style == "dotted":
        return ".".join(words)
    if style == "camel":
        return words[0] + "".join(w.capitalize() for w in words[1:])
    return "".join(w.capitalize() for w in words)  # Pascal


_STYLES = st.sampled_from(["snake", "upper", "kebab", "dotted", "camel", "pascal"])


@st.composite
def secret_names(draw: st.DrawFn) -> tuple[str, str]:
    tail, label = draw(st.sampled_from(_SECRET_TAILS))
    prefix = draw(st.lists(st.sampled_from(_PLAIN_WORDS), max_size=2))
    return _style(prefix + tail, draw(_STYLES)), label


@st.composite
def plain_names(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        return draw(st.sampled_from(_PLAIN_NAMES))
    return _style(draw(st.lists(st.sampled_from(_PLAIN_WORDS), min_size=1, max_size=3)),
                  draw(_STYLES))


# values: short or long, with spaces, punctuation and digits (no quotes or line breaks)
_VALUE_CHARS = st.characters(codec="ascii", categories=["L", "N"], include_characters="-_./+!$%*~")
words_value = st.lists(st.text(_VALUE_CHARS, min_size=1, max_size=12), min_size=1, max_size=4)


def _not_a_non_secret(value: str) -> bool:
    return value.strip().lower() not in {"null", "none", "true", "false", "nil", "undefined"}


@given(secret_names())
def test_secret_names_are_recognised_in_every_style(named: tuple[str, str]) -> None:
    name, label = named
    assert secret_name_label(name) == label


@given(plain_names())
def test_ordinary_names_are_not_secret(name: str) -> None:
    assert secret_name_label(name) is None


@_PROPERTY
@given(named=secret_names(), parts=words_value, form=st.sampled_from(
    ["{n}={v}", "{n}: {v}", "{n} = {v}", '{n}="{v}"', "{n}='{v}'", '"{n}": "{v}"',
     "'{n}': '{v}'", '{{\\"{n}\\": \\"{v}\\"}}', "{n}:={v}", "{n} => {v}"]),
    before=st.sampled_from(["", "error: ", "config {", "(", "env "]),
    after=st.sampled_from(["", "\n", ", next=1", "; ok", "}", " & more=2"]))
def test_values_assigned_to_secret_names_are_redacted(
    named: tuple[str, str], parts: list[str], form: str, before: str, after: str
) -> None:
    name, label = named
    quoted = "'" in form or '"' in form
    value = " ".join(parts) if quoted else "".join(parts)  # unquoted values may not hold spaces
    if not _not_a_non_secret(value):
        return
    text = before + form.format(n=name, v=value) + after
    expected = before + form.format(n=name, v=f"[REDACTED:{label}]") + after
    assert redact(text) == expected


@_PROPERTY
@given(named=secret_names(), parts=st.lists(st.text(_VALUE_CHARS, min_size=2, max_size=10),
                                            min_size=2, max_size=4))
def test_unquoted_values_with_spaces_are_redacted_whole(named: tuple[str, str],
                                                        parts: list[str]) -> None:
    name, label = named
    value = " ".join(parts)
    if not _not_a_non_secret(parts[0]):
        return
    assert redact(f"{name}: {value}\nnext line") == f"{name}: [REDACTED:{label}]\nnext line"


@_PROPERTY
@given(name=plain_names(), value=st.text(_VALUE_CHARS, min_size=1, max_size=12))
def test_values_of_ordinary_names_are_kept(name: str, value: str) -> None:
    text = f"{name}={value}, {name}: {value}"
    if re.search(r"\d{4}|@|://", value):  # could be a card number or an address by itself
        return
    assert redact(text) == text


@_PROPERTY
@given(named=secret_names(), value=st.one_of(
    st.text(min_size=1, max_size=30).filter(_not_a_non_secret),
    st.integers(), st.floats(allow_nan=False),
    st.lists(st.text(_VALUE_CHARS, min_size=1, max_size=8), min_size=1, max_size=3)),
    plain=plain_names(), wrap=st.sampled_from(["dict", "list", "nested", "kwargs", "env"]))
def test_values_under_secret_keys_in_structures_are_redacted(
    named: tuple[str, str], value: object, plain: str, wrap: str
) -> None:
    name, label = named
    data: object = {plain: "kept", name: value}
    if wrap == "list":
        data = [data]
    elif wrap == "nested":
        data = {"config": {"inner": data}}
    elif wrap == "kwargs":
        data = {"messages": [{"role": "user", "content": json.dumps(data)}]}
    elif wrap == "env":  # name/value rows: environment lists, header lists
        data = [{"name": plain, "value": "kept"}, {"name": name, "value": value}]
    out = serialize(data)
    assert f"[REDACTED:{label}]" in out
    assert "kept" in out
    for leaf in value if isinstance(value, list) else [value]:
        if isinstance(leaf, str) and len(leaf) >= 4 and leaf not in name + plain + "kept":
            assert json.dumps(leaf)[1:-1] not in out.replace(f"[REDACTED:{label}]", "")


# --- token shapes ------------------------------------------------------------------------------

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"


def _chars(alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(st.sampled_from(alphabet), min_size=size, max_size=size)


TOKENS: dict[str, st.SearchStrategy[str]] = {
    "aws": st.tuples(st.sampled_from(["AKIA", "ASIA", "ABIA", "ACCA"]),
                     _chars(_UPPER_DIGITS, 16)).map("".join),
    "github": st.tuples(st.sampled_from(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
                        _chars(_ALNUM, 36)).map("".join),
    "github_pat": _chars(_ALNUM + "_", 82).map(lambda s: "github_pat_" + s),
    "gitlab": _chars(_ALNUM + "-_", 20).map(lambda s: "glpat-" + s),
    "slack": st.tuples(st.sampled_from(["xoxb-", "xoxp-", "xoxa-", "xoxe-"]),
                       _chars("0123456789", 12), _chars(_ALNUM, 24)).map(
        lambda t: f"{t[0]}{t[1]}-{t[2]}"),
    "stripe": st.tuples(st.sampled_from(["sk_live_", "rk_live_", "sk_test_"]),
                        _chars(_ALNUM, 24)).map("".join),
    "google": _chars(_ALNUM + "-_", 35).map(lambda s: "AIza" + s),
    "openai_legacy": _chars(_ALNUM, 48).map(lambda s: "sk-" + s),
    "openai_letters_only": _chars("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", 40).map(
        lambda s: "sk-" + s),
    "openai_project": _chars(_ALNUM + "-_", 60).map(lambda s: "sk-proj-" + s),
    "anthropic": _chars(_ALNUM + "-_", 90).map(lambda s: "sk-ant-api03-" + s),
    "huggingface": _chars(_ALNUM, 34).map(lambda s: "hf_" + s),
    "npm": _chars(_ALNUM, 36).map(lambda s: "npm_" + s),
    "sendgrid": st.tuples(_chars(_ALNUM, 22), _chars(_ALNUM, 43)).map(
        lambda t: f"SG.{t[0]}.{t[1]}"),
    "jwt": st.tuples(_chars(_ALNUM, 20), _chars(_ALNUM, 30), _chars(_ALNUM + "-_", 43)).map(
        lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}"),
}
_SURROUND = st.sampled_from([("", ""), ("key ", " end"), ("(", ")"), ('"', '"'), ("\n", "\n"),
                             ("use ", "."), ("Error: invalid ", " was rejected")])


@_PROPERTY
@given(family=st.sampled_from(sorted(TOKENS)), data=st.data(), around=_SURROUND)
def test_token_shapes_are_redacted_wherever_they_stand(family: str, data: st.DataObject,
                                                       around: tuple[str, str]) -> None:
    token = data.draw(TOKENS[family])
    text = around[0] + token + around[1]
    out = redact(text)
    assert token not in out and token[8:] not in out
    assert "[REDACTED:" in out
    assert out.startswith(around[0].rstrip("\n")) or around[0] == "\n"


@_PROPERTY
@given(scheme=st.sampled_from(["postgres", "postgresql+psycopg", "mysql", "redis", "amqp",
                               "https", "mongodb+srv", "ftp"]),
       user=st.text(st.sampled_from(_ALNUM + "._-"), max_size=10),
       password=st.text(st.sampled_from(_ALNUM + "!$%*~^_-"), min_size=1, max_size=24),
       host=st.sampled_from(["db", "db.internal:5432", "10.0.0.7", "localhost"]))
def test_passwords_in_urls_are_redacted(scheme: str, user: str, password: str, host: str) -> None:
    url = f"{scheme}://{user}:{password}@{host}/app"
    out = redact(f"could not connect to {url} (timeout)")
    assert out == f"could not connect to {scheme}://{user}:[REDACTED:password]@{host}/app (timeout)"


def test_private_key_blocks_and_bearer_tokens() -> None:
    block = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n-----END OPENSSH PRIVATE KEY-----"
    assert redact(f"key:\n{block}\nend") == "key:\n[REDACTED:private_key]\nend"
    assert redact("Authorization: Bearer abc.DEF-123_456") == (
        "Authorization: Bearer [REDACTED:bearer_token]")
    assert serialize({"Authorization": "Bearer abcdefgh12345"}) == (
        '{"Authorization":"Bearer [REDACTED:bearer_token]"}')


@pytest.mark.parametrize("text", [
    "What is the capital of France? Paris.",
    "sk-learn-is-not-a-key-at-all",
    "use max_tokens=256 and top_k=5",
    "the primary key: id",
    "tokens: 42, token_count: 7, token_type: bearer",
    "passengers: 4; compass: north",
    "see https://example.com/path?q=1",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_issue_examples() -> None:
    for text, secret in [
        ("OPENAI_API_KEY=sk-abcdefghij", "sk-abcdefghij"),
        ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI"),
        ("GITHUB_TOKEN: abc123", "abc123"),
        ("DB_PASSWORD=hunter2", "hunter2"),
        ("user_password: pw", ": pw"),
        ("x_api_key=abcd", "abcd"),
        ("passphrase: correct horse battery staple", "horse"),
        ("credentials: user:pass", "user:pass"),
        ("postgres://app:S3cret@db", "S3cret"),
        ("key=sk-proj-abcdefgh", "sk-proj-abcdefgh"),
        ("sk-abcdefghijklmnopqrstuvwxyzABCD", "abcdefghijklmnop"),
    ]:
        assert secret not in redact(text), text
    assert "abcd-efgh" not in serialize({"question": "hi", "api_key": "abcd-efgh"})


@pytest.mark.parametrize(("text", "expected"), [
    ("password=b'hunter2'", "password=b'[REDACTED:secret]'"),
    ("GET https://maps.example.com/api?key=abc123&q=x",
     "GET https://maps.example.com/api?key=[REDACTED:api_key]&q=x"),
    ("https://acct.blob.core.windows.net/c?sv=2020&sig=abc%2Fdef&se=1",
     "https://acct.blob.core.windows.net/c?sv=2020&sig=[REDACTED:api_key]&se=1"),
    ("Set-Cookie: id=abc123; Path=/", "Set-Cookie: [REDACTED:secret]; Path=/"),
    ("the key=value pairs; design=simple", "the key=value pairs; design=simple"),
    # lower() changes the length of some characters: positions are found another way
    ("İ mail a@b.co, postgres://u:pw@h/x, password=x",
     "İ mail [REDACTED:email], postgres://u:[REDACTED:password]@h/x, password=[REDACTED:secret]"),
])
def test_more_family_members(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_redaction_is_idempotent_on_its_own_output() -> None:
    text = "OPENAI_API_KEY=sk-abc123def456ghi789jkl and Bearer abcdefghijkl password: 'x y'"
    once = redact(text)
    assert redact(once) == once


_NO_DIGITS = st.text(st.characters(exclude_categories=["Nd"]), max_size=30)


@_PROPERTY
@given(before=_NO_DIGITS, after=_NO_DIGITS, separator=st.sampled_from(["", " ", "-"]))
def test_card_numbers_are_redacted_in_ascii_and_non_ascii_text(
        before: str, after: str, separator: str) -> None:
    card = separator.join(["4111", "1111", "1111", "1111"])
    redacted = redact(f"{before} | {card} | {after}")
    assert card not in redacted and "[REDACTED:card_number]" in redacted


# --- the published list ------------------------------------------------------------------------

_DOC_PAGES = [Path(__file__).parents[2] / "docs" / "guarantees.md",
              Path(__file__).parents[2] / "README.md"]
_BEGIN, _END = "<!-- redaction-rules:begin -->", "<!-- redaction-rules:end -->"


def test_published_rule_list_is_current() -> None:
    page = next((p for p in _DOC_PAGES if p.exists() and _BEGIN in p.read_text()), None)
    assert page is not None, f"no page holds the rule list between {_BEGIN} and {_END}"
    text = page.read_text()
    published = text[text.index(_BEGIN) + len(_BEGIN):text.index(_END)].strip()
    assert published == rules_markdown().strip(), (
        f"regenerate the list in {page.name}: python -m tracescore._secret_rules")
    assert all(f"`{rule.name}`" in published for rule in RULES)


# --- every span kind, through a real OTLP receiver ---------------------------------------------

_KEY = "abcd-efgh"
_CALL_SECRETS = (_KEY, "hunter2 with spaces", "tok-3x4", "alice@example.com")


def _call_every_kind(stub_url: str) -> None:
    import litellm
    from _helpers import litellm_instrumented

    config: dict[str, object] = {"api_key": _KEY, "db": {"password": "hunter2 with spaces"},
                                 "notes": "mail alice@example.com"}

    @tracescore.agent
    def ask(question: str, api_key: str, config: dict[str, object]) -> dict[str, object]:
        return {"answer": "fine", "session_token": "tok-3x4"}

    @tracescore.tool
    def lookup(question: str, api_key: str, config: dict[str, object]) -> dict[str, object]:
        return {"answer": "fine", "session_token": "tok-3x4"}

    @tracescore.llm(model="m")
    def chat(messages: list[dict[str, object]], api_key: str) -> dict[str, object]:
        return {"role": "assistant", "content": {"session_token": "tok-3x4"}}

    @tracescore.span
    def step(question: str, api_key: str, config: dict[str, object]) -> dict[str, object]:
        return {"answer": "fine", "session_token": "tok-3x4"}

    ask("hi", api_key=_KEY, config=config)
    lookup("hi", api_key=_KEY, config=config)
    step("hi", _KEY, config)
    chat([{"role": "user", "content": {"question": "hi", "config": config}}], api_key=_KEY)
    with litellm_instrumented():
        litellm.completion(model="openai/gpt-4o-mini", api_base=stub_url, api_key="sk-test",
                           max_retries=0, messages=[
                               {"role": "user", "content": f'{{"api_key": "{_KEY}", "q": "hi"}}'}])


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_secrets_in_structured_content_are_redacted_on_every_span_kind(
    otlp_receiver: OTLPReceiver, stub_llm: StubLLMServer, protocol: str
) -> None:
    endpoint = otlp_receiver.http_endpoint if protocol == "http" else otlp_receiver.grpc_endpoint
    handle = tracescore.configure(exporter=f"otlp-{protocol}", endpoint=endpoint)
    try:
        _call_every_kind(stub_llm.base_url)
        assert handle.flush(10)
        spans = otlp_receiver.wait_for_spans(5)
    finally:
        handle.shutdown(5)
    assert len(spans) == 5
    for span in spans:
        exported = json.dumps(span.attributes)
        for secret in _CALL_SECRETS:
            assert secret not in exported, (span.name, secret)
        assert "[REDACTED:" in exported, span.name
