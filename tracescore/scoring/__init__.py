"""Scorers: the LLM-judged ones (answer relevancy and similarity, faithfulness, hallucination,
context relevance, precision and recall, toxicity, bias, judged tool-call accuracy, noise
sensitivity, prompt alignment, summarization, rubric), the code ones (content similarity,
textual difference, keyword coverage, tool-call accuracy, completeness, tone consistency), and
the judges.

    scorer = create_answer_relevancy_scorer(model="openai/gpt-4o-mini")
    result = scorer.run(input="What is the capital of France?", output="Paris.")

`create_llm_judge_scorer(name=..., instructions=..., model=...)` judges a criterion of your own.
"""

from tracescore.scoring._base import JudgeUsage, Scorer, ScoreResult, ScorerInput, ToolCall
from tracescore.scoring._judge_api import (
    OFFLINE_MODEL,
    Judge,
    JudgeAuthenticationError,
    JudgeReply,
    JudgeRequest,
    JudgeStepError,
)
from tracescore.scoring._judge_cache import CachedJudge, cache_judge
from tracescore.scoring._judged import JudgedRun, JudgedScorer
from tracescore.scoring._litellm_judge import LiteLLMJudge
from tracescore.scoring._offline import OfflineJudge
from tracescore.scoring._runs import Expectation, ExpectedStep, Run, Step, Turn
from tracescore.scoring.answer_similarity import (
    AnswerSimilarityScorer,
    create_answer_similarity_scorer,
)
from tracescore.scoring.bias import BiasScorer, create_bias_scorer
from tracescore.scoring.checks import (
    CalledToolCheck,
    CheckScorer,
    DidNotCallCheck,
    EqualsCheck,
    ExcludesCheck,
    IncludesCheck,
    MatchesCheck,
    MaxToolCallsCheck,
    NoToolErrorsCheck,
    SimilarityCheck,
    ToolOrderCheck,
    UsedNoToolsCheck,
)
from tracescore.scoring.completeness import CompletenessScorer, create_completeness_scorer
from tracescore.scoring.context_precision import (
    ContextPrecisionScorer,
    create_context_precision_scorer,
)
from tracescore.scoring.context_recall import ContextRecallScorer, create_context_recall_scorer
from tracescore.scoring.context_relevance import (
    ContextRelevanceScorer,
    create_context_relevance_scorer,
)
from tracescore.scoring.difference import TextualDifferenceScorer, create_textual_difference_scorer
from tracescore.scoring.faithfulness import FaithfulnessScorer, create_faithfulness_scorer
from tracescore.scoring.hallucination import HallucinationScorer, create_hallucination_scorer
from tracescore.scoring.keywords import KeywordCoverageScorer, create_keyword_coverage_scorer
from tracescore.scoring.llm_judge import LLMJudgeScorer, create_llm_judge_scorer
from tracescore.scoring.multi_turn import MultiTurnJudgeScorer, create_multi_turn_judge_scorer
from tracescore.scoring.noise_sensitivity import (
    NoiseSensitivityScorer,
    create_noise_sensitivity_scorer,
)
from tracescore.scoring.prompt_alignment import (
    PromptAlignmentScorer,
    create_prompt_alignment_scorer,
)
from tracescore.scoring.relevancy import AnswerRelevancyScorer, create_answer_relevancy_scorer
from tracescore.scoring.rubric import Criterion, RubricScorer, create_rubric_scorer
from tracescore.scoring.similarity import (
    ContentSimilarityScorer,
    create_content_similarity_scorer,
)
from tracescore.scoring.summarization import SummarizationScorer, create_summarization_scorer
from tracescore.scoring.tone import ToneConsistencyScorer, create_tone_scorer
from tracescore.scoring.tool_selection import (
    ToolCallAccuracyLLMScorer,
    create_tool_call_accuracy_scorer_llm,
)
from tracescore.scoring.tools import ToolCallAccuracyScorer, create_tool_call_accuracy_scorer
from tracescore.scoring.toxicity import ToxicityScorer, create_toxicity_scorer
from tracescore.scoring.trajectory import (
    TrajectoryAccuracyScorer,
    TrajectoryScorer,
    create_trajectory_accuracy_scorer,
    create_trajectory_scorer,
)
from tracescore.scoring.trajectory_llm import (
    TrajectoryAccuracyLLMScorer,
    create_trajectory_accuracy_scorer_llm,
)

__all__ = [
    "OFFLINE_MODEL",
    "AnswerRelevancyScorer",
    "AnswerSimilarityScorer",
    "BiasScorer",
    "CachedJudge",
    "CalledToolCheck",
    "CheckScorer",
    "CompletenessScorer",
    "ContentSimilarityScorer",
    "ContextPrecisionScorer",
    "ContextRecallScorer",
    "ContextRelevanceScorer",
    "Criterion",
    "DidNotCallCheck",
    "EqualsCheck",
    "ExcludesCheck",
    "Expectation",
    "ExpectedStep",
    "FaithfulnessScorer",
    "HallucinationScorer",
    "IncludesCheck",
    "Judge",
    "JudgeAuthenticationError",
    "JudgeReply",
    "JudgeRequest",
    "JudgeStepError",
    "JudgeUsage",
    "JudgedRun",
    "JudgedScorer",
    "KeywordCoverageScorer",
    "LLMJudgeScorer",
    "LiteLLMJudge",
    "MatchesCheck",
    "MaxToolCallsCheck",
    "MultiTurnJudgeScorer",
    "NoToolErrorsCheck",
    "NoiseSensitivityScorer",
    "OfflineJudge",
    "PromptAlignmentScorer",
    "RubricScorer",
    "Run",
    "ScoreResult",
    "Scorer",
    "ScorerInput",
    "SimilarityCheck",
    "Step",
    "SummarizationScorer",
    "TextualDifferenceScorer",
    "ToneConsistencyScorer",
    "ToolCall",
    "ToolCallAccuracyLLMScorer",
    "ToolCallAccuracyScorer",
    "ToolOrderCheck",
    "ToxicityScorer",
    "TrajectoryAccuracyLLMScorer",
    "TrajectoryAccuracyScorer",
    "TrajectoryScorer",
    "Turn",
    "UsedNoToolsCheck",
    "cache_judge",
    "create_answer_relevancy_scorer",
    "create_answer_similarity_scorer",
    "create_bias_scorer",
    "create_completeness_scorer",
    "create_content_similarity_scorer",
    "create_context_precision_scorer",
    "create_context_recall_scorer",
    "create_context_relevance_scorer",
    "create_faithfulness_scorer",
    "create_hallucination_scorer",
    "create_keyword_coverage_scorer",
    "create_llm_judge_scorer",
    "create_multi_turn_judge_scorer",
    "create_noise_sensitivity_scorer",
    "create_prompt_alignment_scorer",
    "create_rubric_scorer",
    "create_summarization_scorer",
    "create_textual_difference_scorer",
    "create_tone_scorer",
    "create_tool_call_accuracy_scorer",
    "create_tool_call_accuracy_scorer_llm",
    "create_toxicity_scorer",
    "create_trajectory_accuracy_scorer",
    "create_trajectory_accuracy_scorer_llm",
    "create_trajectory_scorer",
]
