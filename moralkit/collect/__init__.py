"""Administering the two surveys to real LLMs (API or local) and storing every answer.

- :mod:`~moralkit.collect.backends`: ``make_backend("transformers" | "openai" | "anthropic", model, ...)``.
- :mod:`~moralkit.collect.localmodels`: real small instruct models shipped by PyPI packages (offline default).
- :mod:`~moralkit.collect.runner`: the one request runner of both surveys (``run_tasks``): a pool,
  per-request error handling and retries, the completeness report.
- :mod:`~moralkit.collect.store`: append-only, crash-safe JSONL records and the run manifest (``RecordStore``);
  its rooms :mod:`~moralkit.collect.record_files` (strict reading, the quarantine),
  :mod:`~moralkit.collect.runlock` (the run-directory lock), :mod:`~moralkit.collect.repair` (``repair_run``)
  and :mod:`~moralkit.collect.provenance` (time stamps, seeds, versions, the session).
- :mod:`~moralkit.collect.secrets`: keeping API keys and URL credentials out of files and output.
- :mod:`~moralkit.collect.batch`: OpenAI's Batch API and Anthropic's Message Batches behind ``--batch``,
  resumable at any moment (``BatchBackend``, ``run_requests``); the two APIs in
  :mod:`~moralkit.collect.batch_apis`, the journal of submissions in :mod:`~moralkit.collect.batch_journal`.
- :mod:`~moralkit.collect.units`: M samples in one request (OpenAI-style ``n``).
- :mod:`~moralkit.collect.cache`: the response cache across runs (``--cache``, ``python -m moralkit cache``).
- :mod:`moralkit.testing`: the test doubles of the providers (fake OpenAI and Anthropic servers, the fault server).
- :mod:`~moralkit.collect.psm`: ``run_psm``, ``psm_dataset``, ``export_psm``, ``psm_quality``.
- :mod:`~moralkit.collect.moralchoice`: ``run_moralchoice``, ``moralchoice_frame``, ``export_moralchoice``.
- :mod:`~moralkit.collect.server`: an OpenAI-compatible chat-completions server for local models (caps,
  validation, a bounded queue, timeouts, ``top_logprobs``); the request checks in
  :mod:`~moralkit.collect.server_validation`, the model in :mod:`~moralkit.collect.server_engine`.
- :mod:`~moralkit.collect.logprob_api`: MoralChoice action likelihoods from an endpoint's ``top_logprobs``.
- :mod:`~moralkit.collect.summary`: data-quality tables and a figure for collection runs.
- :mod:`~moralkit.collect.cost`: prices, token estimates, cost by mode, budgets and tokens per minute.
- :mod:`~moralkit.collect.sweep`: a panel of models x surveys from one TOML file, and its status table.

Command line: ``python -m moralkit collect psm|moralchoice ...``, ``estimate``, ``sweep``, ``export``, ``repair``
(``python -m moralkit --help``).
"""

from .backends import Backend, Completion, OpenAIBackend, Request, Sampling, TransformersBackend, make_backend
from .localmodels import DEFAULT_MODEL, LOCAL_MODELS, local_model_path
from .moralchoice import export_moralchoice, moralchoice_frame, moralchoice_quality, run_moralchoice
from .psm import export_psm, psm_dataset, psm_quality, run_psm
from .runner import CollectionIncompleteError, CollectionRefusedError, RunReport, Task, run_tasks
from .store import CorruptRecordsError, RecordStore, RunLockedError, read_records, repair_run

__all__ = ["Backend", "Completion", "OpenAIBackend", "Request", "Sampling", "TransformersBackend", "make_backend",
           "DEFAULT_MODEL", "LOCAL_MODELS", "local_model_path", "run_psm", "psm_dataset", "export_psm",
           "psm_quality", "run_moralchoice", "moralchoice_frame", "export_moralchoice", "moralchoice_quality",
           "RecordStore", "read_records", "repair_run", "CorruptRecordsError", "RunLockedError", "Task", "run_tasks",
           "RunReport", "CollectionIncompleteError", "CollectionRefusedError"]
