"""Test helpers for tracescore and its users: a real OTLP receiver and a stub OpenAI-compatible judge."""
