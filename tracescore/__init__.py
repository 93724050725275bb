"""tracescore: observe LLM agents with OpenTelemetry GenAI spans and score live traffic.

The public API is re-exported here and resolved lazily, so `import tracescore` stays light
(litellm, the judge and the CLI load only when first used).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from tracescore._version import __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # setup
    "configure": "tracescore._setup",
    "flush": "tracescore._setup",
    "shutdown": "tracescore._setup",
    "TracescoreHandle": "tracescore._setup",
    # content capture
    "set_content_capture": "tracescore._config",
    # instrumentation
    "agent": "tracescore.instrument._decorators",
    "tool": "tracescore.instrument._decorators",
    "llm": "tracescore.instrument._decorators",
    "span": "tracescore.instrument._decorators",
    "propagate_context": "tracescore.instrument._context",
    "ContextThreadPoolExecutor": "tracescore.instrument._context",
    "instrument_litellm": "tracescore.instrument._litellm",
    "uninstrument_litellm": "tracescore.instrument._litellm",
    "instrument_agent": "tracescore.instrument._agent_object",
    "uninstrument_agent": "tracescore.instrument._agent_object",
    "AgentCall": "tracescore.instrument._calls",
    "add_agent_call_listener": "tracescore.instrument._calls",
    "remove_agent_call_listener": "tracescore.instrument._calls",
    "set_ground_truth": "tracescore.instrument._calls",
    "ground_truth": "tracescore.instrument._calls",
    "add_context": "tracescore.instrument._calls",
    # scorers
    "Scorer": "tracescore.scoring",
    "ScoreResult": "tracescore.scoring",
    "JudgeUsage": "tracescore.scoring",
    "AnswerRelevancyScorer": "tracescore.scoring",
    "ContentSimilarityScorer": "tracescore.scoring",
    "create_answer_relevancy_scorer": "tracescore.scoring",
    "create_content_similarity_scorer": "tracescore.scoring",
    "LLMJudgeScorer": "tracescore.scoring",
    "create_llm_judge_scorer": "tracescore.scoring",
    "KeywordCoverageScorer": "tracescore.scoring",
    "CompletenessScorer": "tracescore.scoring",
    "ToneConsistencyScorer": "tracescore.scoring",
    "create_tone_scorer": "tracescore.scoring",
    "create_completeness_scorer": "tracescore.scoring",
    "TextualDifferenceScorer": "tracescore.scoring",
    "create_keyword_coverage_scorer": "tracescore.scoring",
    "create_textual_difference_scorer": "tracescore.scoring",
    "ToolCall": "tracescore.scoring",
    "ScorerInput": "tracescore.scoring",
    "JudgedScorer": "tracescore.scoring",
    "ToolCallAccuracyScorer": "tracescore.scoring",
    "create_tool_call_accuracy_scorer": "tracescore.scoring",
    "BiasScorer": "tracescore.scoring",
    "ToxicityScorer": "tracescore.scoring",
    "ToolCallAccuracyLLMScorer": "tracescore.scoring",
    "create_bias_scorer": "tracescore.scoring",
    "create_toxicity_scorer": "tracescore.scoring",
    "create_tool_call_accuracy_scorer_llm": "tracescore.scoring",
    "FaithfulnessScorer": "tracescore.scoring",
    "create_faithfulness_scorer": "tracescore.scoring",
    "ContextRelevanceScorer": "tracescore.scoring",
    "create_context_relevance_scorer": "tracescore.scoring",
    "HallucinationScorer": "tracescore.scoring",
    "create_hallucination_scorer": "tracescore.scoring",
    "Judge": "tracescore.scoring",
    "LiteLLMJudge": "tracescore.scoring",
    "OfflineJudge": "tracescore.scoring",
    "JudgeRequest": "tracescore.scoring",
    "JudgeReply": "tracescore.scoring",
    # online scoring
    "OnlineScorer": "tracescore.online",
    "TraceLimits": "tracescore.online",
    "ScoringSpanProcessor": "tracescore.online",
    "PhoenixSink": "tracescore.online",
    "RecognisedCall": "tracescore.online",
    "AgentMapping": "tracescore.online",
    "build_recognisers": "tracescore.online",
    "recognise": "tracescore.online",
    "recogniser_markers": "tracescore.online",
    # scoring gateway
    "Gateway": "tracescore.gateway",
    "GatewayConfig": "tracescore.gateway",
    "load_gateway_config": "tracescore.gateway",
    # offline evals
    "run_evals": "tracescore.evals",
    "arun_evals": "tracescore.evals",
    "EvalResult": "tracescore.evals",
    "EvalSummary": "tracescore.evals",
    "ItemResult": "tracescore.evals",
    "ItemFailure": "tracescore.evals",
    # calibration against human labels
    "calibrate": "tracescore.calibration",
    "CalibrationReport": "tracescore.calibration",
    "LabelSpec": "tracescore.calibration",
    # errors
    "TracescoreError": "tracescore._exceptions",
    "ConfigurationError": "tracescore._exceptions",
    "JudgeError": "tracescore._exceptions",
    "JudgeAuthenticationError": "tracescore._exceptions",
    "ScorerError": "tracescore._exceptions",
}

__all__ = [
    "AgentCall",
    "AgentMapping",
    "AnswerRelevancyScorer",
    "BiasScorer",
    "CalibrationReport",
    "CompletenessScorer",
    "ConfigurationError",
    "ContentSimilarityScorer",
    "ContextRelevanceScorer",
    "ContextThreadPoolExecutor",
    "EvalResult",
    "EvalSummary",
    "FaithfulnessScorer",
    "Gateway",
    "GatewayConfig",
    "HallucinationScorer",
    "ItemFailure",
    "ItemResult",
    "Judge",
    "JudgeAuthenticationError",
    "JudgeError",
    "JudgeReply",
    "JudgeRequest",
    "JudgeUsage",
    "JudgedScorer",
    "KeywordCoverageScorer",
    "LLMJudgeScorer",
    "LabelSpec",
    "LiteLLMJudge",
    "OfflineJudge",
    "OnlineScorer",
    "PhoenixSink",
    "RecognisedCall",
    "ScoreResult",
    "Scorer",
    "ScorerError",
    "ScorerInput",
    "ScoringSpanProcessor",
    "TextualDifferenceScorer",
    "ToneConsistencyScorer",
    "ToolCall",
    "ToolCallAccuracyLLMScorer",
    "ToolCallAccuracyScorer",
    "ToxicityScorer",
    "TraceLimits",
    "TracescoreError",
    "TracescoreHandle",
    "__version__",
    "add_agent_call_listener",
    "add_context",
    "agent",
    "arun_evals",
    "build_recognisers",
    "calibrate",
    "configure",
    "create_answer_relevancy_scorer",
    "create_bias_scorer",
    "create_completeness_scorer",
    "create_content_similarity_scorer",
    "create_context_relevance_scorer",
    "create_faithfulness_scorer",
    "create_hallucination_scorer",
    "create_keyword_coverage_scorer",
    "create_llm_judge_scorer",
    "create_textual_difference_scorer",
    "create_tone_scorer",
    "create_tool_call_accuracy_scorer",
    "create_tool_call_accuracy_scorer_llm",
    "create_toxicity_scorer",
    "flush",
    "ground_truth",
    "instrument_agent",
    "instrument_litellm",
    "llm",
    "load_gateway_config",
    "propagate_context",
    "recognise",
    "recogniser_markers",
    "remove_agent_call_listener",
    "run_evals",
    "set_content_capture",
    "set_ground_truth",
    "shutdown",
    "span",
    "tool",
    "uninstrument_agent",
    "uninstrument_litellm",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracescore' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from tracescore._config import set_content_capture
    from tracescore._exceptions import ConfigurationError, JudgeError, ScorerError, TracescoreError
    from tracescore._setup import TracescoreHandle, configure, flush, shutdown
    from tracescore.calibration import CalibrationReport, LabelSpec, calibrate
    from tracescore.evals import (
        EvalResult,
        EvalSummary,
        ItemFailure,
        ItemResult,
        arun_evals,
        run_evals,
    )
    from tracescore.gateway import Gateway, GatewayConfig, load_gateway_config
    from tracescore.instrument._agent_object import instrument_agent, uninstrument_agent
    from tracescore.instrument._calls import (
        AgentCall,
        add_agent_call_listener,
        add_context,
        ground_truth,
        remove_agent_call_listener,
        set_ground_truth,
    )
    from tracescore.instrument._context import ContextThreadPoolExecutor, propagate_context
    from tracescore.instrument._decorators import agent, llm, span, tool
    from tracescore.instrument._litellm import instrument_litellm, uninstrument_litellm
    from tracescore.online import (
        AgentMapping,
        OnlineScorer,
        PhoenixSink,
        RecognisedCall,
        ScoringSpanProcessor,
        TraceLimits,
        build_recognisers,
        recognise,
        recogniser_markers,
    )
    from tracescore.scoring import (
        AnswerRelevancyScorer,
        BiasScorer,
        CompletenessScorer,
        ContentSimilarityScorer,
        ContextRelevanceScorer,
        FaithfulnessScorer,
        HallucinationScorer,
        Judge,
        JudgeAuthenticationError,
        JudgedScorer,
        JudgeReply,
        JudgeRequest,
        JudgeUsage,
        KeywordCoverageScorer,
        LiteLLMJudge,
        LLMJudgeScorer,
        OfflineJudge,
        Scorer,
        ScoreResult,
        ScorerInput,
        TextualDifferenceScorer,
        ToneConsistencyScorer,
        ToolCall,
        ToolCallAccuracyLLMScorer,
        ToolCallAccuracyScorer,
        ToxicityScorer,
        create_answer_relevancy_scorer,
        create_bias_scorer,
        create_completeness_scorer,
        create_content_similarity_scorer,
        create_context_relevance_scorer,
        create_faithfulness_scorer,
        create_hallucination_scorer,
        create_keyword_coverage_scorer,
        create_llm_judge_scorer,
        create_textual_difference_scorer,
        create_tone_scorer,
        create_tool_call_accuracy_scorer,
        create_tool_call_accuracy_scorer_llm,
        create_toxicity_scorer,
    )
