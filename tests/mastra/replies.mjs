// Runs every judged scorer of the reference system (Mastra's @mastra/evals) on scripted judge
// replies twice, for tracescore's raw-reply differential tests: "checked", each reply parsed by
// its step's own output schema as in production; "raw", the replies as they are (no schema), so
// the score step sees exactly what the judge wrote. stdin: {"cases": [{"scorer", "input", "output", "tools", "system",
// "groundTruth", "options", "criteria", "trajectory", "expected", "turns", "replies"}]};
// stdout: one {checked, raw} per case, each {score, calls} or {error}.
import { toStandardSchema } from "@mastra/core/schema";
import {
  createAnswerRelevancyScorer,
  createAnswerSimilarityScorer,
  createBiasScorer,
  createContextPrecisionScorer,
  createContextRecallScorer,
  createContextRelevanceScorerLLM,
  createFaithfulnessScorer,
  createHallucinationScorer,
  createMultiTurnJudgeScorer,
  createNoiseSensitivityScorerLLM,
  createPromptAlignmentScorerLLM,
  createRubricScorer,
  createSummarizationScorer,
  createToolCallAccuracyScorerLLM,
  createToxicityScorer,
  createTrajectoryAccuracyScorerLLM,
} from "@mastra/evals/scorers/prebuilt";
import { scriptedModel } from "./scripted.mjs";

const FACTORIES = {
  "answer-relevancy": (model, c) => createAnswerRelevancyScorer({ model, options: c.options }),
  toxicity: (model, c) => createToxicityScorer({ model, options: c.options }),
  bias: (model, c) => createBiasScorer({ model, options: c.options }),
  faithfulness: (model, c) => createFaithfulnessScorer({ model, options: c.options }),
  hallucination: (model, c) => createHallucinationScorer({ model, options: c.options }),
  "llm-tool-call-accuracy": (model, c) =>
    createToolCallAccuracyScorerLLM({ model, availableTools: c.options?.availableTools ?? [] }),
  "context-relevance": (model, c) => createContextRelevanceScorerLLM({ model, options: c.options }),
  "answer-similarity": (model, c) => createAnswerSimilarityScorer({ model, options: c.options }),
  "context-precision": (model, c) => createContextPrecisionScorer({ model, options: c.options }),
  "context-recall": (model, c) => createContextRecallScorer({ model, options: c.options }),
  "noise-sensitivity": (model, c) => createNoiseSensitivityScorerLLM({ model, options: c.options }),
  "prompt-alignment": (model, c) => createPromptAlignmentScorerLLM({ model, options: c.options }),
  summarization: (model, c) => createSummarizationScorer({ model, options: c.options }),
  rubric: (model, c) => createRubricScorer({ model, criteria: c.criteria, options: c.options }),
  "llm-trajectory-accuracy": (model, c) =>
    createTrajectoryAccuracyScorerLLM({ model, ...c.options }),
  "multi-turn-judge": (model, c) => createMultiTurnJudgeScorer({ model, ...c.options }),
};

function message(role, text, id, toolInvocations) {
  const content = { format: 2, parts: [{ type: "text", text }], content: text };
  if (toolInvocations?.length) {
    content.toolInvocations = toolInvocations.map((name, i) => ({
      toolCallId: `call-${i}`, toolName: name, args: {}, result: {}, state: "result",
    }));
  }
  return { id: `${role}-${id}`, role, content, createdAt: new Date(0) };
}

// Each prompt step's output schema, compiled once (the reason step has none: free text).
const SCHEMAS = new Map();
function stepSchema(name, scorer, step) {
  const key = `${name}/${step}`;
  if (!SCHEMAS.has(key)) {
    const json = scorer.originalPromptObjects.get(step)?.outputSchema;
    SCHEMAS.set(key, json ? toStandardSchema(json) : null);
  }
  return SCHEMAS.get(key);
}

// The scorer's steps in order, as its workflow runs them (same step functions, same context),
// without the workflow engine: a prompt step's result is the scripted reply, parsed by the
// step's own output schema when `checked`, as it is when the judge model answers.
async function score(c, checked) {
  const queue = [...(c.replies ?? [])];
  let calls = 0;
  try {
    const scorer = FACTORIES[c.scorer](scriptedModel([]), c);
    const output = c.turns ? c.turns.map((text, i) => message("assistant", text, i))
      : c.trajectory ?? [message("assistant", c.output, 1, c.tools)];
    const given = {
      input: { inputMessages: [message("user", c.input ?? "Tell me about the refund policy.", 0)],
               rememberedMessages: [],
               systemMessages: (c.system ?? []).map((text) => ({ role: "system", content: text })),
               taggedSystemMessages: {} },
      output, groundTruth: c.groundTruth ?? undefined, expectedTrajectory: c.expected ?? undefined,
    };
    const run = { ...(scorer.config.prepareRun ? await scorer.config.prepareRun(given) : given),
                  runId: "run-1" };
    const results = {};
    for (const step of scorer.steps) {
      let result;
      if (step.isPromptObject) {
        calls++;
        result = queue.shift();
        if (checked) {
          const schema = stepSchema(c.scorer, scorer, step.name);
          const parsed = schema ? await schema["~standard"].validate(result) : { value: result };
          if (parsed.issues) throw new Error(`schema: ${JSON.stringify(parsed.issues)}`);
          result = parsed.value;
        }
      } else {
        result = await step.definition({
          run, results,
          ...(step.name === "generateReason" ? { score: results.generateScoreStepResult } : {}) });
      }
      if (result && typeof result === "object" && result[Symbol.for("mastra.evals.notScorable")]) {
        throw new Error("not scorable");
      }
      results[`${step.name}StepResult`] = result;
    }
    const value = results.generateScoreStepResult;
    if (typeof value !== "number" || !Number.isFinite(value)) return { error: `score ${value}` };
    return { score: value, calls };
  } catch (error) {
    return { error: String(error?.message ?? error).slice(0, 300) };
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const { cases } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
// the cases are independent (one scripted model each): run them together
const results = [];
for (const c of cases) results.push({ checked: await score(c, true), raw: await score(c, false) });
process.stdout.write(JSON.stringify(results));
