// A scripted judge for the reference scorers, shared by the scripts of this folder.

// A language model (AI SDK v2 interface) that answers each call with the next scripted reply
// and keeps the count of calls and the last user prompt of each.
export function scriptedModel(replies) {
  const queue = [...replies];
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 };
  const model = {
    specificationVersion: "v2", provider: "scripted", modelId: "scripted-judge",
    supportedUrls: {}, calls: 0, prompts: [],
    answer(options) {
      model.calls++;
      const user = (options?.prompt ?? []).filter((m) => m.role === "user");
      const last = user[user.length - 1]?.content;
      model.prompts.push(Array.isArray(last) ? last.map((p) => p.text ?? "").join("") : String(last ?? ""));
      return JSON.stringify(queue.shift() ?? {});
    },
    async doGenerate(options) {
      const text = model.answer(options);
      return { content: [{ type: "text", text }], finishReason: "stop", usage, warnings: [] };
    },
    async doStream(options) {
      const text = model.answer(options);
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
