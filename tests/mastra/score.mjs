// Scores cases with the reference system's own scorers (Mastra's @mastra/evals), for
// tracescore's differential tests. stdin: {"cases": [{"scorer", "input", "output",
// "options"}]}; stdout: one result per case ({score, preprocess, analyze} or {error}).
// `node score.mjs stopwords` prints keyword-extractor's English stop words instead,
// `node score.mjs sentiment-labels` the words and emoji the `sentiment` package scores, and
// `node score.mjs whitespace` the BMP code points that JavaScript's `\s` matches.
import { createRequire } from "node:module";
import keywordExtractor from "keyword-extractor";
import {
  createCompletenessScorer,
  createContentSimilarityScorer,
  createKeywordCoverageScorer,
  createTextualDifferenceScorer,
  createToneScorer,
  createToolCallAccuracyScorerCode,
} from "@mastra/evals/scorers/prebuilt";

const FACTORIES = {
  // no options: the factory's own defaults (an empty object would turn both off)
  "content-similarity": (options) =>
    createContentSimilarityScorer(Object.keys(options).length ? options : undefined),
  "textual-difference": () => createTextualDifferenceScorer(),
  "keyword-coverage": () => createKeywordCoverageScorer(),
  "tool-call-accuracy": (options) => createToolCallAccuracyScorerCode(options),
  "completeness": () => createCompletenessScorer(),
  "tone": (options) => createToneScorer(options),
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

function plain(value) {
  return JSON.parse(JSON.stringify(value, (_, v) => (v instanceof Set ? [...v] : v)));
}

async function score({ scorer, input, output, options, tools }) {
  try {
    const run = await FACTORIES[scorer](options ?? {}).run({
      input: { inputMessages: [message("user", input)], rememberedMessages: [],
               systemMessages: [], taggedSystemMessages: {} },
      output: [message("assistant", output, tools)],
    });
    return { score: run.score, preprocess: plain(run.preprocessStepResult ?? null),
             analyze: plain(run.analyzeStepResult ?? null) };
  } catch (error) {
    return { error: String(error?.message ?? error) };
  }
}

async function main() {
  if (process.argv[2] === "stopwords") {
    process.stdout.write(JSON.stringify(keywordExtractor.getStopwords({ language: "english" })));
    return;
  }
  if (process.argv[2] === "sentiment-labels") {
    // what `sentiment` (the tone scorer's package) scores: AFINN-165 words plus its emoji list
    const require = createRequire(import.meta.resolve("@mastra/evals"));
    const sentimentDir = require.resolve("sentiment").replace(/lib[\\/]index\.js$/, "");
    process.stdout.write(JSON.stringify({
      ...require(`${sentimentDir}languages/en/labels.json`),
      ...require(`${sentimentDir}build/emoji.json`),
    }));
    return;
  }
  if (process.argv[2] === "whitespace") {
    const codes = [];
    for (let code = 0; code < 0x10000; code++) {
      if (/\s/.test(String.fromCharCode(code))) codes.push(code);
    }
    process.stdout.write(JSON.stringify(codes));
    return;
  }
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  const { cases } = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  const results = [];
  for (const item of cases) results.push(await score(item));
  process.stdout.write(JSON.stringify(results));
}

await main();
