// Run agent calls through a TypeScript framework (a mock model from the library itself, no network)
// and send the spans the framework made: as one OTLP JSON line appended to a file (the Collector file
// exporter's format), or with the real OTLP exporters to a receiver.
// Node counterpart of convention_agent.py, run by rigs/conventions.py in its cached npm folder:
//
//     node convention_agent.mjs CONVENTION CASES.json OUT
//
// CONVENTION: vercel_ai (AI SDK 7, @ai-sdk/otel's GenAI spans), vercel_ai_v7_legacy (AI SDK 7,
// LegacyOpenTelemetry), vercel_ai_v4 / _v5 / _v6 (experimental_telemetry), mastra (an Agent),
// mastra_workflow (a workflow whose step calls the agent), mastra_memory (an agent with thread
// memory: cases with the same "thread" are the turns of one conversation, in order).
// OUT: a file path, or grpc://HOST:PORT or http://HOST:PORT (OTLP/gRPC, OTLP/HTTP protobuf); with
// an endpoint, TRACESCORE_TEE=FILE also appends a copy of the spans sent to FILE.
// CASES.json is a list of {"question", "answer", "system"?, "tool"?, "call"?, "history"?}:
// "tool" {"argument", "result"} makes the model call the `lookup` tool first (a second step
// answers); "call" is generateText (default), streamText, generateObject or streamObject (AI SDK;
// an object's answer is {"answer": ANSWER}); "history" is earlier turns [{"role", "content"}].
// The agent is named "geo" (the AI SDK's telemetry functionId, Mastra's agent id).
import { appendFileSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

// packages resolve from the npm folder given by the caller, not from this file's folder
const require = createRequire(join(process.env.TRACESCORE_NODE_PREFIX, 'package.json'));
const { z } = require('zod');
const { BasicTracerProvider, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { resourceFromAttributes } = require('@opentelemetry/resources');
const { context } = require('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks');

// as an OpenTelemetry Node SDK setup does: child spans find their parent across awaits
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

const SERVICE = 'conventions';

// --- where the spans go ------------------------------------------------------------------------
function anyValue(value) {
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (typeof value === 'number') {
    return Number.isInteger(value) ? { intValue: String(value) } : { doubleValue: value };
  }
  if (Array.isArray(value)) return { arrayValue: { values: value.map(anyValue) } };
  return { stringValue: String(value) };
}

function nanos([seconds, nanoseconds]) {
  return (BigInt(seconds) * 1000000000n + BigInt(nanoseconds)).toString();
}

function otlpAttributes(attributes) {
  return Object.entries(attributes ?? {}).map(([key, value]) => ({ key, value: anyValue(value) }));
}

function otlpSpan(span) {
  const context = span.spanContext();
  return {
    traceId: context.traceId,
    spanId: context.spanId,
    parentSpanId: span.parentSpanContext?.spanId ?? span.parentSpanId ?? '',
    name: span.name,
    kind: span.kind + 1, // API SpanKind (INTERNAL = 0) -> OTLP (INTERNAL = 1)
    startTimeUnixNano: nanos(span.startTime),
    endTimeUnixNano: nanos(span.endTime),
    attributes: otlpAttributes(span.attributes),
    events: span.events.map((event) => ({
      timeUnixNano: nanos(event.time), name: event.name, attributes: otlpAttributes(event.attributes),
    })),
    status: { code: span.status.code, ...(span.status.message ? { message: span.status.message } : {}) },
  };
}

// An exporter that keeps every span it is given (the SDK's in-memory one forgets them at shutdown).
class KeepingExporter {
  constructor() { this.spans = []; }
  export(spans, done) { this.spans.push(...spans); done({ code: 0 }); }
  async forceFlush() {}
  async shutdown() {}
  write(out) {
    const scopeSpans = this.spans.map((span) => ({
      scope: { name: (span.instrumentationScope ?? span.instrumentationLibrary)?.name ?? '' },
      spans: [otlpSpan(span)],
    }));
    const request = {
      resourceSpans: [{
        resource: { attributes: [{ key: 'service.name', value: { stringValue: SERVICE } }] },
        scopeSpans,
      }],
    };
    appendFileSync(out, JSON.stringify(request) + '\n');
  }
}

function otlpExporter(out) {
  const url = new URL(out);
  if (url.protocol === 'grpc:') {
    const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-grpc');
    return new OTLPTraceExporter({ url: `http://${url.host}` });
  }
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
  return new OTLPTraceExporter({ url: `http://${url.host}/v1/traces` });
}

const isEndpoint = (out) => /^(grpc|http):\/\//.test(out);

// Where the spans go: `send` (the OTLP endpoint, or null) and `keep` (the spans for the file).
function sinks(out) {
  const endpoint = isEndpoint(out) ? new URL(out) : null;
  const tee = endpoint ? process.env.TRACESCORE_TEE : out;
  const keep = tee ? new KeepingExporter() : null;
  return { endpoint, keep, done: () => keep?.write(tee) };
}

// --- the Vercel AI SDK ---------------------------------------------------------------------------
// per major version: its npm alias, its mock model, and how a model result looks (spec V1 .. V4)
const AI_SDK = {
  4: { pkg: 'ai-v4', mock: 'MockLanguageModelV1', spec: 1 },
  5: { pkg: 'ai-v5', mock: 'MockLanguageModelV2', spec: 2 },
  6: { pkg: 'ai-v6', mock: 'MockLanguageModelV3', spec: 3 },
  7: { pkg: 'ai', mock: 'MockLanguageModelV4', spec: 4 },
};

function finish(spec, reason) {
  return spec >= 3 ? { unified: reason, raw: undefined } : reason;
}

function usage(spec) {
  if (spec === 1) return { promptTokens: 10, completionTokens: 20 };
  if (spec === 2) return { inputTokens: 10, outputTokens: 20, totalTokens: 30 };
  return {
    inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: 20, text: 20, reasoning: undefined },
  };
}

// What the mock model says next: a call of `lookup` when the case has a tool that was not called
// yet in this turn, else the answer (a JSON text for object calls).
function nextTurn(item, prompt) {
  const lastUser = prompt.map((message) => message.role).lastIndexOf('user');
  const called = prompt.slice(lastUser + 1).some((message) => message.role === 'tool');
  if (item.tool && !called) return { tool: JSON.stringify({ city: item.tool.argument }) };
  const object = item.call === 'generateObject' || item.call === 'streamObject';
  return { text: object ? JSON.stringify({ answer: item.answer }) : item.answer };
}

function generated(spec, turn) {
  if (spec === 1) {
    const calls = turn.tool ? [{ toolCallType: 'function', toolCallId: 'call-1', toolName: 'lookup', args: turn.tool }] : [];
    return { text: turn.text, toolCalls: calls, finishReason: turn.tool ? 'tool-calls' : 'stop',
      usage: usage(1), rawCall: { rawPrompt: null, rawSettings: {} } };
  }
  const content = turn.tool
    ? [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'lookup', input: turn.tool }]
    : [{ type: 'text', text: turn.text }];
  return { content, finishReason: finish(spec, turn.tool ? 'tool-calls' : 'stop'), usage: usage(spec), warnings: [] };
}

function streamed(spec, turn) {
  const parts = [];
  const half = turn.text === undefined ? 0 : Math.ceil(turn.text.length / 2);
  const pieces = turn.text === undefined ? [] : [turn.text.slice(0, half), turn.text.slice(half)].filter(Boolean);
  if (spec === 1) {
    if (turn.tool) parts.push({ type: 'tool-call', toolCallType: 'function', toolCallId: 'call-1', toolName: 'lookup', args: turn.tool });
    for (const piece of pieces) parts.push({ type: 'text-delta', textDelta: piece });
    parts.push({ type: 'finish', finishReason: turn.tool ? 'tool-calls' : 'stop', usage: usage(1) });
  } else {
    parts.push({ type: 'stream-start', warnings: [] });
    if (turn.tool) parts.push({ type: 'tool-call', toolCallId: 'call-1', toolName: 'lookup', input: turn.tool });
    if (pieces.length) {
      parts.push({ type: 'text-start', id: 't1' });
      for (const piece of pieces) parts.push({ type: 'text-delta', id: 't1', delta: piece });
      parts.push({ type: 'text-end', id: 't1' });
    }
    parts.push({ type: 'finish', finishReason: finish(spec, turn.tool ? 'tool-calls' : 'stop'), usage: usage(spec) });
  }
  const stream = new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(part);
      controller.close();
    },
  });
  return spec === 1 ? { stream, rawCall: { rawPrompt: null, rawSettings: {} } } : { stream };
}

function mockModel(sdk, test, item) {
  const Mock = test[sdk.mock];
  return new Mock({
    ...(sdk.spec === 1 ? { defaultObjectGenerationMode: 'json' } : {}),
    doGenerate: async ({ prompt }) => generated(sdk.spec, nextTurn(item, prompt)),
    doStream: async ({ prompt }) => streamed(sdk.spec, nextTurn(item, prompt)),
  });
}

async function aiSdkCall(ai, sdk, item, telemetry) {
  const model = mockModel(sdk, require(`${sdk.pkg}/test`), item);
  const input = item.history
    ? { messages: [...item.history, { role: 'user', content: item.question }] }
    : { prompt: item.question };
  const options = { model, ...input, ...(item.system ? { system: item.system } : {}), ...telemetry };
  if (item.tool) {
    const schema = z.object({ city: z.string() });
    const result = item.tool.result;
    options.tools = {
      lookup: ai.tool({ description: 'Look up facts about a city', ...(sdk.spec === 1 ? { parameters: schema } : { inputSchema: schema }),
        execute: async () => result }),
    };
    if (sdk.spec === 1) options.maxSteps = 3;
    else options.stopWhen = ai.stepCountIs(3);
  }
  const call = item.call ?? 'generateText';
  if (call === 'generateText') return (await ai.generateText(options)).text;
  if (call === 'streamText') {
    const result = ai.streamText({ ...options, onError: () => {} });
    for await (const _ of result.textStream) { /* consume */ }
    return await result.text;
  }
  const objectOptions = { ...options, schema: z.object({ answer: z.string() }) };
  if (call === 'generateObject') return JSON.stringify((await ai.generateObject(objectOptions)).object);
  const result = ai.streamObject({ ...objectOptions, onError: () => {} });
  for await (const _ of result.partialObjectStream) { /* consume */ }
  return JSON.stringify(await result.object);
}

async function runAiSdk(version, integration, cases, out) {
  const sdk = AI_SDK[version];
  const ai = require(sdk.pkg);
  const sink = sinks(out);
  const exporters = [sink.endpoint && otlpExporter(out), sink.keep].filter(Boolean);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': SERVICE }),
    spanProcessors: exporters.map((exporter) => new SimpleSpanProcessor(exporter)),
  });
  const tracer = provider.getTracer('ai');
  let telemetry;
  if (version < 7) {
    telemetry = { experimental_telemetry: { isEnabled: true, functionId: 'geo', tracer } };
  } else {
    const otel = require('@ai-sdk/otel');
    ai.registerTelemetry(integration === 'legacy'
      ? new otel.LegacyOpenTelemetry({ tracer })
      : new otel.OpenTelemetry({ tracer, agentSpanName: 'functionId' }));
    telemetry = { telemetry: { functionId: 'geo' } };
  }
  for (const item of cases) {
    const text = await aiSdkCall(ai, sdk, item, telemetry);
    if (text !== nextTurn(item, []).text && !item.tool) throw new Error(`unexpected answer ${text}`);
  }
  await provider.forceFlush();
  sink.done();
  await provider.shutdown();
}

// --- Mastra ---------------------------------------------------------------------------------------
function mastraModel(current) {
  const { MockLanguageModelV2 } = require('ai-v5/test');
  return new MockLanguageModelV2({
    doGenerate: async ({ prompt }) => generated(2, nextTurn(current.item, prompt)),
    doStream: async ({ prompt }) => streamed(2, nextTurn(current.item, prompt)),
  });
}

async function runMastra(kind, cases, out) {
  const { Agent } = require('@mastra/core/agent');
  const { Mastra } = require('@mastra/core/mastra');
  const { createTool } = require('@mastra/core/tools');
  const { createWorkflow, createStep } = require('@mastra/core/workflows');
  const { Observability } = require('@mastra/observability');
  const { OtelExporter } = require('@mastra/otel-exporter');
  const sink = sinks(out);
  const url = sink.endpoint;
  const exporters = [];
  if (url) { // the user's setup: Mastra's own exporter, told the endpoint and protocol
    const protocol = url.protocol === 'grpc:' ? 'grpc' : 'http/protobuf';
    exporters.push(new OtelExporter({ provider: { custom: { endpoint: `http://${url.host}`, protocol } },
      signals: { logs: false } }));
  }
  if (sink.keep) { // a second exporter of the same spans, kept for the file (its endpoint unused)
    exporters.push(new OtelExporter({ exporter: sink.keep, signals: { logs: false },
      provider: { custom: { endpoint: 'http://127.0.0.1:9', protocol: 'http/protobuf' } } }));
  }
  const current = { item: cases[0] };
  const lookup = createTool({
    id: 'lookup', description: 'Look up facts about a city', inputSchema: z.object({ city: z.string() }),
    execute: async () => current.item.tool?.result,
  });
  let memory;
  if (kind === 'memory') {
    const { Memory } = require('@mastra/memory');
    const { InMemoryStore } = require('@mastra/core/storage');
    memory = new Memory({ storage: new InMemoryStore(), options: { lastMessages: 20 } });
  }
  const agent = new Agent({
    id: 'geo', name: 'geo', instructions: () => current.item.system ?? 'Answer briefly.',
    model: mastraModel(current), tools: { lookup }, ...(memory ? { memory } : {}),
  });
  const ask = createStep({
    id: 'ask', inputSchema: z.object({ question: z.string() }), outputSchema: z.object({ answer: z.string() }),
    execute: async ({ inputData, mastra }) => ({ answer: (await mastra.getAgent('geo').generate(inputData.question)).text }),
  });
  const workflow = createWorkflow({
    id: 'trip', inputSchema: z.object({ question: z.string() }), outputSchema: z.object({ answer: z.string() }),
  }).then(ask).commit();
  const mastra = new Mastra({
    agents: { geo: agent }, workflows: { trip: workflow }, logger: false,
    observability: new Observability({ configs: { otel: { serviceName: SERVICE, exporters } } }),
  });
  for (const item of cases) {
    current.item = item;
    let text;
    if (kind === 'workflow') {
      const run = await mastra.getWorkflow('trip').createRun();
      const result = await run.start({ inputData: { question: item.question } });
      text = result.result?.answer;
    } else if (kind === 'memory') {
      const thread = { thread: item.thread, resource: 'user-1' };
      text = (await mastra.getAgent('geo').generate(item.question, { memory: thread })).text;
    } else {
      const input = item.history ? [...item.history, { role: 'user', content: item.question }] : item.question;
      text = (await mastra.getAgent('geo').generate(input)).text;
    }
    if (text !== item.answer) throw new Error(`unexpected answer ${JSON.stringify(text)}`);
  }
  await mastra.shutdown();
  sink.done();
}

// --- main -----------------------------------------------------------------------------------------
const RUNS = {
  vercel_ai: (cases, out) => runAiSdk(7, 'modern', cases, out),
  vercel_ai_v7_legacy: (cases, out) => runAiSdk(7, 'legacy', cases, out),
  vercel_ai_v6: (cases, out) => runAiSdk(6, 'legacy', cases, out),
  vercel_ai_v5: (cases, out) => runAiSdk(5, 'legacy', cases, out),
  vercel_ai_v4: (cases, out) => runAiSdk(4, 'legacy', cases, out),
  mastra: (cases, out) => runMastra('agent', cases, out),
  mastra_workflow: (cases, out) => runMastra('workflow', cases, out),
  mastra_memory: (cases, out) => runMastra('memory', cases, out),
};

const [convention, casesFile, out] = process.argv.slice(2);
if (!(convention in RUNS)) {
  console.error(`unknown convention ${convention}; known: ${Object.keys(RUNS).join(', ')}`);
  process.exit(2);
}
await RUNS[convention](JSON.parse(readFileSync(casesFile, 'utf-8')), out);
