"""Executing the companion's notebooks and publishing them as an offline Jupyter Book.

``run_all.py`` is the command line of :func:`run_all`. papermill executes the notebooks, Jupyter Book
(Sphinx + MyST-NB) renders them; this package holds only what those libraries do not do:

=====================================  ==================================================================
module                                 what it holds
=====================================  ==================================================================
:mod:`moralkit.book.notebooks`         the ``NN_name.py`` notebooks: discovery, titles, parameters
:mod:`moralkit.book.execute`           one papermill run, the failing cell located in the ``.py`` file,
                                       the removal of a notebook's earlier outputs
:mod:`moralkit.book.kernels`           warm kernels: forked from a process that imported their libraries
:mod:`moralkit.book.publish`           the book's sources (run box per page, index, table of contents,
                                       configuration with local MathJax) and the Sphinx build
:mod:`moralkit.book.early`             the book built early, beside the last notebooks
:mod:`moralkit.book.run`               the batch (:func:`run_all`) and its command line (:func:`main`)
:mod:`moralkit.book.report`            a run's result (:class:`BookRun`) and what ``run_all.py`` prints
=====================================  ==================================================================

References
----------
Seror (2025), *The Moral Mind(s) of LLMs*, and Scherrer et al. (2023), *Evaluating the Moral Beliefs
Encoded in LLMs*: the notebooks reproduce their sections; this package only runs and publishes them.
"""

import sys as _sys

# jsonschema, which nbformat (papermill, MyST-NB) imports, imports the optional ``rfc3987_syntax`` when it is
# installed (jupyter-events pulls it in through ``jsonschema[format-nongpl]``), and that module builds 38 Lark
# grammars at import: ~1.8 CPU s in each process that loads nbformat, i.e. in run_all's own process, in each
# worker running notebooks side by side and in the Sphinx build (``benchmarks/bench_imports.py``). It only
# adds the "iri"/"iri-reference" format checks, which the notebook schema never uses, so processes that
# import this package block that import (jsonschema then simply has no IRI checker). A process that already
# imported jsonschema keeps what it has.
if "jsonschema" not in _sys.modules:
    _sys.modules.setdefault("rfc3987_syntax", None)

from .execute import CellFailure, NotebookRun, clear_outputs, execute_notebook
from .notebooks import (
    declared_parameters,
    discover_notebooks,
    notebook_title,
    read_notebook,
    select_parameters,
)
from .publish import BookError, build_book, find_remote_assets
from .report import BookRun, format_failure, format_timing
from .run import main, run_all

__all__ = [
    "BookError",
    "BookRun",
    "CellFailure",
    "NotebookRun",
    "build_book",
    "clear_outputs",
    "declared_parameters",
    "discover_notebooks",
    "execute_notebook",
    "find_remote_assets",
    "format_failure",
    "format_timing",
    "main",
    "notebook_title",
    "read_notebook",
    "run_all",
    "select_parameters",
]
