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

__all__ = ["RULES", "Rule", "apply_rules", "hide_value", "rules_markdown", "secret_name_label"]

_MAX_NAME = 64  # characters of a name considered by the assignment rule, each side of its word


@dataclass(frozen=True, slots=True)
class Rule:
    """One redaction rule: what it finds, what replaces it, and literals any match contains."""

    name: str
    label: str
    description: str
    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]
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
_NAME_STEMS = r"pass|pwd|secret|token|key|credential|authorization|cookie"
_QUOTE = r"(?:\\?[\"'`])"
_STOP = r"\s\"'`,;&|}\])<>{\[\\"  # characters an unquoted value never contains
_ASSIGNMENT = (
    rf"(?i)(?<![\w.\-])(?P<name>[\w.\-]{{0,{_MAX_NAME}}}?(?:{_NAME_STEMS})[\w.\-]{{0,{_MAX_NAME}}}?)"
    rf"(?P<op>{_QUOTE}?[ \t]*(?::=|=>|:|=)[ \t]*)"
    r"(?:"
    r"(?P<eq>\\\")(?P<ev>[^\"\n]{0,2048}?)\\\""  # an escaped-quoted value (JSON inside text)
    r"|(?P<dq>\")(?P<dv>[^\"\n]{0,2048})\""
    r"|(?P<sq>')(?P<sv>[^'\n]{0,2048})'"
    r"|\[(?!REDACTED)(?P<lv>[^\[\]\n]{0,2048})\]"  # a list of values
    # unquoted: runs over spaces, but not into a following `name=`; (?=(…))\N is an atomic group
    rf"|(?P<uv>[^{_STOP}]+(?:[ \t]+(?=(?P<w>[^{_STOP}=:]+))(?P=w)(?![=:]))*)"
    r")"
)
_SCHEMES = frozenset({"bearer", "basic", "token", "digest"})
_REDACTED_NEXT = re.compile(r"[ \t]*\[REDACTED")
_NOT_SECRET_VALUES = frozenset({"", "null", "none", "true", "false", "nil", "undefined"})


def _assignment(match: re.Match[str]) -> str:
    label = secret_name_label(match.group("name"))
    if label is None:
        return match.group(0)
    for group in ("ev", "dv", "sv", "lv", "uv"):
        value = match.group(group)
        if value is not None:
            break
    start, end = match.span(group)
    word = value.strip().lower()
    if word in _NOT_SECRET_VALUES or (word in _SCHEMES and _REDACTED_NEXT.match(match.string, end)):
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


def _rule(name: str, label: str, description: str, pattern: str,
          replacement: str | Callable[[re.Match[str]], str] | None = None,
          triggers: tuple[str, ...] = (), flags: int = 0) -> Rule:
    return Rule(name, label, description, re.compile(pattern, flags),
                _label(label) if replacement is None else replacement, triggers)


_DIGITS: tuple[str, ...] = ("0000",)  # stands for "four digits in a row" (see `apply_rules`)

# Order matters: specific shapes first, then `name=value`, then personal data.
RULES: tuple[Rule, ...] = (
    _rule("private-key", "private_key", "PEM private key blocks (`-----BEGIN … PRIVATE KEY-----`)",
          r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
          r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
          triggers=("-----begin",), flags=re.DOTALL),
    _rule("jwt", "jwt", "JSON Web Tokens (`eyJ….eyJ….…`)",
          r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", triggers=("eyj",)),
    _rule("url-password", "password", "passwords in URLs (`scheme://user:password@host`)",
          r"(?i)\b([a-z][a-z0-9+.\-]{0,30}://[^\s:/?#@]{0,256}:)(?!\[REDACTED)[^\s/?#]+(@)",
          r"\1[REDACTED:password]\2", triggers=("://",)),
    _rule("bearer-token", "bearer_token", "bearer tokens (`Bearer …`)",
          r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]{8,}=*", r"\1[REDACTED:bearer_token]",
          triggers=("bearer",)),
    _rule("basic-auth", "basic_auth", "HTTP basic credentials (`Authorization: Basic …`)",
          r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?basic\s+)[A-Za-z0-9+/]{4,}=*",
          r"\1[REDACTED:basic_auth]", triggers=("basic",)),
    _rule("openai-anthropic-key", "api_key",
          "OpenAI, Anthropic and other `sk-…` keys (`sk-proj-…`, `sk-ant-…`, legacy `sk-…`)",
          r"\bsk-(?:(?:proj|ant|svcacct|admin)-[A-Za-z0-9_\-]{8,}"
          r"|(?=[A-Za-z0-9_\-]*(?:[0-9]|[A-Za-z]{16}))[A-Za-z0-9_\-]{20,})", triggers=("sk-",)),
    _rule("aws-access-key-id", "api_key", "AWS access key ids (`AKIA…`, `ASIA…`, `ABIA…`, `ACCA…`)",
          r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
          triggers=("a3t", "akia", "asia", "abia", "acca")),
    _rule("github-token", "api_key",
          "GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`)",
          r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
          triggers=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")),
    _rule("gitlab-token", "api_key", "GitLab personal, pipeline and runner tokens (`glpat-…`)",
          r"\bgl(?:pat|ptt|rt)-[A-Za-z0-9_\-]{20,}", triggers=("glpat-", "glptt-", "glrt-")),
    _rule("slack-token", "api_key", "Slack tokens (`xoxb-`, `xoxp-`, `xoxa-`, `xoxe-` …)",
          r"\bxox[abeposr]-[A-Za-z0-9-]{10,}", triggers=("xox",)),
    _rule("slack-webhook", "api_key", "Slack incoming-webhook URLs",
          r"(?i)hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}",
          triggers=("hooks.slack.com",)),
    _rule("stripe-key", "api_key", "Stripe secret, restricted and webhook keys "
          "(`sk_live_`, `rk_live_`, `sk_test_`, `whsec_`)",
          r"\b(?:(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,})",
          triggers=("sk_", "rk_", "whsec_")),
    _rule("google-api-key", "api_key", "Google API keys (`AIza…`) and OAuth access tokens (`ya29.`)",
          r"\b(?:AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,})", triggers=("aiza", "ya29.")),
    _rule("huggingface-token", "api_key", "Hugging Face tokens (`hf_…`)",
          r"\bhf_[A-Za-z0-9]{30,}", triggers=("hf_",)),
    _rule("npm-token", "api_key", "npm access tokens (`npm_…`)",
          r"\bnpm_[A-Za-z0-9]{36}", triggers=("npm_",)),
    _rule("pypi-token", "api_key", "PyPI upload tokens (`pypi-AgEIcHlwaS5vcmc…`)",
          r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", triggers=("pypi-",)),
    _rule("sendgrid-key", "api_key", "SendGrid API keys (`SG.….…`)",
          r"\bSG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{16,64}", triggers=("sg.",)),
    _rule("secret-assignment", "api_key|secret",
          "any value assigned to a name that names a secret (`name=value`, `name: value`, "
          "`\"name\": \"value\"`; quoted values whole, unquoted values to the next delimiter), "
          "and any value under such a key in structured content",
          _ASSIGNMENT, _assignment,
          triggers=("pass", "pwd", "secret", "token", "key", "credential", "authorization",
                    "cookie")),
    _rule("email", "email", "email addresses",
          r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}",
          triggers=("@",)),
    _rule("card-number", "card_number", "payment card numbers (13–19 digits passing the Luhn check)",
          r"(?<![\d])\d(?:[ -]?\d){12,18}(?![\d])", _card, triggers=_DIGITS),
)

# one pass over the lower-cased text finds which rules can apply
_TRIGGER = re.compile("|".join(sorted(
    {re.escape(t) for rule in RULES if rule.triggers is not _DIGITS for t in rule.triggers}
    | {"[0-9]{4}"}, key=len, reverse=True)))


def apply_rules(text: str) -> str:
    """`text` with every rule applied (each match replaced by its `[REDACTED:…]` label)."""
    lowered = text.lower()
    found = set(_TRIGGER.findall(lowered))
    if not found:
        return text
    for rule in RULES:
        if rule.triggers is _DIGITS:
            if not any(t[0].isdigit() for t in found):
                continue
        elif not any(t in lowered for t in rule.triggers):
            continue
        text = rule.pattern.sub(rule.replacement, text)
    return text


def rules_markdown() -> str:
    """The published rule list: a Markdown table generated from `RULES`."""
    lines = ["| Rule | Finds | Replaced by |", "| --- | --- | --- |"]
    for rule in RULES:
        labels = " or ".join(f"`[REDACTED:{label}]`" for label in rule.label.split("|"))
        lines.append(f"| `{rule.name}` | {rule.description} | {labels} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # regenerate the published list: python -m tracescore._secret_rules
    print(rules_markdown(), end="")
