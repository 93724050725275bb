"""Scorers: LLM-judged answer relevancy and string content similarity, plus the judges.

    scorer = create_answer_relevancy_scorer(model="openai/gpt-4o-mini")
    result = scorer.run(input="What is the capital of France?", output="Paris.")
"""

from tracescore.scoring._base import JudgeUsage, Scorer, ScoreResult
from tracescore.scoring._judge import (
    OFFLINE_MODEL,
    Judge,
    JudgeAuthenticationError,
    JudgeReply,
    JudgeRequest,
    JudgeStepError,
    LiteLLMJudge,
)
from tracescore.scoring._offline import OfflineJudge
from tracescore.scoring.relevancy import AnswerRelevancyScorer, create_answer_relevancy_scorer
from tracescore.scoring.similarity import (
    ContentSimilarityScorer,
    create_content_similarity_scorer,
)

__all__ = [
    "OFFLINE_MODEL",
    "AnswerRelevancyScorer",
    "ContentSimilarityScorer",
    "Judge",
    "JudgeAuthenticationError",
    "JudgeReply",
    "JudgeRequest",
    "JudgeStepError",
    "JudgeUsage",
    "LiteLLMJudge",
    "OfflineJudge",
    "ScoreResult",
    "Scorer",
    "create_answer_relevancy_scorer",
    "create_content_similarity_scorer",
]
