"""tracescore: observe LLM agents with OpenTelemetry GenAI spans and score live traffic.

The public API is re-exported here and resolved lazily, so `import tracescore` stays light
(litellm, the judge and the CLI load only when first used).

(About 470 lines: the one export table, and its twin for type checkers with one name per import.)
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
    "MultiTurnJudgeScorer": "tracescore.scoring",
    "TrajectoryAccuracyLLMScorer": "tracescore.scoring",
    "TrajectoryAccuracyScorer": "tracescore.scoring",
    "TrajectoryScorer": "tracescore.scoring",
    "create_multi_turn_judge_scorer": "tracescore.scoring",
    "create_trajectory_accuracy_scorer": "tracescore.scoring",
    "create_trajectory_accuracy_scorer_llm": "tracescore.scoring",
    "create_trajectory_scorer": "tracescore.scoring",
    "FaithfulnessScorer": "tracescore.scoring",
    "create_faithfulness_scorer": "tracescore.scoring",
    "ContextRelevanceScorer": "tracescore.scoring",
    "create_context_relevance_scorer": "tracescore.scoring",
    "HallucinationScorer": "tracescore.scoring",
    "create_hallucination_scorer": "tracescore.scoring",
    "Judge": "tracescore.scoring",
    "LiteLLMJudge": "tracescore.scoring",
    "CachedJudge": "tracescore.scoring",
    "cache_judge": "tracescore.scoring",
    "OfflineJudge": "tracescore.scoring",
    "JudgeRequest": "tracescore.scoring",
    "JudgeReply": "tracescore.scoring",
    # the judged scorers of the reference library ported last (issue 37)
    "AnswerSimilarityScorer": "tracescore.scoring",
    "create_answer_similarity_scorer": "tracescore.scoring",
    "ContextPrecisionScorer": "tracescore.scoring",
    "create_context_precision_scorer": "tracescore.scoring",
    "ContextRecallScorer": "tracescore.scoring",
    "create_context_recall_scorer": "tracescore.scoring",
    "NoiseSensitivityScorer": "tracescore.scoring",
    "create_noise_sensitivity_scorer": "tracescore.scoring",
    "PromptAlignmentScorer": "tracescore.scoring",
    "create_prompt_alignment_scorer": "tracescore.scoring",
    "SummarizationScorer": "tracescore.scoring",
    "create_summarization_scorer": "tracescore.scoring",
    "RubricScorer": "tracescore.scoring",
    "create_rubric_scorer": "tracescore.scoring",
    # online scoring
    "OnlineScorer": "tracescore.online",
    "FleetLimiter": "tracescore.online",
    "TraceLimits": "tracescore.online",
    "ScoringSpanProcessor": "tracescore.online",
    "ScoringLogRecordProcessor": "tracescore.online",
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
    "JudgeStepError": "tracescore._exceptions",
    "JudgeAuthenticationError": "tracescore._exceptions",
    "ScorerError": "tracescore._exceptions",
    "SetupError": "tracescore._exceptions",
    "DatasetError": "tracescore._exceptions",
    "InputError": "tracescore._exceptions",
    "OtlpJsonError": "tracescore._exceptions",
    "CollectorBuildError": "tracescore._exceptions",
}

__all__ = ["__version__", *sorted(_EXPORTS)]  # noqa: PLE0604 - the one list is `_EXPORTS`


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tracescore' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs (`X as X`: exported)
    from tracescore._config import set_content_capture as set_content_capture
    from tracescore._exceptions import (
        CollectorBuildError as CollectorBuildError,
    )
    from tracescore._exceptions import (
        ConfigurationError as ConfigurationError,
    )
    from tracescore._exceptions import (
        DatasetError as DatasetError,
    )
    from tracescore._exceptions import (
        InputError as InputError,
    )
    from tracescore._exceptions import (
        JudgeError as JudgeError,
    )
    from tracescore._exceptions import (
        JudgeStepError as JudgeStepError,
    )
    from tracescore._exceptions import (
        OtlpJsonError as OtlpJsonError,
    )
    from tracescore._exceptions import (
        ScorerError as ScorerError,
    )
    from tracescore._exceptions import (
        SetupError as SetupError,
    )
    from tracescore._exceptions import (
        TracescoreError as TracescoreError,
    )
    from tracescore._setup import TracescoreHandle as TracescoreHandle
    from tracescore._setup import configure as configure
    from tracescore._setup import flush as flush
    from tracescore._setup import shutdown as shutdown
    from tracescore.calibration import CalibrationReport as CalibrationReport
    from tracescore.calibration import LabelSpec as LabelSpec
    from tracescore.calibration import calibrate as calibrate
    from tracescore.evals import (
        EvalResult as EvalResult,
    )
    from tracescore.evals import (
        EvalSummary as EvalSummary,
    )
    from tracescore.evals import (
        ItemFailure as ItemFailure,
    )
    from tracescore.evals import (
        ItemResult as ItemResult,
    )
    from tracescore.evals import (
        arun_evals as arun_evals,
    )
    from tracescore.evals import (
        run_evals as run_evals,
    )
    from tracescore.gateway import Gateway as Gateway
    from tracescore.gateway import GatewayConfig as GatewayConfig
    from tracescore.gateway import load_gateway_config as load_gateway_config
    from tracescore.instrument._agent_object import instrument_agent as instrument_agent
    from tracescore.instrument._agent_object import uninstrument_agent as uninstrument_agent
    from tracescore.instrument._calls import (
        AgentCall as AgentCall,
    )
    from tracescore.instrument._calls import (
        add_agent_call_listener as add_agent_call_listener,
    )
    from tracescore.instrument._calls import (
        add_context as add_context,
    )
    from tracescore.instrument._calls import (
        ground_truth as ground_truth,
    )
    from tracescore.instrument._calls import (
        remove_agent_call_listener as remove_agent_call_listener,
    )
    from tracescore.instrument._calls import (
        set_ground_truth as set_ground_truth,
    )
    from tracescore.instrument._context import (
        ContextThreadPoolExecutor as ContextThreadPoolExecutor,
    )
    from tracescore.instrument._context import propagate_context as propagate_context
    from tracescore.instrument._decorators import agent as agent
    from tracescore.instrument._decorators import llm as llm
    from tracescore.instrument._decorators import span as span
    from tracescore.instrument._decorators import tool as tool
    from tracescore.instrument._litellm import instrument_litellm as instrument_litellm
    from tracescore.instrument._litellm import uninstrument_litellm as uninstrument_litellm
    from tracescore.online import (
        AgentMapping as AgentMapping,
    )
    from tracescore.online import (
        FleetLimiter as FleetLimiter,
    )
    from tracescore.online import (
        OnlineScorer as OnlineScorer,
    )
    from tracescore.online import (
        PhoenixSink as PhoenixSink,
    )
    from tracescore.online import (
        RecognisedCall as RecognisedCall,
    )
    from tracescore.online import (
        ScoringLogRecordProcessor as ScoringLogRecordProcessor,
    )
    from tracescore.online import (
        ScoringSpanProcessor as ScoringSpanProcessor,
    )
    from tracescore.online import (
        TraceLimits as TraceLimits,
    )
    from tracescore.online import (
        build_recognisers as build_recognisers,
    )
    from tracescore.online import (
        recognise as recognise,
    )
    from tracescore.online import (
        recogniser_markers as recogniser_markers,
    )
    from tracescore.scoring import (
        AnswerRelevancyScorer as AnswerRelevancyScorer,
    )
    from tracescore.scoring import (
        AnswerSimilarityScorer as AnswerSimilarityScorer,
    )
    from tracescore.scoring import (
        BiasScorer as BiasScorer,
    )
    from tracescore.scoring import (
        CachedJudge as CachedJudge,
    )
    from tracescore.scoring import (
        CompletenessScorer as CompletenessScorer,
    )
    from tracescore.scoring import (
        ContentSimilarityScorer as ContentSimilarityScorer,
    )
    from tracescore.scoring import (
        ContextPrecisionScorer as ContextPrecisionScorer,
    )
    from tracescore.scoring import (
        ContextRecallScorer as ContextRecallScorer,
    )
    from tracescore.scoring import (
        ContextRelevanceScorer as ContextRelevanceScorer,
    )
    from tracescore.scoring import (
        FaithfulnessScorer as FaithfulnessScorer,
    )
    from tracescore.scoring import (
        HallucinationScorer as HallucinationScorer,
    )
    from tracescore.scoring import (
        Judge as Judge,
    )
    from tracescore.scoring import (
        JudgeAuthenticationError as JudgeAuthenticationError,
    )
    from tracescore.scoring import (
        JudgedScorer as JudgedScorer,
    )
    from tracescore.scoring import (
        JudgeReply as JudgeReply,
    )
    from tracescore.scoring import (
        JudgeRequest as JudgeRequest,
    )
    from tracescore.scoring import (
        JudgeUsage as JudgeUsage,
    )
    from tracescore.scoring import (
        KeywordCoverageScorer as KeywordCoverageScorer,
    )
    from tracescore.scoring import (
        LiteLLMJudge as LiteLLMJudge,
    )
    from tracescore.scoring import (
        LLMJudgeScorer as LLMJudgeScorer,
    )
    from tracescore.scoring import (
        MultiTurnJudgeScorer as MultiTurnJudgeScorer,
    )
    from tracescore.scoring import (
        NoiseSensitivityScorer as NoiseSensitivityScorer,
    )
    from tracescore.scoring import (
        OfflineJudge as OfflineJudge,
    )
    from tracescore.scoring import (
        PromptAlignmentScorer as PromptAlignmentScorer,
    )
    from tracescore.scoring import (
        RubricScorer as RubricScorer,
    )
    from tracescore.scoring import (
        Scorer as Scorer,
    )
    from tracescore.scoring import (
        ScoreResult as ScoreResult,
    )
    from tracescore.scoring import (
        ScorerInput as ScorerInput,
    )
    from tracescore.scoring import (
        SummarizationScorer as SummarizationScorer,
    )
    from tracescore.scoring import (
        TextualDifferenceScorer as TextualDifferenceScorer,
    )
    from tracescore.scoring import (
        ToneConsistencyScorer as ToneConsistencyScorer,
    )
    from tracescore.scoring import (
        ToolCall as ToolCall,
    )
    from tracescore.scoring import (
        ToolCallAccuracyLLMScorer as ToolCallAccuracyLLMScorer,
    )
    from tracescore.scoring import (
        ToolCallAccuracyScorer as ToolCallAccuracyScorer,
    )
    from tracescore.scoring import (
        ToxicityScorer as ToxicityScorer,
    )
    from tracescore.scoring import (
        TrajectoryAccuracyLLMScorer as TrajectoryAccuracyLLMScorer,
    )
    from tracescore.scoring import (
        TrajectoryAccuracyScorer as TrajectoryAccuracyScorer,
    )
    from tracescore.scoring import (
        TrajectoryScorer as TrajectoryScorer,
    )
    from tracescore.scoring import (
        cache_judge as cache_judge,
    )
    from tracescore.scoring import (
        create_answer_relevancy_scorer as create_answer_relevancy_scorer,
    )
    from tracescore.scoring import (
        create_answer_similarity_scorer as create_answer_similarity_scorer,
    )
    from tracescore.scoring import (
        create_bias_scorer as create_bias_scorer,
    )
    from tracescore.scoring import (
        create_completeness_scorer as create_completeness_scorer,
    )
    from tracescore.scoring import (
        create_content_similarity_scorer as create_content_similarity_scorer,
    )
    from tracescore.scoring import (
        create_context_precision_scorer as create_context_precision_scorer,
    )
    from tracescore.scoring import (
        create_context_recall_scorer as create_context_recall_scorer,
    )
    from tracescore.scoring import (
        create_context_relevance_scorer as create_context_relevance_scorer,
    )
    from tracescore.scoring import (
        create_faithfulness_scorer as create_faithfulness_scorer,
    )
    from tracescore.scoring import (
        create_hallucination_scorer as create_hallucination_scorer,
    )
    from tracescore.scoring import (
        create_keyword_coverage_scorer as create_keyword_coverage_scorer,
    )
    from tracescore.scoring import (
        create_llm_judge_scorer as create_llm_judge_scorer,
    )
    from tracescore.scoring import (
        create_multi_turn_judge_scorer as create_multi_turn_judge_scorer,
    )
    from tracescore.scoring import (
        create_noise_sensitivity_scorer as create_noise_sensitivity_scorer,
    )
    from tracescore.scoring import (
        create_prompt_alignment_scorer as create_prompt_alignment_scorer,
    )
    from tracescore.scoring import (
        create_rubric_scorer as create_rubric_scorer,
    )
    from tracescore.scoring import (
        create_summarization_scorer as create_summarization_scorer,
    )
    from tracescore.scoring import (
        create_textual_difference_scorer as create_textual_difference_scorer,
    )
    from tracescore.scoring import (
        create_tone_scorer as create_tone_scorer,
    )
    from tracescore.scoring import (
        create_tool_call_accuracy_scorer as create_tool_call_accuracy_scorer,
    )
    from tracescore.scoring import (
        create_tool_call_accuracy_scorer_llm as create_tool_call_accuracy_scorer_llm,
    )
    from tracescore.scoring import (
        create_toxicity_scorer as create_toxicity_scorer,
    )
    from tracescore.scoring import (
        create_trajectory_accuracy_scorer as create_trajectory_accuracy_scorer,
    )
    from tracescore.scoring import (
        create_trajectory_accuracy_scorer_llm as create_trajectory_accuracy_scorer_llm,
    )
    from tracescore.scoring import (
        create_trajectory_scorer as create_trajectory_scorer,
    )
