// Run agent calls through the Vercel AI SDK (`ai` with `@ai-sdk/otel`, a mock model) and write the
// spans it made as one OTLP JSON line (the Collector file exporter's format).
// Node counterpart of _convention_agent.py, run by _conventions.py in its cached npm folder:
//
//     node _convention_agent.mjs vercel_ai CASES.json OUT.jsonl
//
// CASES.json is a list of {"question", "answer"}; each becomes one generateText call whose
// telemetry functionId "geo" names the agent span (`invoke_agent geo`).
import { appendFileSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

// packages resolve from the npm folder given by the caller, not from this file's folder
const require = createRequire(join(process.env.TRACESCORE_NODE_PREFIX, 'package.json'));
const { generateText, registerTelemetry } = require('ai');
const { MockLanguageModelV4 } = require('ai/test');
const { OpenTelemetry } = require('@ai-sdk/otel');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } =
  require('@opentelemetry/sdk-trace-base');

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

function otlpSpan(span) {
  const context = span.spanContext();
  return {
    traceId: context.traceId,
    spanId: context.spanId,
    parentSpanId: span.parentSpanContext?.spanId ?? '',
    name: span.name,
    kind: span.kind + 1, // API SpanKind (INTERNAL = 0) -> OTLP (INTERNAL = 1)
    startTimeUnixNano: nanos(span.startTime),
    endTimeUnixNano: nanos(span.endTime),
    attributes: Object.entries(span.attributes).map(([key, value]) => ({ key, value: anyValue(value) })),
    status: { code: span.status.code },
  };
}

async function runVercelAi(cases, out) {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  registerTelemetry(new OpenTelemetry({ tracer: provider.getTracer('ai'), agentSpanName: 'functionId' }));
  let answer = '';
  const model = new MockLanguageModelV4({
    doGenerate: async () => ({
      content: [{ type: 'text', text: answer }],
      finishReason: { unified: 'stop', raw: undefined },
      usage: {
        inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
        outputTokens: { total: 20, text: 20, reasoning: undefined },
      },
      warnings: [],
    }),
  });
  for (const item of cases) {
    answer = item.answer;
    await generateText({ model, prompt: item.question, telemetry: { functionId: 'geo' } });
  }
  await provider.forceFlush();
  const scope = { name: 'ai' };
  const request = {
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: 'conventions' } }] },
      scopeSpans: [{ scope, spans: exporter.getFinishedSpans().map(otlpSpan) }],
    }],
  };
  appendFileSync(out, JSON.stringify(request) + '\n');
  await provider.shutdown();
}

const [convention, casesFile, out] = process.argv.slice(2);
if (convention !== 'vercel_ai') {
  console.error(`unknown convention ${convention}`);
  process.exit(2);
}
await runVercelAi(JSON.parse(readFileSync(casesFile, 'utf-8')), out);
