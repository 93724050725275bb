// Runs the reference system's trajectory and multi-turn scorers (Mastra's @mastra/evals) for
// tracescore's differential tests. stdin: {"cases": [{"scorer", "options", "trajectory",
// "expected", "turns", "replies"}]}: `trajectory` is a Trajectory ({steps, totalDurationMs}),
// `expected` the item's expectedTrajectory, `turns` the assistant's answers (multi-turn judge),
// `replies` the scripted judge's JSON replies in step order. stdout: one result per case
// ({score, preprocess, analyze, calls} or {error}).
import {
  createMultiTurnJudgeScorer,
  createTrajectoryAccuracyScorerCode,
  createTrajectoryAccuracyScorerLLM,
  createTrajectoryScorerCode,
} from "@mastra/evals/scorers/prebuilt";

const FACTORIES = {
  "trajectory-accuracy": (model, options) => createTrajectoryAccuracyScorerCode(options),
  trajectory: (model, options) => createTrajectoryScorerCode(options),
  "llm-trajectory-accuracy": (model, options) =>
    createTrajectoryAccuracyScorerLLM({ model, ...options }),
  "multi-turn-judge": (model, options) => createMultiTurnJudgeScorer({ model, ...options }),
};

// A language model (AI SDK v2 interface) that answers each call with the next scripted reply.
function scriptedModel(replies) {
  const queue = [...replies];
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
  const next = () => { model.calls++; return JSON.stringify(queue.shift() ?? {}); };
  const model = {
    specificationVersion: "v2", provider: "scripted", modelId: "scripted-judge",
    supportedUrls: {}, calls: 0,
    async doGenerate() {
      return { content: [{ type: "text", text: next() }], finishReason: "stop", usage,
               warnings: [] };
    },
    async doStream() {
      const text = next();
      const stream = new ReadableStream({
        start(controller) {
          for (const part of [
            { type: "stream-start", warnings: [] }, { type: "text-start", id: "t" },
            { type: "text-delta", id: "t", delta: text }, { type: "text-end", id: "t" },
            { type: "finish", finishReason: "stop", usage },
          ]) controller.enqueue(part);
          controller.close();
        },
      });
      return { stream };
    },
  };
  return model;
}

function message(role, text) {
  const content = { format: 2, parts: [{ type: "text", text }], content: text };
  return { id: `${role}-1`, role, content, createdAt: new Date(0) };
}

async function score({ scorer, options, trajectory, expected, turns, replies }) {
  const model = scriptedModel(replies ?? []);
  try {
    const output = scorer === "multi-turn-judge"
      ? turns.map((text) => message("assistant", text)) : trajectory;
    const run = await FACTORIES[scorer](model, options ?? {}).run({
      input: { inputMessages: [message("user", "Plan my trip.")], rememberedMessages: [],
               systemMessages: [], taggedSystemMessages: {} },
      output, expectedTrajectory: expected ?? undefined,
    });
    return { score: run.score, preprocess: run.preprocessStepResult ?? null,
             analyze: run.analyzeStepResult ?? null, calls: model.calls };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { cases } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const results = [];
for (const item of cases) results.push(await score(item));
process.stdout.write(JSON.stringify(results));
