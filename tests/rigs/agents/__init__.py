"""Scripts the side environments run by path (`python agents/NAME.py ...`, `node ...mjs`), where
tracescore is not installed: each imports only its libraries, the OpenTelemetry SDK and its
siblings here. The suite imports them only for their constants (pins, names)."""
