// Runs the reference system's quick checks (`checks.*` of Mastra's @mastra/evals) for
// tracescore's differential tests. stdin: {"cases": [{"check", "args", "texts", "tools"}]}:
// `args` the check's positional arguments (for `matches`: [source, flags, options]), `texts`
// the assistant messages' texts, `tools` the tool calls ({name, failed}). stdout: one result
// per case ({score, preprocess} or {error}).
import { checks } from "@mastra/evals/checks";

function message(i, text, tools) {
  const content = { format: 2, parts: [{ type: "text", text }], content: text };
  if (tools?.length) {
    content.toolInvocations = tools.map((t, j) => ({
      toolCallId: `call-${i}-${j}`, toolName: t.name, args: {}, result: {},
      state: t.failed ? "output-error" : "result",
    }));
  }
  return { id: `assistant-${i}`, role: "assistant", content, createdAt: new Date(0) };
}

async function score({ check, args, texts, tools }) {
  try {
    const built = check === "matches"
      ? checks.matches(new RegExp(args[0], args[1]), args[2]) : checks[check](...args);
    const output = texts.map((text, i) => message(i, text, i === 0 ? tools : []));
    const run = await built.run({
      input: { inputMessages: [], rememberedMessages: [], systemMessages: [],
               taggedSystemMessages: {} },
      output,
    });
    return { score: run.score, preprocess: run.preprocessStepResult ?? null };
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
