// A small "travel" agent in Node.js, instrumented with the OpenTelemetry JS SDK only (no tracescore):
// each call is an `invoke_agent travel` span (GenAI semantic conventions, input and output messages)
// with a `chat` child span. Spans go over OTLP/HTTP protobuf to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
//
//   node agent.mjs "question one" "question two" ...
//
// Prints one JSON line per call: {"question", "answer", "trace_id", "span_id"}.
import { context, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor } from "@opentelemetry/sdk-trace-base";

const provider = new BasicTracerProvider({
  resource: resourceFromAttributes({ "service.name": "node-travel-agent" }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
const tracer = provider.getTracer("node-travel-agent", "1.0.0");

const CAPITALS = { France: "Paris", Italy: "Rome", Spain: "Madrid" };

function answer(question) {
  const country = Object.keys(CAPITALS).find((name) => question.includes(name));
  return country ? `${CAPITALS[country]} is the capital of ${country}.` : "I like trains.";
}

function textMessage(role, text) {
  return { role, parts: [{ type: "text", content: text }] };
}

function invokeAgent(question) {
  return tracer.startActiveSpan(
    "invoke_agent travel",
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "travel",
        "gen_ai.provider.name": "openai",
        "gen_ai.input.messages": JSON.stringify([textMessage("user", question)]),
      },
    },
    (agent) => {
      const reply = tracer.startActiveSpan(
        "chat gpt-4o-mini",
        {
          kind: SpanKind.CLIENT,
          attributes: {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
          },
        },
        // explicit parent: the SDK alone registers no async context manager
        trace.setSpan(context.active(), agent),
        (chat) => {
          const text = answer(question);
          chat.setAttributes({
            "gen_ai.response.model": "gpt-4o-mini",
            "gen_ai.usage.input_tokens": question.split(/\s+/).length,
            "gen_ai.usage.output_tokens": text.split(/\s+/).length,
            "gen_ai.response.finish_reasons": ["stop"],
          });
          chat.end();
          return text;
        },
      );
      agent.setAttribute(
        "gen_ai.output.messages",
        JSON.stringify([{ ...textMessage("assistant", reply), finish_reason: "stop" }]),
      );
      agent.setStatus({ code: SpanStatusCode.OK });
      const { traceId, spanId } = agent.spanContext();
      agent.end();
      return { question, answer: reply, trace_id: traceId, span_id: spanId };
    },
  );
}

for (const question of process.argv.slice(2)) {
  console.log(JSON.stringify(invokeAgent(question)));
}
await provider.shutdown(); // flushes the batch processor
trace.disable();
