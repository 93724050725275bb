// Runs the reference system's judged scorers that tracescore ported last (answer similarity,
// context precision and recall, noise sensitivity, prompt alignment, summarization, rubric) with a
// scripted judge model, for tracescore's differential tests. stdin: {"cases": [{"scorer", "input",
// "output", "system", "groundTruth", "options", "criteria", "replies"}]}, `replies` being the
// judge's JSON replies in step order; stdout: one result per case ({score, reason, preprocess,
// analyze, calls} or {error}).
import {
  createAnswerSimilarityScorer,
  createContextPrecisionScorer,
  createContextRecallScorer,
  createNoiseSensitivityScorerLLM,
  createPromptAlignmentScorerLLM,
  createRubricScorer,
  createSummarizationScorer,
} from "@mastra/evals/scorers/prebuilt";
import { scriptedModel } from "./scripted.mjs";

const FACTORIES = {
  "answer-similarity": (model, c) => createAnswerSimilarityScorer({ model, options: c.options }),
  "context-precision": (model, c) => createContextPrecisionScorer({ model, options: c.options }),
  // `noContext: true` stands for a call without context (an extractor that finds none)
  "context-recall": (model, c) => createContextRecallScorer({
    model, options: c.noContext ? { ...c.options, contextExtractor: () => [] } : c.options }),
  "noise-sensitivity": (model, c) => createNoiseSensitivityScorerLLM({ model, options: c.options }),
  "prompt-alignment": (model, c) => createPromptAlignmentScorerLLM({ model, options: c.options }),
  summarization: (model, c) => createSummarizationScorer({ model, options: c.options }),
  rubric: (model, c) => createRubricScorer({ model, criteria: c.criteria, options: c.options }),
};

function message(role, text, id) {
  const content = { format: 2, parts: [{ type: "text", text }], content: text };
  return { id: `${role}-${id}`, role, content, createdAt: new Date(0) };
}

async function score(item) {
  const model = scriptedModel(item.replies ?? []);
  try {
    const run = await FACTORIES[item.scorer](model, item).run({
      input: { inputMessages: item.input === null ? [] : [message("user", item.input, 1)],
               rememberedMessages: [],
               systemMessages: (item.system ?? []).map((text) => ({ role: "system", content: text })),
               taggedSystemMessages: {} },
      output: item.output === null ? [] : [message("assistant", item.output, 1)],
      groundTruth: item.groundTruth ?? undefined,
    });
    return { score: run.score, reason: run.reason ?? null,
             preprocess: run.preprocessStepResult ?? null,
             analyze: run.analyzeStepResult ?? null, calls: model.calls };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const request = JSON.parse(Buffer.concat(chunks).toString("utf8"));
// the cases are independent (one scripted model each): run them together
process.stdout.write(JSON.stringify(await Promise.all(request.cases.map(score))));
