"""The built-in redaction rules: secret key names, token shapes and personal data, in one list.

Token prefixes and shapes follow the public rule set of gitleaks (a maintained secret
detector); key names are matched word by word inside snake, kebab, dotted and camel names.
`rules_markdown()` renders the list that the documentation publishes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["RULES", "Rule", "apply_rules", "hide_value", "rules_markdown", "secret_name_label"]

_MAX_NAME = 64  # characters of a name considered by the assignment rule, each side of its word


@dataclass(frozen=True, slots=True)
class Rule:
    """One redaction rule: what it finds, what replaces it, and literals any match contains."""

    name: str
    label: str
    description: str
    pattern: re.Pattern[str]
    apply: Callable[[str, str], str]  # (text, text.lower()) -> text with matches replaced
    triggers: tuple[str, ...]  # lower-case; a text containing none of them cannot match


def _label(kind: str) -> str:
    return f"[REDACTED:{kind}]"


# --- key names -------------------------------------------------------------------------------

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# a word that names a secret wherever it stands in the name
_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "passcode", "pwd", "secret", "secrets",
    "credential", "credentials", "apikey", "apikeys", "privatekey",
})
# a word that names a secret when it ends the name (`GITHUB_TOKEN`, not `token_count`)
_LAST_WORDS = frozenset({"token", "pass", "authorization", "cookie"})
# `key`/`keys` ending the name after one of these (`x_api_key`, not `cache_key`)
_KEY_QUALIFIERS = frozenset({
    "api", "access", "secret", "private", "signing", "encryption", "master", "client",
    "account", "auth", "license", "subscription", "webhook", "session",
})


@lru_cache(maxsize=4096)
def secret_name_label(name: str) -> str | None:
    """`api_key` or `secret` when `name` (a key, field or variable name) names a secret, else None.

    Words are split at `_`, `-`, `.`, spaces and camel-case humps, so `OPENAI_API_KEY`,
    `aws_secret_access_key`, `userPassword` and `x-api-key` all match, while `max_tokens`,
    `token_count` and `cache_key` do not.
    """
    words = [w.lower() for w in _WORD.findall(name[: 2 * _MAX_NAME])]
    if not words:
        return None
    last = words[-1]
    if last in ("key", "keys") and len(words) > 1 and words[-2] in _KEY_QUALIFIERS:
        return "api_key"
    if last in ("apikey", "apikeys"):
        return "api_key"
    if last in _LAST_WORDS or any(w in _SECRET_WORDS for w in words):
        return "secret"
    return None


# `name = value` / `name: value` / `"name": "value"` in free text. The name is any identifier
# containing one of these stems; `secret_name_label` then decides on its words.
_NAME_STEMS = r"pass|pwd|secret|token|key|credential|authorization|cookie|sig"
_QUOTE = r"(?:\\?[\"'`])"
_STOP = r"\s\"'`,;&|}\])<>{\[\\"  # characters an unquoted value never contains
_ASSIGNMENT = (
    rf"(?i)(?<![\w.\-])(?P<name>[\w.\-]{{0,{_MAX_NAME}}}?(?:{_NAME_STEMS})[\w.\-]{{0,{_MAX_NAME}}}?)"
    rf"(?P<op>{_QUOTE}?[ \t]*(?::=|=>|:|=)[ \t]*)"
    r"(?:"
    r"(?P<eq>\\\")(?P<ev>[^\"\n]{0,2048}?)\\\""  # an escaped-quoted value (JSON inside text)
    r"|(?P<dq>b?\")(?P<dv>[^\"\n]{0,2048})\""  # b"…": a bytes repr
    r"|(?P<sq>b?')(?P<sv>[^'\n]{0,2048})'"
    r"|\[(?!REDACTED)(?P<lv>[^\[\]\n]{0,2048})\]"  # a list of values
    # unquoted: runs over spaces, but not into a following `name=`; (?=(…))\N is an atomic group
    rf"|(?P<uv>[^{_STOP}]+(?:[ \t]+(?=(?P<w>[^{_STOP}=:]+))(?P=w)(?![=:]))*)"
    r")"
)
_QUERY_SECRETS = frozenset({"key", "sig", "signature"})  # secret as URL query parameters only
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
_REDACTED_NEXT = re.compile(r"[ \t]*\[REDACTED")
_NOT_SECRET_VALUES = frozenset({"", "null", "none", "true", "false", "nil", "undefined"})
# a placeholder, as guidance writes it (`pass api_key=...`, `token=<TOKEN>`, `password=***`):
# no secret in it, and redacting it would garble the guidance
_PLACEHOLDER = re.compile(r"\.{2,}|…+|\*{3,}|x{3,}|<[a-z][\w .\-]{0,40}>|\{[a-z][\w.\-]{0,40}\}")


def _assignment(match: re.Match[str]) -> str:
    name = match.group("name")
    label = secret_name_label(name)
    if label is None and name.lower() in _QUERY_SECRETS and match.group("op") == "=" and (
            match.start() > 0 and match.string[match.start() - 1] in "?&"):
        label = "api_key"  # `?key=…`, `&sig=…` in a URL
    if label is None:
        return match.group(0)
    for group in ("ev", "dv", "sv", "lv", "uv"):
        value = match.group(group)
        if value is not None:
            break
    start, end = match.span(group)
    word = value.strip().lower()
    if word in _NOT_SECRET_VALUES or _PLACEHOLDER.fullmatch(word) or (
            word in _SCHEMES and _REDACTED_NEXT.match(match.string, end)):
        return match.group(0)  # nothing secret, or `Bearer`/`Basic` before its redacted token
    origin = match.start()
    whole = match.group(0)
    return whole[: start - origin] + _label(label) + whole[end - origin:]


_SCHEME_TOKEN = re.compile(r"(?i)(?:bearer|basic|token|digest)[ \t]+\[REDACTED:[a-z_]+\]")


def hide_value(value: str, label: str) -> str:
    """What is exported for `value` held under a secret-named key: `[REDACTED:<label>]`, except
    that `Bearer <token>`-style values keep their scheme word (`Bearer [REDACTED:bearer_token]`)."""
    redacted = apply_rules(value)
    return redacted if _SCHEME_TOKEN.fullmatch(redacted) else _label(label)


# --- personal data -----------------------------------------------------------------------------


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    if 13 <= len(digits) <= 19 and _luhn_ok(digits):
        return _label("card_number")
    return match.group(0)


Apply = Callable[[str, str], str]  # (text, its lower-case form) -> text with matches replaced


def _everywhere(pattern: re.Pattern[str], replacement: str | Callable[[re.Match[str]], str]) -> Apply:
    return lambda text, lowered: pattern.sub(replacement, text)


def _around(anchor: str, before: str, limit: int, pattern: re.Pattern[str],
            replacement: str | Callable[[re.Match[str]], str]) -> Apply:
    """Apply `pattern` only where `anchor` (a literal inside every match) occurs: each match
    starts at the first of the (at most 64) characters from `before` that precede the anchor,
    and ends within `limit` characters after it. The rest of the text is never scanned."""

    def apply(text: str, lowered: str) -> str:
        if len(lowered) != len(text):  # lower() changed the length: positions do not line up
            return pattern.sub(replacement, text)
        out: list[str] = []
        done = 0
        at = lowered.find(anchor)
        while at != -1:
            start = at
            while start > done and at - start < 64 and lowered[start - 1] in before:
                start -= 1
            match = pattern.match(text, start, at + len(anchor) + limit)
            if match is not None and match.end() > at:
                out.append(text[done:start])
                out.append(match.expand(replacement) if isinstance(replacement, str)
                           else replacement(match))
                done = match.end()
                at = lowered.find(anchor, done)
            else:
                at = lowered.find(anchor, at + 1)
        return "".join(out) + text[done:] if out else text

    return apply


_IDENTIFIER = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_ASSIGNED = re.compile(_ASSIGNMENT[len("(?i)(?<![\\w.\\-])"):].replace(
    rf"[\w.\-]{{0,{_MAX_NAME}}}?(?:{_NAME_STEMS})[\w.\-]{{0,{_MAX_NAME}}}?", r"[\w.\-]{1,160}", 1))
_ASSIGNMENT_ANYWHERE = re.compile(_ASSIGNMENT)
_STEMS = tuple(_NAME_STEMS.split("|"))


def _assignments(text: str, lowered: str) -> str:
    """Values assigned to secret names: found from each name stem, without scanning the text
    with the full pattern."""
    if len(lowered) != len(text):
        return _ASSIGNMENT_ANYWHERE.sub(_assignment, text)
    starts: set[int] = set()
    for stem in _STEMS:
        at = lowered.find(stem)
        while at != -1:
            start = at
            while start > 0 and at - start < _MAX_NAME and (
                    lowered[start - 1] in _IDENTIFIER or lowered[start - 1].isalnum()):
                start -= 1
            if start == 0 or not (lowered[start - 1] in _IDENTIFIER
                                  or lowered[start - 1].isalnum()):
                starts.add(start)
            at = lowered.find(stem, at + len(stem))
    out: list[str] = []
    done = 0
    for start in sorted(starts):
        if start < done:
            continue
        match = _ASSIGNED.match(text, start)
        if match is None:
            continue
        replaced = _assignment(match)
        if replaced != match.group(0):
            out.append(text[done:start])
            out.append(replaced)
            done = match.end()
    return "".join(out) + text[done:] if out else text


def _rule(name: str, label: str, description: str, pattern: str,
          replacement: str | Callable[[re.Match[str]], str] | None = None,
          triggers: tuple[str, ...] = (), flags: int = 0,
          anchor: tuple[str, str, int] | None = None, apply: Apply | None = None) -> Rule:
    compiled = re.compile(pattern, flags)
    repl = _label(label) if replacement is None else replacement
    if apply is None:
        apply = _everywhere(compiled, repl) if anchor is None else _around(*anchor, compiled, repl)
    return Rule(name, label, description, compiled, apply, triggers)


_DIGITS: tuple[str, ...] = ("0000",)  # stands for "four digits in a row" (see `apply_rules`)

# Order matters: specific shapes first, then `name=value`, then personal data. Patterns start
# with their literal prefix (a word boundary is checked by a look-behind after it), so the
# regex engine can skip ahead to candidates.
RULES: tuple[Rule, ...] = (
    _rule("private-key", "private_key", "PEM private key blocks (`-----BEGIN … PRIVATE KEY-----`)",
          r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
          r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
          triggers=("-----begin",), flags=re.DOTALL),
    _rule("jwt", "jwt", "JSON Web Tokens (`eyJ….eyJ….…`)",
          r"eyJ(?<!\w...)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
          triggers=("eyj",)),
    _rule("url-password", "password", "passwords in URLs (`scheme://user:password@host`)",
          r"(?i)(?<![\w+.\-])([a-z][a-z0-9+.\-]{0,30}://[^\s:/?#@]{0,256}:)(?!\[REDACTED)"
          r"[^\s/?#]+(@)",
          lambda m: f"{m.group(1)}[REDACTED:password]{m.group(2)}", triggers=("://",),
          anchor=("://", "abcdefghijklmnopqrstuvwxyz0123456789+.-", 1024)),
    _rule("bearer-token", "bearer_token", "bearer tokens (`Bearer …`)",
          r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*", r"\1[REDACTED:bearer_token]",
          triggers=("bearer",)),
    _rule("basic-auth", "basic_auth", "HTTP basic credentials (`Authorization: Basic …`)",
          r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?basic\s+)[A-Za-z0-9+/]{4,}=*",
          r"\1[REDACTED:basic_auth]", triggers=("authorization",)),
    _rule("openai-anthropic-key", "api_key",
          "OpenAI, Anthropic and other `sk-…` keys (`sk-proj-…`, `sk-ant-…`, legacy `sk-…`)",
          r"sk-(?<!\w...)(?:(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{8,}"
          r"|(?=[A-Za-z0-9_\-]*(?:[0-9]|[A-Za-z]{16}))[A-Za-z0-9_\-]{20,})", triggers=("sk-",)),
    _rule("aws-access-key-id", "api_key", "AWS access key ids (`AKIA…`, `ASIA…`, `ABIA…`, `ACCA…`)",
          r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)(?<!\w....)[A-Z0-9]{16}\b",
          triggers=("a3t", "akia", "asia", "abia", "acca")),
    _rule("github-token", "api_key",
          "GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`)",
          r"gh[pousr]_(?<!\w....)[A-Za-z0-9]{36,}|github_pat_(?<!\w.{11})[A-Za-z0-9_]{22,}",
          triggers=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _rule("gitlab-token", "api_key", "GitLab personal, pipeline and runner tokens (`glpat-…`)",
          r"(?:glpat-|glptt-)(?<!\w.{6})[A-Za-z0-9_\-]{20,}|glrt-(?<!\w.{5})[A-Za-z0-9_\-]{20,}",
          triggers=("glpat-", "glptt-", "glrt-")),
    _rule("slack-token", "api_key", "Slack tokens (`xoxb-`, `xoxp-`, `xoxa-`, `xoxe-` …)",
          r"xox[abeposr]-(?<!\w.{5})[A-Za-z0-9-]{10,}", triggers=("xox",)),
    _rule("slack-webhook", "api_key", "Slack incoming-webhook URLs",
          r"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}",
          triggers=("hooks.slack.com",)),
    _rule("stripe-key", "api_key", "Stripe secret, restricted and webhook keys "
          "(`sk_live_`, `rk_live_`, `sk_test_`, `whsec_`)",
          r"(?:sk_|rk_)(?<!\w...)(?:live|test|prod)_[A-Za-z0-9]{10,}"
          r"|whsec_(?<!\w.{6})[A-Za-z0-9]{20,}",
          triggers=("sk_", "rk_", "whsec_")),
    _rule("google-api-key", "api_key", "Google API keys (`AIza…`) and OAuth access tokens (`ya29.`)",
          r"AIza(?<!\w....)[0-9A-Za-z_\-]{35}|ya29\.(?<!\w.{5})[0-9A-Za-z_\-]{20,}",
          triggers=("aiza", "ya29.")),
    _rule("huggingface-token", "api_key", "Hugging Face tokens (`hf_…`)",
          r"hf_(?<!\w...)[A-Za-z0-9]{30,}", triggers=("hf_",)),
    _rule("npm-token", "api_key", "npm access tokens (`npm_…`)",
          r"npm_(?<!\w....)[A-Za-z0-9]{36}", triggers=("npm_",)),
    _rule("pypi-token", "api_key", "PyPI upload tokens (`pypi-AgEIcHlwaS5vcmc…`)",
          r"pypi-AgEIcHlwaS5vcmc(?<!\w.{20})[A-Za-z0-9_\-]{50,}", triggers=("pypi-",)),
    _rule("sendgrid-key", "api_key", "SendGrid API keys (`SG.….…`)",
          r"SG\.(?<!\w...)[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}", triggers=("sg.",)),
    _rule("secret-assignment", "api_key|secret",
          "any value assigned to a name that names a secret (`name=value`, `name: value`, "
          "`\"name\": \"value\"`; quoted values whole, unquoted values to the next delimiter), "
          "and any value under such a key in structured content; in URLs also `?key=`, "
          "`&sig=` and `&signature=`",
          _ASSIGNMENT, _assignment, apply=_assignments,
          triggers=("pass", "pwd", "secret", "token", "key", "credential", "authorization",
                    "cookie", "sig")),
    _rule("email", "email", "email addresses",
          r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*"
          r"\.[A-Za-z]{2,}",
          triggers=("@",), anchor=("@", "abcdefghijklmnopqrstuvwxyz0123456789._%+-", 256)),
    _rule("card-number", "card_number", "payment card numbers (13–19 digits passing the Luhn check)",
          r"\d(?<!\d\d)(?:[ -]?\d){12,18}(?!\d)", _card, triggers=_DIGITS),
)


def _trie(words: set[str]) -> str:
    """A regex matching any of `words`, as a prefix tree (one alternative per first letter)."""
    tree: dict[str, Any] = {}
    for word in sorted(words, key=len):
        node = tree
        for char in word:
            if node.get("") is True:
                break  # a shorter word already covers this one
            node = node.setdefault(char, {})
        else:
            node.clear()
            node[""] = True

    def emit(node: dict[str, Any]) -> str:
        branches = [re.escape(c) + emit(child) for c, child in sorted(node.items()) if c]
        if len(branches) == 1:
            return branches[0]
        return f"(?:{'|'.join(branches)})" if branches else ""

    return emit(tree)


# a text without any trigger (and without four digits in a row) cannot match any rule
_WORDS = {t for rule in RULES if rule.triggers is not _DIGITS for t in rule.triggers}
_TRIGGER = re.compile(_trie(_WORDS))
_FOUR_DIGITS = re.compile(r"\d{4}")
_ASCII_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else b for b in range(256))
# the trigger words found in a text select the rules to run (a word covered by a shorter one
# is found as the shorter one)
_GATES: tuple[tuple[Rule, frozenset[str]], ...] = tuple(
    (rule, frozenset(min((w for w in _WORDS if t.startswith(w)), key=len)
                     for t in rule.triggers if rule.triggers is not _DIGITS))
    for rule in RULES)


def apply_rules(text: str) -> str:
    """`text` with every rule applied (each match replaced by its `[REDACTED:…]` label)."""
    lowered = text.lower()
    digits = _has_four_digits(text)
    if _TRIGGER.search(lowered) is None:
        if not digits:
            return text  # the common case: nothing any rule could match
        found: set[str] = set()
    else:
        found = set(_TRIGGER.findall(lowered))
    for rule, gate in _GATES:
        if (digits if rule.triggers is _DIGITS else not gate.isdisjoint(found)):
            text = rule.apply(text, lowered)
            if len(text) != len(lowered):
                lowered = text.lower()
    return text


def _has_four_digits(text: str) -> bool:
    """Whether `text` has four digits in a row; ASCII text is checked by a byte translation,
    several times faster than the regex scan it spares."""
    if text.isascii():
        return b"0000" in text.encode("ascii").translate(_ASCII_DIGITS_AS_ZERO)
    return _FOUR_DIGITS.search(text) is not None


def rules_markdown() -> str:
    """The published rule list: a Markdown table generated from `RULES`."""
    lines = ["| Rule | Finds | Replaced by |", "| --- | --- | --- |"]
    for rule in RULES:
        labels = " or ".join(f"`[REDACTED:{label}]`" for label in rule.label.split("|"))
        lines.append(f"| `{rule.name}` | {rule.description} | {labels} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # regenerate the published list: python -m tracescore._secret_rules
    print(rules_markdown(), end="")
