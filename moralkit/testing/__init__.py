"""Test doubles of the LLM providers, on 127.0.0.1, for tests and benchmarks (never a source of data).

- :mod:`~moralkit.testing.fake_batches`: OpenAI's files + batches and Anthropic's message batches, with
  their state machines, partial failures and expiry, and OpenAI's chat completions with ``n``.

Tests drive them through the official ``openai`` and ``anthropic`` SDKs, as the collectors do.
"""
