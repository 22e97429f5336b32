"""Chat model adapters. Each lives in its own module, imported on demand, so
its optional dependency (``httpx`` for OpenAI-compatible endpoints) is only
needed when it is used."""
