"""What a run-scope and a conversation-scope scorer judge: a run's steps in order, the steps it
was expected to take, and a conversation's turns.

A leaf of the scoring package (it imports nothing of tracescore but the errors), so the scorer
input, the dataset readers and the scorers can all use it.

    Step(name="search", type="tool_call", arguments={"q": "rain"}, result=[...], duration_ms=12)
    Run(steps=(...,))                     # a whole agent or workflow call, steps in order
    Expectation(steps=(ExpectedStep(name="search"), ...), ordering="relaxed")
    Turn(input="And Paris?", output="Sunny in Paris.")   # one turn of a conversation
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tracescore._exceptions import ConfigurationError

# The kinds of step a run records (the reference system's step types, in our words).
TOOL_CALL = "tool_call"
LLM_CALL = "llm_call"
AGENT = "agent"
WORKFLOW_STEP = "workflow_step"
STEP_TYPES = (TOOL_CALL, LLM_CALL, AGENT, WORKFLOW_STEP)
ORDERINGS = ("relaxed", "strict", "unordered")


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "_UNSET"  # unpickled as this module's one instance


_UNSET: Any = _Unset()  # an expected step that does not constrain its arguments


@dataclass(frozen=True, kw_only=True)
class Step:
    """One step of a run: a tool call (its arguments, result or error), an LLM call (its model
    and tokens), a sub-agent or a workflow step, with when it started (ms after the run's
    start), its duration and its own steps."""

    name: str
    type: str = TOOL_CALL
    arguments: Any = None
    result: Any = None
    error: str | None = None
    duration_ms: float | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    children: tuple[Step, ...] = ()
    start_ms: float | None = None

    @property
    def succeeded(self) -> bool:
        return self.error is None


@dataclass(frozen=True, kw_only=True)
class Run:
    """A whole agent or workflow call: its steps in start order (each with its own steps).

    Read from a trace, `steps` are the run's tool calls in start order (its sub-agents' too),
    what trajectories are compared on, and `timeline` is everything the run did: every LLM
    call, tool call and sub-agent in start order, a sub-agent's own steps as its children, each
    with its start, duration and error."""

    steps: tuple[Step, ...] = ()
    duration_ms: float | None = None  # the whole run's; None: the sum of its steps'
    error: str | None = None
    timeline: tuple[Step, ...] = ()

    @property
    def step_names(self) -> list[str]:
        return [s.name for s in self.steps]


@dataclass(frozen=True, kw_only=True)
class ExpectedStep:
    """A step the run should take: its name, optionally its type and arguments (compared as
    JSON when given), and what its own steps should be. `type_inferred`: the type was not
    given but read from the arguments (a step given arguments is a tool call)."""

    name: str
    type: str | None = None
    arguments: Any = _UNSET
    children: Expectation | None = None
    type_inferred: bool = False

    @property
    def has_arguments(self) -> bool:
        return self.arguments is not _UNSET


@dataclass(frozen=True, kw_only=True)
class Expectation:
    """What a run should look like: expected steps (compared `relaxed`: in order, others
    allowed; `strict`: exactly; `unordered`: present), step and time budgets, tools it must not
    call, and how many retries of a failing tool are fine."""

    steps: tuple[ExpectedStep, ...] | None = None
    ordering: str = "relaxed"
    allow_repeated_steps: bool = True
    max_steps: int | None = None
    max_total_tokens: int | None = None
    max_total_duration_ms: float | None = None
    no_redundant_calls: bool | None = None
    blacklisted_tools: tuple[str, ...] = ()
    blacklisted_sequences: tuple[tuple[str, ...], ...] = ()
    max_retries_per_tool: int = 2
    given: frozenset[str] = frozenset()  # the fields set (default: those not at their default)

    def __post_init__(self) -> None:
        if not self.given:
            defaults = Expectation.__dataclass_fields__
            object.__setattr__(self, "given", frozenset(
                name for name, f in defaults.items()
                if name != "given" and getattr(self, name) != f.default))

    def over(self, defaults: Expectation) -> Expectation:
        """This expectation with `defaults` filling the fields it does not set."""
        values = {name: getattr(self if name in self.given else defaults, name)
                  for name in Expectation.__dataclass_fields__ if name != "given"}
        return Expectation(**values, given=self.given | defaults.given)


@dataclass(frozen=True, kw_only=True)
class Turn:
    """One turn of a conversation: the user's message, the agent's answer, and (when known)
    the run that produced it."""

    input: Any
    output: Any
    run: Run | None = None


# --- from data (dataset items, options) ------------------------------------------------------
_STEP_KEYS = ("name", "type", "arguments", "result", "error", "start_ms", "duration_ms", "model",
              "input_tokens", "output_tokens", "steps")
_EXPECTATION_KEYS = ("steps", "ordering", "allow_repeated_steps", "max_steps",
                     "max_total_tokens", "max_total_duration_ms", "no_redundant_calls",
                     "blacklisted_tools", "blacklisted_sequences", "max_retries_per_tool")


def as_run(value: object, where: str) -> Run:
    """A Run from a list of steps (tool names, or objects with the Step fields; `steps` for a
    step's own steps)."""
    if isinstance(value, Run):
        return value
    return Run(steps=_steps(value, where))


def _steps(value: object, where: str) -> tuple[Step, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise ConfigurationError(f"{where} must be a list of steps, got {type(value).__name__}")
    return tuple(_step(v, f"{where}[{i}]") for i, v in enumerate(value))


def _step(value: object, where: str) -> Step:
    if isinstance(value, Step):
        return value
    if isinstance(value, str) and value:
        return Step(name=value)
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where} must be a step name or an object with a 'name', "
                                 f"got {type(value).__name__}")
    _known(value, _STEP_KEYS, where)
    kwargs = {k: value[k] for k in _STEP_KEYS if k != "steps" and k in value}
    _name_and_type(kwargs, where, required_type=True)
    return Step(**kwargs, children=_steps(value.get("steps", []), f"{where}.steps"))


def as_expectation(value: object, where: str) -> Expectation:
    """An Expectation from a list of expected steps (names, or objects with name, type,
    arguments, and `steps` for what its own steps should be), or an object with `steps` and
    the other Expectation fields."""
    if isinstance(value, Expectation):
        return value
    if isinstance(value, (list, tuple)):
        return Expectation(steps=_expected_steps(value, where), given=frozenset({"steps"}))
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"{where} must be a list of expected steps or an object with "
                                 f"'steps', got {type(value).__name__}")
    _known(value, _EXPECTATION_KEYS, where)
    kwargs = dict(value)
    if kwargs.get("steps") is not None:
        kwargs["steps"] = _expected_steps(kwargs["steps"], f"{where}.steps")
    if kwargs.get("ordering", "relaxed") not in ORDERINGS:
        raise ConfigurationError(f"{where}.ordering must be one of {', '.join(ORDERINGS)}, "
                                 f"got {kwargs['ordering']!r}")
    for key in ("max_steps", "max_total_tokens", "max_total_duration_ms"):
        limit = kwargs.get(key)
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))
                                  or not limit >= 0 or limit == float("inf")):
            raise ConfigurationError(f"{where}.{key} must be a finite number >= 0, got {limit!r}")
    for key in ("allow_repeated_steps", "no_redundant_calls"):
        if key in kwargs and not isinstance(kwargs[key], bool) and \
                not (key == "no_redundant_calls" and kwargs[key] is None):
            raise ConfigurationError(f"{where}.{key} must be true or false, got {kwargs[key]!r}")
    retries = kwargs.get("max_retries_per_tool", 2)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ConfigurationError(f"{where}.max_retries_per_tool must be an integer >= 0, "
                                 f"got {retries!r}")
    kwargs["blacklisted_tools"] = _names(kwargs.get("blacklisted_tools"),
                                         f"{where}.blacklisted_tools")
    sequences = kwargs.get("blacklisted_sequences") or ()
    if isinstance(sequences, (str, Mapping)) or not isinstance(sequences, Sequence):
        raise ConfigurationError(f"{where}.blacklisted_sequences must be a list of lists of "
                                 f"tool names")
    kwargs["blacklisted_sequences"] = tuple(
        _names(seq, f"{where}.blacklisted_sequences[{i}]") for i, seq in enumerate(sequences))
    return Expectation(**kwargs, given=frozenset(value))


def _names(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, Mapping)) or not isinstance(value, Sequence) or \
            not all(isinstance(v, str) for v in value):
        raise ConfigurationError(f"{where} must be a list of tool names, got {value!r}")
    return tuple(value)


def _expected_steps(value: object, where: str) -> tuple[ExpectedStep, ...]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise ConfigurationError(f"{where} must be a list of expected steps, "
                                 f"got {type(value).__name__}")
    steps = []
    for index, item in enumerate(value):
        at = f"{where}[{index}]"
        if isinstance(item, ExpectedStep):
            steps.append(item)
        elif isinstance(item, str) and item:
            steps.append(ExpectedStep(name=item))
        elif isinstance(item, Mapping):
            _known(item, ("name", "type", "arguments", "steps"), at)
            kwargs = {k: item[k] for k in ("name", "type", "arguments") if k in item}
            _name_and_type(kwargs, at, required_type=False)
            if "arguments" in kwargs and kwargs.get("type") is None:
                kwargs["type"] = TOOL_CALL  # arguments are a tool call's
                kwargs["type_inferred"] = True
            children = item.get("steps")
            steps.append(ExpectedStep(**kwargs, children=None if children is None else
                                      as_expectation(children, f"{at}.steps")))
        else:
            raise ConfigurationError(f"{at} must be a step name or an object with a 'name', "
                                     f"got {type(item).__name__}")
    return tuple(steps)


def as_turns(value: object, where: str) -> tuple[Turn, ...]:
    """Turns from a list of user messages (texts) or objects with `input` and, when already
    answered, `output` (and the turn's `trajectory`)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)) \
            or not value:
        raise ConfigurationError(f"{where} must be a non-empty list of turns")
    turns = []
    for index, item in enumerate(value):
        at = f"{where}[{index}]"
        if isinstance(item, Turn):
            turns.append(item)
        elif isinstance(item, str):
            turns.append(Turn(input=item, output=None))
        elif isinstance(item, Mapping) and "input" in item:
            _known(item, ("input", "output", "trajectory"), at)
            run = item.get("trajectory")
            turns.append(Turn(input=item["input"], output=item.get("output"),
                              run=None if run is None else as_run(run, f"{at}.trajectory")))
        else:
            raise ConfigurationError(f"{at} must be a user message or an object with 'input'")
    return tuple(turns)


def _known(value: Mapping[Any, Any], keys: tuple[str, ...], where: str) -> None:
    unknown = sorted(str(k) for k in value if k not in keys)
    if unknown:
        raise ConfigurationError(f"{where} has unknown keys {unknown} (known: {', '.join(keys)})")


def _name_and_type(kwargs: dict[str, Any], where: str, *, required_type: bool) -> None:
    if not isinstance(kwargs.get("name"), str) or not kwargs["name"]:
        raise ConfigurationError(f"{where} needs a non-empty 'name' string")
    kind = kwargs.get("type")
    if (kind is not None or required_type) and kind not in (None, *STEP_TYPES):
        raise ConfigurationError(f"{where}.type must be one of {', '.join(STEP_TYPES)}, "
                                 f"got {kind!r}")
