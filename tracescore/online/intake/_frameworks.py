"""Built-in readers for agent frameworks, as data: each one a list of `recognise.mappings` entries.

Every entry has exactly the keys of a user's mapping (`AgentMapping`), so an entry can be copied
into a config file's `recognise.mappings` and changed there (for another version of the
framework, or a framework that writes its spans the same way). The entries of one framework
are tried in order under its convention name (`recognise.builtins: [mastra, vercel_ai]`).

- mastra: `@mastra/core` 1.x with `@mastra/observability` and `@mastra/otel-exporter`. An
  agent run is the `invoke_agent {agent}` span (`mastra.span.type` agent_run); its input is the
  user's text, or the message list for a conversation, its output `{"text": ...}`. A workflow
  run is `invoke_workflow {workflow}` (workflow_run), its input and output the workflow's data.
- vercel_ai: the Vercel AI SDK's own telemetry (`experimental_telemetry` in AI SDK 4 to 6,
  `@ai-sdk/otel`'s `LegacyOpenTelemetry` in AI SDK 7). The top-level `ai.generateText`,
  `ai.streamText`, `ai.generateObject` and `ai.streamObject` spans are the agent call, with
  `ai.prompt` (`{"system", "prompt"}` or `{"messages": [...]}`) and the final text or object
  (taken as text: an answer that looks like JSON is still the answer). Their `*.doGenerate` /
  `*.doStream` children are the model calls and `ai.toolCall` the tool calls: not agent calls.
  AI SDK 7's modern `OpenTelemetry` integration writes GenAI `invoke_agent` spans instead,
  read by the "genai" convention.
- crewai: CrewAI with `openinference-instrumentation-crewai`. Each task an agent performs is an
  OpenInference AGENT span `{role}._execute_core`, whose `input.value` holds the agent's settings
  (no question) and whose `output.value` the task's result: its `description` (the question
  asked of the agent) and `raw` (the answer); its `messages` are CrewAI's own prompts. Read
  before the generic OpenInference convention (`FIRST`).

`LLM_CALLS` describes, in the same keys, the model-call spans a framework records its conversation
on when its agent span records none (the agent span then takes its question and answer from them):
- adk: Google ADK's legacy telemetry (`ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1`): `call_llm` spans
  (`gen_ai.system` gcp.vertex.agent; matched by attributes alone, so a reader given no span name
  can apply it), the Gemini request (`contents`, `config.system_instruction`) and response
  (`content`) as JSON.
  ADK's default telemetry writes GenAI `generate_content` spans instead (their messages with
  `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY`); its `invoke_agent` spans carry
  no content in either.

"""

from __future__ import annotations

from typing import Any

FRAMEWORKS: dict[str, tuple[dict[str, Any], ...]] = {
    "mastra": (
        {"name": "mastra", "attributes": {"mastra.span.type": "agent_run"},
         "input": "mastra.agent_run.input", "output": "mastra.agent_run.output",
         "agent": "gen_ai.agent.name"},
        {"name": "mastra", "attributes": {"mastra.span.type": "workflow_run"},
         "input": "mastra.workflow_run.input", "output": "mastra.workflow_run.output"},
    ),
    "vercel_ai": (
        {"name": "vercel_ai", "span_name": r"ai\.(generateText|streamText)",
         "input": "ai.prompt", "output": "ai.response.text", "as_text": ["output"],
         "agent": "ai.telemetry.functionId"},
        {"name": "vercel_ai", "span_name": r"ai\.(generateObject|streamObject)",
         "input": "ai.prompt", "output": "ai.response.object", "as_text": ["output"],
         "agent": "ai.telemetry.functionId"},
    ),
    "crewai": (
        {"name": "crewai", "span_name": r".+\._execute_core",
         "attributes": {"openinference.span.kind": "AGENT"},
         "input": "output.value", "input_field": "description",
         "output": "output.value", "output_field": "raw", "as_text": ["input", "output"],
         "agent": "input.value", "agent_field": "agent.role"},
    ),
}

# frameworks whose spans a generic convention would also accept: tried before the generic ones
FIRST: tuple[str, ...] = ("crewai",)

LLM_CALLS: dict[str, tuple[dict[str, Any], ...]] = {
    "adk": (
        {"name": "adk", "attributes": {"gen_ai.system": "gcp.vertex.agent"},
         "input": "gcp.vertex.agent.llm_request", "output": "gcp.vertex.agent.llm_response"},
    ),
}
