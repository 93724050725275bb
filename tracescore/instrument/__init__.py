"""Instrumentation: decorators, litellm middleware and agent-object patching that emit GenAI spans."""
