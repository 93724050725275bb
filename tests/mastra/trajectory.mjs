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
import { scriptedModel } from "./scripted.mjs";

const FACTORIES = {
  "trajectory-accuracy": (model, options) => createTrajectoryAccuracyScorerCode(options),
  trajectory: (model, options) => createTrajectoryScorerCode(options),
  "llm-trajectory-accuracy": (model, options) =>
    createTrajectoryAccuracyScorerLLM({ model, ...options }),
  "multi-turn-judge": (model, options) => createMultiTurnJudgeScorer({ model, ...options }),
};

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
