"""Attribute, span and event names: OTel GenAI semantic conventions plus our `tracescore.*` keys.

Every name the package writes lives here; no other module spells an attribute as a literal.
"""

from __future__ import annotations

# --- GenAI semantic conventions -------------------------------------------------------------
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_SYSTEM = "gen_ai.system"  # older name of gen_ai.provider.name, still read by backends
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_AGENT_DESCRIPTION = "gen_ai.agent.description"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_OUTPUT_TYPE = "gen_ai.output.type"

# gen_ai.operation.name values
OP_INVOKE_AGENT = "invoke_agent"
OP_INVOKE_WORKFLOW = "invoke_workflow"  # read like invoke_agent (same attributes)
GEN_AI_WORKFLOW_NAME = "gen_ai.workflow.name"  # older semconv: the workflow's name
OP_EXECUTE_TOOL = "execute_tool"
OP_CHAT = "chat"
OP_WORKFLOW = "workflow"  # tracescore's generic @span (no semconv value exists)
OP_RETRIEVAL = "retrieval"
GEN_AI_RETRIEVAL_DOCUMENTS = "gen_ai.retrieval.documents"  # JSON array of documents

# Evaluation results (semconv event + attributes)
GEN_AI_EVALUATION_RESULT = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"

# General semconv
ERROR_TYPE = "error.type"
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"

# --- OpenInference (Phoenix's input/output columns; opt-in copies on agent spans) --------------
OI_SPAN_KIND = "openinference.span.kind"
OI_SPAN_KIND_AGENT = "AGENT"
OI_INPUT_VALUE = "input.value"
OI_INPUT_MIME_TYPE = "input.mime_type"
OI_OUTPUT_VALUE = "output.value"
OI_OUTPUT_MIME_TYPE = "output.mime_type"
OI_MIME_TEXT = "text/plain"
OI_MIME_JSON = "application/json"

# --- tracescore's own keys ----------------------------------------------------------------
TS_PREFIX = "tracescore."
TS_COST_USD = "tracescore.usage.cost_usd"
TS_INPUT = "tracescore.input"  # generic @span input (content capture)
TS_OUTPUT = "tracescore.output"
TS_TRUNCATED = "tracescore.content.truncated"
TS_SPAN_TRUNCATED = "tracescore.span.truncated"  # bool: the span was cut to fit max_span_bytes
TS_SPAN_ORIGINAL_BYTES = "tracescore.span.original_bytes"  # its estimated size before the cut
TS_SPAN_DROPPED_EVENTS = "tracescore.span.dropped_events"  # events removed to fit (last ones first)
TS_SCORER_ID = "tracescore.scorer.id"
# which scorer produced a result: `{release}+{hash}` of its id, options and judge (the GenAI
# conventions name no evaluator version yet; gen_ai.evaluation.name is the scorer's name)
TS_SCORER_VERSION = "tracescore.scorer.version"
TS_RUN_ID = "tracescore.evaluation.run_id"
TS_JUDGE_MODEL = "tracescore.judge.model"
TS_JUDGE_CALLS = "tracescore.judge.calls"
TS_JUDGE_INPUT_TOKENS = "tracescore.judge.input_tokens"
TS_JUDGE_OUTPUT_TOKENS = "tracescore.judge.output_tokens"
TS_JUDGE_COST_USD = "tracescore.judge.cost_usd"
TS_JUDGE_LATENCY_MS = "tracescore.judge.latency_ms"
TS_JUDGE_INPUT_TRUNCATED = "tracescore.judge.input_truncated"  # judged text cut to the cap
# bool on a judge's own chat span (its call, traced): no recogniser, scorer or gateway scores it
TS_JUDGE = "tracescore.span.judge"
TS_JUDGE_TRACE_ID = "tracescore.judge.trace_id"  # on a result: the trace of its judge's calls
TS_JUDGE_STEP = "tracescore.judge.step"  # on a judge span: the scorer step it served
TS_SAMPLING_RATE = "tracescore.sampling.rate"
TS_EVALUATION_STEP = "tracescore.evaluation.step"  # event name for one judge step
TS_STEP_NAME = "tracescore.step.name"
TS_STEP_PROMPT = "tracescore.step.prompt"
TS_STEP_RESULT = "tracescore.step.result"
TS_UNSCORED = "tracescore.evaluation.unscored"  # event name: span exported without its score
TS_UNSCORED_REASON = "tracescore.evaluation.unscored.reason"
TS_EVALUATED_SPAN_ID = "tracescore.evaluation.span_id"
# bool on an evaluation result: the scorer compares with a ground truth and had none
TS_REFERENCE_MISSING = "tracescore.reference.missing"
TS_REFERENCE_FALLBACK = "tracescore.reference.fallback"  # what it compared with instead
TS_GROUND_TRUTH = "tracescore.ground_truth"  # expected answer of an agent call, read by recognisers
# text (or array of texts) a span marks as retrieved context of the agent call it runs inside
TS_CONTEXT = "tracescore.context"

# --- online scoring (H4) ---------------------------------------------------------------------
TS_FAILED_STEP = "tracescore.evaluation.failed_step"  # scorer step that failed (on error)
EVALUATION_SPAN_PREFIX = "evaluation"  # carrier span name: "evaluation {scorer name}"
TS_EVALUATION_CARRIER = "tracescore.evaluation.carrier"  # bool attribute marking a carrier span
# on a carrier span: ms from the end of the span it judges to its result (the carrier lasts 0)
TS_EVALUATION_DELAY_MS = "tracescore.evaluation.delay_ms"
# a conversation's result (with gen_ai.conversation.id): the version, by the turns it saw
TS_CONVERSATION_TURNS = "tracescore.conversation.turns"  # how many turns (int)
TS_CONVERSATION_FIRST_TURN = "tracescore.conversation.first_turn"  # "<trace id>/<span id>"
TS_CONVERSATION_LAST_TURN = "tracescore.conversation.last_turn"
TS_CONVERSATION_TRIGGER = "tracescore.conversation.trigger"  # quiet, turn_limit, max_age ...
# turns of the conversation a version did not see (dropped under load, let go by a bound)
TS_CONVERSATION_TURNS_MISSING = "tracescore.conversation.turns_missing"
# on a run's result: why the run may lack spans (before_start, max_age, overflow, trace_forgotten)
TS_RUN_PARTIAL = "tracescore.run.partial"
# counter of the conversation scope's events, by `tracescore.conversation.event`: turns,
# versions.<trigger>, forgotten.<reason> (a scored conversation's turns let go early),
# dropped.<reason> (turns not taken), turns.filtered, store_failed
METRIC_CONVERSATION_EVENTS = "tracescore.conversation.events"
TS_CONVERSATION_EVENT = "tracescore.conversation.event"
METRIC_EVALUATION_SCORE = "tracescore.evaluation.score"  # histogram of scores
METRIC_EVALUATION_SAMPLED = "tracescore.evaluation.sampled"
METRIC_EVALUATION_SCORED = "tracescore.evaluation.scored"
METRIC_EVALUATION_DROPPED = "tracescore.evaluation.dropped"
METRIC_EVALUATION_FAILED = "tracescore.evaluation.failed"
METRIC_EVALUATION_HELD_TIMEOUT = "tracescore.evaluation.held_timeout"

# --- offline evals (H5) ----------------------------------------------------------------------
TS_EVAL_NAME = "tracescore.eval.name"  # name of the run_evals run that produced the span
TS_EVAL_RUN_ID = "tracescore.eval.run_id"
TS_EVAL_ITEM_INDEX = "tracescore.eval.item.index"  # position of the item in the dataset
# OpenTelemetry context key set while run_evals calls its target (value: the eval run id);
# online scoring skips agent calls made under it, so eval items are not scored twice.
CTX_EVAL_RUN_ID = "tracescore.eval.run_id"

# --- other conventions, read by the agent-span recognisers (online/intake/_readers.py) ---------------
# OpenInference
OI_SPAN_KIND = "openinference.span.kind"
OI_KIND_AGENT = "AGENT"
OI_INPUT_VALUE = "input.value"
OI_INPUT_MIME_TYPE = "input.mime_type"
OI_OUTPUT_VALUE = "output.value"
OI_OUTPUT_MIME_TYPE = "output.mime_type"
OI_AGENT_NAME = "agent.name"
OI_KIND_TOOL = "TOOL"
OI_KIND_RETRIEVER = "RETRIEVER"
OI_TOOL_NAME = "tool.name"
OI_TOOL_CALL_ID = "tool_call.id"
OI_RETRIEVAL_DOCUMENTS = "retrieval.documents."  # + "{i}.document.content"
OI_DOCUMENT_CONTENT = ".document.content"
OI_MIME_JSON = "application/json"
OI_KIND_CHAIN = "CHAIN"
OI_METADATA = "metadata"  # JSON; LangChain's run metadata (`langgraph_node` inside a graph)
LANGGRAPH_NODE = "langgraph_node"
# OpenLLMetry / traceloop
TL_SPAN_KIND = "traceloop.span.kind"
TL_KINDS_AGENT = ("agent", "workflow")
TL_ENTITY_NAME = "traceloop.entity.name"
TL_ENTITY_INPUT = "traceloop.entity.input"
TL_ENTITY_OUTPUT = "traceloop.entity.output"
TL_LANGCHAIN_VALUES = ("inputs", "outputs")  # the LangChain instrumentation's entity values
# pydantic-ai (and logfire, which uses pydantic-ai's own instrumentation)
PAI_ALL_MESSAGES = "pydantic_ai.all_messages"
PAI_NEW_MESSAGE_INDEX = "pydantic_ai.new_message_index"
PAI_FINAL_RESULT = "final_result"
PAI_AGENT_NAME = "agent_name"
PAI_METADATA = "metadata"  # run metadata as JSON; may hold TS_GROUND_TRUTH
# LLM call spans, read for agent spans without content of their own (online/intake/_llm_calls.py)
OI_KIND_LLM = "LLM"
OI_LLM_INPUT_MESSAGES = "llm.input_messages"  # + ".{i}.message.role/content"
OI_LLM_OUTPUT_MESSAGES = "llm.output_messages"
LOGFIRE_INPUT = "input"  # logfire's OpenAI Agents integration: the call's messages
LOGFIRE_OUTPUT = "output"
LOGFIRE_MSG = "logfire.msg"  # a span's message; marks pydantic-ai's output-function tool spans

# --- spans that look like agent calls but cannot be read (online/intake/_diagnose.py) --------------
MASTRA_SPAN_TYPE = "mastra.span.type"  # agent_run, workflow_run, model_generation, ...
VERCEL_OPERATION_ID = "ai.operationId"  # the Vercel AI SDK's span kind: ai.generateText, ...
METRIC_UNREADABLE_AGENT_SPANS = "tracescore.agent_spans.unreadable"  # counter
TS_UNREADABLE_FRAMEWORK = "tracescore.unreadable.framework"  # metric attribute
TS_UNREADABLE_REASON = "tracescore.unreadable.reason"  # metric attribute
