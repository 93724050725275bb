import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The fixtures (span_exporter, otlp_receiver, stub_llm) come from tracescore's pytest11 entry point.
