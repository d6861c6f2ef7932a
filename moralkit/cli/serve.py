"""``serve``: an OpenAI-compatible chat-completions server for a local model (:mod:`moralkit.collect.server`)."""

from __future__ import annotations

from .options import POS_SECONDS, int_in

__all__ = ["register_serve", "cmd_serve"]


def register_serve(sub) -> None:
    """Add ``serve`` to the subparsers ``sub``."""
    s = sub.add_parser("serve", help="OpenAI-compatible chat-completions server for a local model (loopback)",
                       allow_abbrev=False)
    s.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    s.add_argument("--gguf-file", default=None)
    s.add_argument("--host", default="127.0.0.1",
                   help="a loopback address (127.0.0.1, ::1, localhost); any other needs --allow-remote "
                        "(default: %(default)s)")
    s.add_argument("--allow-remote", action="store_true",
                   help="allow a non-loopback --host: the server has no authentication, put your own access "
                        "control in front of it")
    s.add_argument("--port", type=int_in(0, 65535), default=8000, help="0 picks a free port (default: %(default)s)")
    s.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    s.add_argument("--threads", type=int_in(1, 1024), default=None, help="torch CPU threads")
    s.add_argument("--max-tokens-limit", type=int_in(1, 1 << 20), default=1024,
                   help="largest max_tokens a request may ask for; more is a 400 (default: %(default)s)")
    s.add_argument("--max-prompt-tokens", type=int_in(1, 1 << 24), default=4096,
                   help="longest prompt in tokens; longer is a 400 (default: %(default)s)")
    s.add_argument("--max-body-bytes", type=int_in(1, 1 << 31), default=1 << 20,
                   help="largest request body; larger is a 413 (default: %(default)s)")
    s.add_argument("--request-timeout", type=POS_SECONDS, default=120.0,
                   help="seconds one generation may run before it is stopped with a 504 (default: %(default)s)")
    s.add_argument("--max-queue", type=int_in(0, 100000), default=16,
                   help="requests that may wait while one generates; more get 503 + Retry-After "
                        "(default: %(default)s)")
    s.add_argument("--queue-timeout", type=POS_SECONDS, default=60.0,
                   help="seconds a request may wait for the model before a 503 + Retry-After (default: %(default)s)")
    s.set_defaults(func=cmd_serve)


def cmd_serve(a):
    from moralkit.collect.server import ServerLimits, check_host, serve

    check_host(a.host, a.allow_remote)  # before anything loads
    limits = ServerLimits(max_tokens=a.max_tokens_limit, default_max_tokens=min(256, a.max_tokens_limit),
                          max_prompt_tokens=a.max_prompt_tokens, max_body_bytes=a.max_body_bytes,
                          request_timeout=a.request_timeout, max_queue=a.max_queue, queue_timeout=a.queue_timeout)
    serve(a.model, host=a.host, port=a.port, dtype=a.dtype, batch_size=1, gguf_file=a.gguf_file,
          allow_remote=a.allow_remote, limits=limits, threads=a.threads)

