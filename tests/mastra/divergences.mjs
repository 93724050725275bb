// Runs the reference system's scorers (Mastra's @mastra/evals) on the inputs where tracescore
// decided otherwise (docs/scorers.md, "Decided divergences"), for the `mastra_compat` tests.
// Options reach each factory exactly as given: `null` calls it with no argument, `{}` with an
// empty object (which Mastra's content similarity reads differently).
// stdin: {"cases": [{"scorer", "options", "input", "output", "tools", "trajectory",
// "expected"}]}; stdout: one result per case ({score, preprocess} or {error}).
import {
  createContentSimilarityScorer,
  createToolCallAccuracyScorerCode,
  createTrajectoryAccuracyScorerCode,
  createTrajectoryScorerCode,
} from "@mastra/evals/scorers/prebuilt";

const FACTORIES = {
  "content-similarity": createContentSimilarityScorer,
  "tool-call-accuracy": createToolCallAccuracyScorerCode,
  "trajectory-accuracy": createTrajectoryAccuracyScorerCode,
  trajectory: createTrajectoryScorerCode,
};

function message(role, text, tools) {
  const content = { format: 2, parts: [{ type: "text", text }], content: text };
  if (tools?.length) {
    content.toolInvocations = tools.map((name, i) => ({
      toolCallId: `call-${i}`, toolName: name, args: {}, result: {}, state: "result",
    }));
  }
  return { id: `${role}-1`, role, content, createdAt: new Date(0) };
}

async function score({ scorer, options, input, output, tools, trajectory, expected }) {
  try {
    const factory = FACTORIES[scorer];
    const built = options === null ? factory() : factory(options);
    const run = await built.run({
      input: { inputMessages: [message("user", input ?? "Plan my trip.")],
               rememberedMessages: [], systemMessages: [], taggedSystemMessages: {} },
      output: trajectory ?? [message("assistant", output ?? "", tools)],
      expectedTrajectory: expected ?? undefined,
    });
    const preprocess = run.preprocessStepResult ?? null;
    return { score: run.score, preprocess: JSON.parse(JSON.stringify(preprocess)) };
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
