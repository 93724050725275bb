// A Go agent for the reach tests: the official OpenAI Go client (openai-go) answers each case
// through a scripted OpenAI-compatible model served in this process, and the OpenTelemetry Go SDK
// exports the agent's spans over OTLP/HTTP, with the GenAI semantic-convention attributes on the
// agent span (`invoke_agent geo`) and on its model call (`chat scripted`).
//
// Usage: agent CASES.json http://HOST:PORT
// CASES.json: [{"question": "...", "answer": "...", "system": "..." (optional)}]
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

type testCase struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	System   string `json:"system,omitempty"`
}

type part struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

type message struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

func messages(role string, text string) string {
	encoded, _ := json.Marshal([]message{{Role: role, Parts: []part{{Type: "text", Content: text}}}})
	return string(encoded)
}

// scriptedModel answers a chat completion with the scripted answer of its last user message.
func scriptedModel(answers map[string]string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var request struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&request); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		question := ""
		for _, m := range request.Messages {
			if m.Role == "user" {
				question = m.Content
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": "scripted",
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": answers[question]}}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
	}))
}

func answer(ctx context.Context, tracer trace.Tracer, client openai.Client, c testCase) error {
	ctx, agent := tracer.Start(ctx, "invoke_agent geo", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.agent.name", "geo"),
			attribute.String("gen_ai.input.messages", messages("user", c.Question))))
	defer agent.End()
	params := openai.ChatCompletionNewParams{Model: "scripted"}
	if c.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(c.System))
		agent.SetAttributes(attribute.String("gen_ai.system_instructions",
			fmt.Sprintf(`[{"type":"text","content":%q}]`, c.System)))
	}
	params.Messages = append(params.Messages, openai.UserMessage(c.Question))
	_, chat := tracer.Start(ctx, "chat scripted", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat"),
			attribute.String("gen_ai.request.model", "scripted"),
			attribute.String("gen_ai.provider.name", "openai")))
	completion, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		chat.End()
		return err
	}
	text := completion.Choices[0].Message.Content
	chat.SetAttributes(attribute.String("gen_ai.response.model", completion.Model),
		attribute.Int64("gen_ai.usage.input_tokens", completion.Usage.PromptTokens),
		attribute.Int64("gen_ai.usage.output_tokens", completion.Usage.CompletionTokens))
	chat.End()
	agent.SetAttributes(attribute.String("gen_ai.output.messages", messages("assistant", text)))
	return nil
}

func run(casesFile string, endpoint string) error {
	raw, err := os.ReadFile(casesFile)
	if err != nil {
		return err
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		return err
	}
	answers := map[string]string{}
	for _, c := range cases {
		answers[c.Question] = c.Answer
	}
	model := scriptedModel(answers)
	defer model.Close()

	ctx := context.Background()
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(
		strings.TrimSuffix(endpoint, "/")+"/v1/traces"))
	if err != nil {
		return err
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(resource.Empty()))
	defer func() { _ = provider.Shutdown(ctx) }()
	tracer := provider.Tracer("tracescore.reach.go")
	client := openai.NewClient(option.WithBaseURL(model.URL+"/v1"), option.WithAPIKey("sk-scripted"))
	for _, c := range cases {
		if err := answer(ctx, tracer, client, c); err != nil {
			return err
		}
	}
	return provider.ForceFlush(ctx)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: agent CASES.json http://HOST:PORT")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
