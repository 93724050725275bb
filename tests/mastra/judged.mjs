// Runs the reference system's own judged scorers (Mastra's @mastra/evals) with a scripted judge
// model, for tracescore's differential tests: the same judge replies must give the same score.
// stdin: {"cases": [{"scorer", "input", "output", "options", "tools", "replies"}]}, where
// `replies` are the judge's JSON replies in step order; stdout: one result per case
// ({score, preprocess, analyze, calls} or {error}). `node judged.mjs round` reads
// {"values": [number]} and prints the reference's roundToTwoDecimals of each.
import { roundToTwoDecimals } from "@mastra/evals/scorers/utils";
import {
  createAnswerRelevancyScorer,
  createBiasScorer,
  createContextRelevanceScorerLLM,
  createFaithfulnessScorer,
  createHallucinationScorer,
  createToolCallAccuracyScorerLLM,
  createToxicityScorer,
} from "@mastra/evals/scorers/prebuilt";
import { scriptedModel } from "./scripted.mjs";

const FACTORIES = {
  "answer-relevancy": (model, options) => createAnswerRelevancyScorer({ model, options }),
  toxicity: (model, options) => createToxicityScorer({ model, options }),
  bias: (model, options) => createBiasScorer({ model, options }),
  "llm-tool-call-accuracy": (model, options) =>
    createToolCallAccuracyScorerLLM({ model, availableTools: options.availableTools ?? [] }),
  faithfulness: (model, options) => createFaithfulnessScorer({ model, options }),
  hallucination: (model, options) => createHallucinationScorer({ model, options }),
  // `noContext: true` stands for a call without context (an extractor that finds none)
  "context-relevance": (model, { noContext, ...options }) => createContextRelevanceScorerLLM({
    model, options: noContext ? { ...options, contextExtractor: () => [] } : options }),
};

function message(role, text, toolInvocations) {
  const content = { format: 2, parts: [{ type: "text", text }], content: text };
  if (toolInvocations?.length) {
    content.toolInvocations = toolInvocations.map((name, i) => ({
      toolCallId: `call-${i}`, toolName: name, args: {}, result: {}, state: "result",
    }));
  }
  return { id: `${role}-1`, role, content, createdAt: new Date(0) };
}

async function score({ scorer, input, output, options, tools, replies }) {
  const model = scriptedModel(replies ?? []);
  try {
    const run = await FACTORIES[scorer](model, options ?? {}).run({
      input: { inputMessages: [message("user", input)], rememberedMessages: [],
               systemMessages: [], taggedSystemMessages: {} },
      output: [message("assistant", output, tools)],
    });
    return { score: run.score, preprocess: run.preprocessStepResult ?? null,
             analyze: run.analyzeStepResult ?? null, calls: model.calls };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
if (process.argv[2] === "round") {
  process.stdout.write(JSON.stringify(request.values.map(roundToTwoDecimals)));
} else {
  const results = [];
  for (const item of request.cases) results.push(await score(item));
  process.stdout.write(JSON.stringify(results));
}
