package dev.tracescore.reach;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.sun.net.httpserver.HttpServer;
import dev.langchain4j.data.message.AiMessage;
import dev.langchain4j.data.message.ChatMessage;
import dev.langchain4j.data.message.SystemMessage;
import dev.langchain4j.data.message.UserMessage;
import dev.langchain4j.model.chat.listener.ChatModelErrorContext;
import dev.langchain4j.model.chat.listener.ChatModelListener;
import dev.langchain4j.model.chat.listener.ChatModelRequestContext;
import dev.langchain4j.model.chat.listener.ChatModelResponseContext;
import dev.langchain4j.model.openai.OpenAiChatModel;
import dev.langchain4j.service.AiServices;
import io.opentelemetry.api.common.AttributeKey;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.api.trace.Tracer;
import io.opentelemetry.context.Scope;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A JVM agent for the reach tests: a LangChain4j AI service answers each case with its OpenAI chat
 * model, which calls a scripted OpenAI-compatible model served in this process. A LangChain4j
 * chat-model listener writes each model call as a GenAI `chat` span; the service call is the
 * `invoke_agent geo` span around it. Spans go to the gateway with the OpenTelemetry Java SDK over
 * OTLP/HTTP.
 *
 * <p>Usage: {@code Agent CASES.json http://HOST:PORT}, CASES.json a list of
 * {@code {"question", "answer", "system"?}}.
 */
public final class Agent {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final AttributeKey<String> OPERATION = AttributeKey.stringKey("gen_ai.operation.name");
  private static final AttributeKey<String> INPUT = AttributeKey.stringKey("gen_ai.input.messages");
  private static final AttributeKey<String> OUTPUT = AttributeKey.stringKey("gen_ai.output.messages");

  /** The AI service: LangChain4j implements it over the chat model. */
  interface Geo {
    String answer(String question);
  }

  private Agent() {}

  /** GenAI semantic-convention messages (role + text parts) of LangChain4j messages. */
  static String messages(List<ChatMessage> messages) {
    ArrayNode list = JSON.createArrayNode();
    for (ChatMessage message : messages) {
      String role;
      String text;
      if (message instanceof SystemMessage system) {
        role = "system";
        text = system.text();
      } else if (message instanceof UserMessage user) {
        role = "user";
        text = user.singleText();
      } else if (message instanceof AiMessage ai) {
        role = "assistant";
        text = ai.text();
      } else {
        continue;
      }
      ObjectNode item = list.addObject().put("role", role);
      item.putArray("parts").addObject().put("type", "text").put("content", text);
    }
    return list.toString();
  }

  /** Writes each model call LangChain4j makes as a `chat` span below the current span. */
  static final class Spans implements ChatModelListener {
    private final Tracer tracer;

    Spans(Tracer tracer) {
      this.tracer = tracer;
    }

    @Override
    public void onRequest(ChatModelRequestContext context) {
      Span span = tracer.spanBuilder("chat scripted").setSpanKind(SpanKind.CLIENT)
          .setAttribute(OPERATION, "chat")
          .setAttribute("gen_ai.provider.name", "openai")
          .setAttribute("gen_ai.request.model", "scripted")
          .setAttribute(INPUT, messages(context.chatRequest().messages()))
          .startSpan();
      context.attributes().put(Span.class, span);
    }

    @Override
    public void onResponse(ChatModelResponseContext context) {
      Span span = (Span) context.attributes().get(Span.class);
      span.setAttribute(OUTPUT, messages(List.of(context.chatResponse().aiMessage())));
      span.end();
    }

    @Override
    public void onError(ChatModelErrorContext context) {
      Span span = (Span) context.attributes().get(Span.class);
      if (span != null) {
        span.setStatus(StatusCode.ERROR, String.valueOf(context.error()));
        span.end();
      }
    }
  }

  /** A scripted OpenAI-compatible model: the answer to a request's last user message. */
  static HttpServer scriptedModel(Map<String, String> answers) throws Exception {
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/v1/chat/completions", exchange -> {
      JsonNode request = JSON.readTree(exchange.getRequestBody());
      String question = "";
      for (JsonNode message : request.path("messages")) {
        if ("user".equals(message.path("role").asText())) {
          JsonNode content = message.path("content");
          question = content.isArray() ? content.path(0).path("text").asText() : content.asText();
        }
      }
      ObjectNode reply = JSON.createObjectNode().put("id", "chatcmpl-scripted")
          .put("object", "chat.completion").put("created", 0).put("model", "scripted");
      ObjectNode choice = reply.putArray("choices").addObject().put("index", 0)
          .put("finish_reason", "stop");
      choice.putObject("message").put("role", "assistant")
          .put("content", answers.getOrDefault(question, ""));
      reply.putObject("usage").put("prompt_tokens", 10).put("completion_tokens", 5)
          .put("total_tokens", 15);
      byte[] body = reply.toString().getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().add("Content-Type", "application/json");
      exchange.sendResponseHeaders(200, body.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    });
    server.start();
    return server;
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: Agent CASES.json http://HOST:PORT");
      System.exit(2);
    }
    JsonNode cases = JSON.readTree(Files.readString(Path.of(args[0])));
    Map<String, String> answers = new HashMap<>();
    for (JsonNode item : cases) {
      answers.put(item.path("question").asText(), item.path("answer").asText());
    }
    HttpServer model = scriptedModel(answers);
    OtlpHttpSpanExporter exporter = OtlpHttpSpanExporter.builder()
        .setEndpoint(args[1].replaceAll("/$", "") + "/v1/traces").build();
    SdkTracerProvider provider = SdkTracerProvider.builder()
        .setResource(Resource.empty())
        .addSpanProcessor(BatchSpanProcessor.builder(exporter).build())
        .build();
    Tracer tracer = provider.get("tracescore.reach.jvm");
    try {
      OpenAiChatModel chat = OpenAiChatModel.builder()
          .baseUrl("http://127.0.0.1:" + model.getAddress().getPort() + "/v1")
          .apiKey("sk-scripted").modelName("scripted")
          .listeners(List.of(new Spans(tracer)))
          .build();
      for (JsonNode item : cases) {
        String system = item.path("system").asText("");
        AiServices<Geo> builder = AiServices.builder(Geo.class).chatModel(chat);
        if (!system.isEmpty()) {
          builder.systemMessageProvider(memoryId -> system);
        }
        Geo geo = builder.build();
        String question = item.path("question").asText();
        Span agent = tracer.spanBuilder("invoke_agent geo")
            .setAttribute(OPERATION, "invoke_agent")
            .setAttribute("gen_ai.agent.name", "geo")
            .setAttribute(INPUT, messages(List.of(UserMessage.from(question))))
            .startSpan();
        try (Scope ignored = agent.makeCurrent()) {
          String answer = geo.answer(question);
          agent.setAttribute(OUTPUT, messages(List.of(AiMessage.from(answer))));
        } finally {
          agent.end();
        }
      }
    } finally {
      provider.forceFlush().join(30, TimeUnit.SECONDS);
      provider.shutdown().join(30, TimeUnit.SECONDS);
      model.stop(0);
    }
  }
}
