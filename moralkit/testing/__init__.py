"""Test doubles of the LLM providers, on 127.0.0.1, for tests and benchmarks (never a source of data).

- :mod:`~moralkit.testing.httpfake`: the base of the fake servers (route table, request log, transient faults).
- :mod:`~moralkit.testing.fake_openai`: OpenAI's chat-completions API, with chat and reasoning models.
- :mod:`~moralkit.testing.fake_anthropic`: Anthropic's Messages API, its errors and rate-limit headers.
- :mod:`~moralkit.testing.faultserver`: an OpenAI-compatible server injecting 13 kinds of transport and body
  faults (formerly ``moralkit.collect.faultserver``).
- :mod:`~moralkit.testing.fake_batches`: OpenAI's files + batches and Anthropic's message batches, with
  their state machines, partial failures and expiry, and OpenAI's chat completions with ``n``.

Tests drive them through the official ``openai`` and ``anthropic`` SDKs, as the collectors do.
"""
