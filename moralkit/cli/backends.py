"""From parsed options to what a collection runs with: the backend, its cost meter, the sampling, the persona.

Shared by ``collect psm``, ``collect moralchoice`` and ``likelihood`` (:mod:`moralkit.cli.collection`).
"""

from __future__ import annotations

from moralkit.errors import MoralkitError

__all__ = ["dry_run", "backend_from_args", "collect_backend", "sampling_from_args", "apply_persona"]


def _meter(a, b):
    """Attach the cost meter of ``--max-cost``, ``--tpm`` and the price to backend ``b``."""
    from moralkit.collect.cost import CostMeter, price_for

    price = price_for(getattr(b, "remote_model", None) or b.model, price_in=a.price_in, price_out=a.price_out) \
        if (a.backend != "transformers" or a.price_in is not None) else None
    b.cost_meter = CostMeter(price=price, max_cost=a.max_cost, tpm=a.tpm)
    return b


def dry_run(a, survey):
    """``collect ... --dry-run``: the estimate of this collection, by mode; nothing is sent."""
    from moralkit.collect.cost import estimate_markdown
    from moralkit.collect.localmodels import DEFAULT_MODEL

    kw = dict(system=a.system, limit=a.limit) if survey == "psm" else dict(
        ambiguity=a.ambiguity, scenarios=a.scenarios, n_scenarios=a.n_scenarios, scenario_seed=a.scenario_seed,
        samples=a.samples, question_types=tuple(a.question_types.split(",")) if a.question_types else None,
        max_tokens=a.max_tokens)
    print(estimate_markdown([a.model or DEFAULT_MODEL], survey, backend=a.backend, price_in=a.price_in,
                            price_out=a.price_out, **kw))


def backend_from_args(a, default_batch):
    """The backend of ``--backend``/``--model`` and their options, with its cost meter (nothing is sent yet)."""
    from moralkit.collect.backends import make_backend
    from moralkit.collect.localmodels import DEFAULT_MODEL

    model = a.model or DEFAULT_MODEL
    if a.backend == "transformers":
        return _meter(a, make_backend("transformers", model, gguf_file=a.gguf_file, device=a.device, dtype=a.dtype,
                                      batch_size=a.batch_size or default_batch, threads=a.threads))
    if a.model is None:
        raise MoralkitError(f"--model is required with --backend {a.backend} (the model name the API knows)")
    common = dict(base_url=a.base_url, api_key_env=a.api_key_env, concurrency=a.concurrency, rpm=a.rpm,
                  timeout=a.timeout, max_retries=a.max_retries, backoff=a.backoff)
    if a.backend == "anthropic":
        return _meter(a, make_backend("anthropic", model, api_version=a.anthropic_version, **common))
    return _meter(a, make_backend("openai", model, send_seed=not a.no_seed, max_tokens_param=a.max_tokens_param,
                                  reasoning=True if a.reasoning_effort else None, **common))


def collect_backend(a, default_batch):
    """The backend of a collection: online, a batch API (--batch), with the response cache (--cache)."""
    cache = None
    if getattr(a, "cache", False):
        from moralkit.collect.cache import ResponseCache

        cache = ResponseCache()
    if getattr(a, "batch", False):
        from moralkit.collect.batch import BatchBackend

        if getattr(a, "max_cost", None) is not None:  # as a sweep's batch job (collect/sweep_file.py)
            raise MoralkitError("--max-cost is not enforced with --batch (a batch is paid when it runs, not per "
                                "request); check the cost first with --dry-run, then drop --max-cost, or "
                                "collect online without --batch")

        env = a.api_key_env or ("ANTHROPIC_API_KEY" if a.backend == "anthropic" else "OPENAI_API_KEY")
        return BatchBackend(a.backend, a.model, base_url=a.base_url, api_key_env=env, wait=a.wait,
                            poll_interval=a.poll_interval, max_retries=min(a.max_retries, 3), cache=cache,
                            timeout=max(a.timeout, 120.0))
    if a.wait is not None:
        raise MoralkitError("--wait applies to --batch collections only")
    b = backend_from_args(a, default_batch)
    if cache is not None:
        from moralkit.collect.cache import CachedBackend

        b = CachedBackend(b, cache)
    return b


def sampling_from_args(a, default_max, backend=None):
    """The sampling options (``--temperature`` ...) as a :class:`moralkit.collect.backends.Sampling`."""
    from moralkit.collect.backends import Sampling, survey_max_tokens

    return Sampling(temperature=a.temperature, top_p=a.top_p, top_k=a.top_k,
                    max_tokens=a.max_tokens or survey_max_tokens(backend, default_max),
                    reasoning_effort=a.reasoning_effort)


def apply_persona(a):
    """Turn ``--persona`` into the system message and the respondent label."""
    if a.persona is None:
        return
    from moralkit.collect.localmodels import DEFAULT_MODEL
    from moralkit.collect.personas import get_persona, persona_label

    p = get_persona(a.persona)
    if a.system is not None:
        raise MoralkitError("give either --persona or --system, not both")
    a.system = p.system
    a.label = persona_label(a.label or a.model or DEFAULT_MODEL, p.name)

