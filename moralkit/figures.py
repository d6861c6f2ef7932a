"""Saving and showing results: one helper for figures and tables.

Every notebook writes its outputs the same way:

=======================  =====================================================================
call                     what it does
=======================  =====================================================================
``save(fig, stem)``      a matplotlib figure -> ``<figures>/<stem>.png`` (150 dpi) and ``.svg``;
                         in a notebook, the saved PNG is also shown on the page and the figure closed
``save(df, stem)``       a pandas table -> ``<tables>/<stem>.csv``
``show(df, stem)``       ``save(df, stem)`` and display ``df`` as an HTML table on the page,
                         every row and column, in a scrollable box when it is long or wide
=======================  =====================================================================

``<figures>`` and ``<tables>`` are :func:`moralkit.paths.figures_dir` and
:func:`moralkit.paths.tables_dir`; notebooks prefix ``stem`` with their number
(``"04_fig3_similarity"``), which is how ``run_all.py`` knows which files a notebook wrote.
What :func:`save` returns prints as paths relative to the project (``figures/02_x.png``),
never as a machine path.

Examples
--------
>>> import tempfile, pandas as pd
>>> d = tempfile.mkdtemp()
>>> saved = save(pd.DataFrame({"model": ["a", "b"], "alpha": [0.5, 0.01]}), "02_demo", directory=d)
>>> [p.name for p in saved]
['02_demo.csv']
>>> html = table_html(pd.DataFrame({"x": range(100)}))
>>> 'class="mk-table-scroll mk-table-long"' in html and html.count("</tr>") == 101
True
"""

from __future__ import annotations

import html as _html
import itertools
import os
from pathlib import Path

from .errors import MoralkitError, MoralkitTypeError
from .paths import figures_dir, project_root, tables_dir

__all__ = ["LONG_TABLE_ROWS", "PNG_DPI", "Saved", "download_link", "format_interval", "relative_path", "save",
           "show", "show_head", "table_html"]

#: tables with more rows than this are shown in a box of fixed height that scrolls
LONG_TABLE_ROWS = 15
_TABLE_IDS = itertools.count(1)

#: text columns with longer values than this wrap (the others stay on one line and the table scrolls)
LONG_TEXT = 40
#: with ``fit=True``, the narrowest a column of long text gets (it wraps; the columns after it stay in view)
FIT_TEXT_MIN = "6em"


def format_interval(value, lo, hi, digits: int = 2, signed: bool = False) -> str:
    """``"value [lo, hi]"`` with ``digits`` decimals, never hiding which side of the interval a value is on.

    Where a value outside ``[lo, hi]`` would print as the interval's edge, more decimals are used
    (0.5256 against a band from 0.5302 prints "0.526 [0.530, 0.697]", not "0.53 [0.53, 0.70]"). A value
    that rounds to zero prints without a minus sign. With ``lo`` or ``hi`` missing (NaN) only the value
    is printed.

    Examples
    --------
    >>> format_interval(0.5256, 0.5302, 0.6972)
    '0.526 [0.530, 0.697]'
    >>> format_interval(0.0031, 0.0020, 0.0042, digits=4, signed=True)
    '+0.0031 [+0.0020, +0.0042]'
    """
    def one(x, d):
        t = f"{x:{'+' if signed else ''}.{d}f}"
        return t.replace("-", "+" if signed else "") if float(t) == 0 else t  # no "-0.00"

    if lo != lo or hi != hi:  # NaN: no interval
        return one(value, digits)
    while digits < 8 and ((value < lo and one(value, digits) == one(lo, digits))
                          or (value > hi and one(value, digits) == one(hi, digits))):
        digits += 1
    return f"{one(value, digits)} [{one(lo, digits)}, {one(hi, digits)}]"


def relative_path(path) -> str:
    """``path`` relative to the project root, for printing on a page.

    A path beside the project (e.g. ``../shared/moralchoice``) is shown relative to the project too; a
    path in the user's home directory (a cache) as ``~/...``; any other path outside them by its name
    only, so no page shows where the project sits on the machine. A URL (``hf://...``) is returned
    unchanged.

    Examples
    --------
    >>> from moralkit.paths import project_root
    >>> relative_path(project_root() / "figures" / "02_x.png")
    'figures/02_x.png'
    >>> relative_path(project_root().parent / "shared" / "moralchoice")
    '../shared/moralchoice'
    >>> relative_path("hf://datasets/ninoscherrer/moralchoice")
    'hf://datasets/ninoscherrer/moralchoice'
    >>> relative_path(Path.home() / ".cache" / "moralkit")
    '~/.cache/moralkit'
    """
    if isinstance(path, str) and "://" in path:
        return path
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    # compare both as written (a symlinked ../shared stays beside the project) and with links resolved
    for root, q in ((Path(os.path.abspath(project_root())), Path(os.path.abspath(p))),
                    (project_root().resolve(), p.resolve())):
        try:
            return q.relative_to(root).as_posix()
        except ValueError:
            pass
        if root.parent != root.parent.parent:  # the project's parent is not the file-system root
            try:
                return "../" + q.relative_to(root.parent).as_posix()
            except ValueError:
                pass
    try:
        return "~/" + Path(os.path.abspath(p)).relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):  # not under the home directory, or no home directory
        return p.name


class Saved(list):
    """The paths a :func:`save` call wrote (a list of ``Path``), shown relative to the project."""

    def __repr__(self) -> str:
        return "saved: " + ", ".join(relative_path(p) for p in self)

    def _repr_html_(self) -> str:
        return "<p class=\"mk-saved\">" + _html.escape(repr(self)) + "</p>"


def _is_figure(obj) -> bool:
    return hasattr(obj, "savefig") and hasattr(obj, "axes")


def _is_table(obj) -> bool:
    import pandas as pd

    return isinstance(obj, (pd.DataFrame, pd.Series))


def _as_table(obj):
    """A result object's table (its ``to_frame()``, statsmodels-style), else ``obj`` itself."""
    if not _is_table(obj) and callable(getattr(type(obj), "to_frame", None)):
        return obj.to_frame()
    return obj


def _check_stem(stem: str) -> str:
    if not isinstance(stem, str) or not stem or os.sep in stem or "/" in stem or stem.startswith("."):
        raise MoralkitError(f"stem must be a file name without folder or extension, like '04_fig3_similarity'; "
                         f"got {stem!r}")
    return stem


def _write_index(df) -> bool:
    """Write the index unless it is pandas' default 0..n-1 range (which adds only a nameless column)."""
    import pandas as pd

    idx = df.index
    return not (isinstance(idx, pd.RangeIndex) and idx.name is None and idx.start == 0 and idx.step == 1)


#: the resolution of saved PNGs (dots per inch)
PNG_DPI = 150
#: the names of the matplotlib backend that Jupyter kernels use to put figures on the page
_INLINE_BACKENDS = ("module://matplotlib_inline.backend_inline", "inline", "module://ipykernel.pylab.backend_inline")


def _page_shows_figures() -> bool:
    """True in a Jupyter kernel whose matplotlib backend is the inline one (figures reach the page as PNG)."""
    import sys

    import matplotlib

    if "ipykernel" not in sys.modules:
        return False
    try:  # never resolve the backend here (that would import pyplot and pick a GUI backend)
        backend = matplotlib.get_backend(auto_select=False)
    except TypeError:  # matplotlib < 3.10
        backend = matplotlib.rcParams._get_backend_or_none()
    return backend in _INLINE_BACKENDS


def _png_width(png: bytes) -> int:
    """The width in pixels of a PNG, from its header (the IHDR chunk comes first)."""
    return int.from_bytes(png[16:20], "big")


def _show_saved_png(fig, png_path: Path) -> None:
    """Put the saved PNG on the page at the size the inline backend gives the figure, and close the figure.

    The inline backend would otherwise draw the figure once more at the end of the cell (or at
    ``plt.show()``), at ``fig.dpi`` with its own tight bounding box: two more passes over every artist,
    for an image the PNG already holds. The page shows the PNG at ``fig.dpi / PNG_DPI`` of its pixel
    width, the size in CSS pixels of the inline image (to within the few points by which a tight box
    differs between resolutions), and sharper on high-density screens.
    """
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    png = png_path.read_bytes()
    display(Image(data=png, format="png", width=round(_png_width(png) * fig.dpi / PNG_DPI)))
    plt.close(fig)



def _tight_box(fig, dpi: float):
    """The box, in inches and padded, that ``fig.savefig(..., dpi=dpi, bbox_inches="tight")`` crops to.

    Measured once, without the layout draw ``savefig`` makes first: ``Figure.get_tightbbox`` lays out
    what it measures itself (ticks, titles, legends, annotations), and a layout engine (constrained or
    tight layout), which a draw would run, is run here. Text is measured with an Agg renderer at
    ``dpi``, the renderer the PNG is drawn with, so the box is the one ``savefig`` finds for the PNG
    (a test compares the two on figures of every kind the notebooks draw).
    """
    import matplotlib
    from matplotlib.backends.backend_agg import RendererAgg

    dpi0 = fig.dpi
    fig._set_dpi(dpi, forward=False)  # as savefig does; forward=False leaves a GUI window alone
    try:
        w, h = fig.get_size_inches() * dpi
        renderer = RendererAgg(max(1, int(w)), max(1, int(h)), dpi)
        engine = fig.get_layout_engine()
        if engine is not None and fig.axes:
            for ax in fig.axes:  # what a draw does before it runs the layout engine
                locator = ax.get_axes_locator()
                ax.apply_aspect(locator(ax, renderer) if locator else None)
            try:
                engine.execute(fig)
            except ValueError:  # as Figure.draw: a layout that cannot be made is skipped
                pass
        pad = matplotlib.rcParams["savefig.pad_inches"]
        return fig.get_tightbbox(renderer).padded(pad)
    finally:
        fig._set_dpi(dpi0, forward=False)


def _save_figure(fig, png: Path, svg: Path, stem: str) -> None:
    """Write ``fig`` as ``png`` (at :data:`PNG_DPI`) and ``svg``, both cropped to one tight box.

    ``savefig(bbox_inches="tight")`` draws a figure twice per file: once, with drawing switched off,
    to lay it out and measure its tight box, and once to write it. Here the box is measured once, at
    the PNG's resolution (:func:`_tight_box`), and both files are written with it: two draws instead
    of four. The PNG is the one ``bbox_inches="tight"`` gives, pixel for pixel; the SVG shows the
    same figure, with margins that can differ from its own tight box by a point or two (text is
    measured with hinting in the PNG and without in the SVG). A layout engine has run once, at the
    PNG's resolution, and is switched off while the files are written (as ``savefig`` does).

    Titles stay where measuring the box put them: matplotlib otherwise places each title again in
    every draw, measuring every tick label of the y axis (and of an x axis with ticks on top) to do
    so, a fifth of the cost of a save. At the PNG's resolution the place is the same; in the SVG a
    title above ticks on top keeps the PNG's place.
    """
    import matplotlib

    box = _tight_box(fig, PNG_DPI)
    # no engine while writing: savefig would lay the figure out again with one (also with the inert
    # engine that a call to fig.tight_layout() leaves behind), in a draw of its own
    engine = fig.get_layout_engine()
    if engine is not None:
        with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
            fig.set_layout_engine(None)  # (these settings would install an engine in its place)
    # Axes._autotitlepos: None or True, matplotlib places the titles in each draw; False, never
    # (as after ax.set_title(..., y=...)); a matplotlib without it is left alone
    placed = [(ax, ax._autotitlepos) for ax in fig.axes if getattr(ax, "_autotitlepos", False) is not False]
    for ax, _ in placed:
        ax._autotitlepos = False
    try:
        fig.savefig(png, dpi=PNG_DPI, bbox_inches=box)
        # a fixed date and a fixed salt for the ids of clip paths (random otherwise) keep the SVG
        # byte-identical between runs
        with matplotlib.rc_context({"svg.hashsalt": stem}):
            fig.savefig(svg, bbox_inches=box, metadata={"Date": None})
    finally:
        for ax, auto in placed:
            ax._autotitlepos = auto
        if engine is not None:
            fig.set_layout_engine(engine)


def save(obj, stem: str, directory=None, *, index: bool | None = None, show: bool | None = None) -> Saved:
    """Save a figure (PNG at 150 dpi and SVG) or a table (CSV) under ``stem``.

    In a notebook (a Jupyter kernel with matplotlib's inline backend) a figure is also put on the page,
    as the PNG just written, and closed: the page and ``figures/`` show the same image, and the figure
    is not drawn a third time by the inline backend (a ``plt.show()`` after ``save`` then shows
    nothing more). Pass ``show=False`` to keep the figure open and off the page.

    Parameters
    ----------
    obj : matplotlib.figure.Figure or pandas.DataFrame or pandas.Series
        What to save. A figure goes to :func:`moralkit.paths.figures_dir`, a table to
        :func:`moralkit.paths.tables_dir`.
    stem : str
        File name without extension; notebooks prefix it with their number (``"02_table1"``).
    directory : path-like, optional
        Save there instead of the default folder.
    index : bool, optional
        Tables only: write the index column. Default: yes, unless it is the default range index.
    show : bool, optional
        Figures only: show the saved PNG on the page and close the figure. Default: yes in a Jupyter
        kernel with the inline backend, no elsewhere (a script, a GUI backend, the tests).

    Returns
    -------
    Saved
        The paths written (a list of ``Path`` that prints relative to the project).

    Raises
    ------
    moralkit.errors.MoralkitTypeError
        When ``obj`` is neither a matplotlib figure nor a pandas table (also a ``TypeError``).

    Notes
    -----
    Both files are cropped to one tight bounding box, measured once at the PNG's resolution; the
    figure is drawn once per file (two draws, none for the page). The PNG is pixel for pixel the one
    ``savefig(..., bbox_inches="tight")`` writes; the SVG's margins can differ from its own tight box
    by a point or two, since text is measured with hinting in the PNG and without in the SVG. A
    figure with a layout engine (``layout="constrained"``) is laid out once, at the PNG's resolution,
    for both files. See :func:`_save_figure`.
    """
    stem = _check_stem(stem)
    if _is_figure(obj):
        d = Path(directory) if directory is not None else figures_dir()
        d.mkdir(parents=True, exist_ok=True)
        out = Saved([d / f"{stem}.png", d / f"{stem}.svg"])
        _save_figure(obj, out[0], out[1], stem)
        if show is None:
            show = _page_shows_figures()
        if show:
            _show_saved_png(obj, out[0])
        return out
    if _is_table(obj):
        d = Path(directory) if directory is not None else tables_dir()
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"{stem}.csv"
        obj.to_csv(p, index=_write_index(obj) if index is None else index)
        return Saved([p])
    raise MoralkitTypeError(f"save() takes a matplotlib Figure or a pandas DataFrame/Series, got "
                            f"{type(obj).__name__}; for a list of axes pass axes[0].figure")


def table_html(df, *, caption: str | None = None, name: str | None = None, max_height: str = "28em",
               float_format=None, fit: bool = False) -> str:
    """``df`` as an HTML ``<table>``, every row and column, inside a box that scrolls when needed.

    The box scrolls sideways for wide tables and, above :data:`LONG_TABLE_ROWS` rows, has a fixed
    height and scrolls down. The style is inline, so the table looks the same in JupyterLab and in
    the published book. ``name`` (the table's file stem) is kept in a ``data-mk-table`` attribute, so
    that a test can check that every table a notebook saved is on its page. ``fit=True`` lays a table
    of prose (findings, legends) out at the page's width instead, every cell wrapping.
    """
    import pandas as pd

    if isinstance(df, pd.Series):
        df = df.to_frame()
    tid = f"mk-table-{os.getpid()}-{next(_TABLE_IDS)}"  # unique on a page (one kernel writes it)
    if callable(float_format):  # a value that rounds to zero is shown as 0.000, never -0.000
        float_format = _unsigned_zero(float_format)
    body = df.to_html(max_rows=None, max_cols=None, border=0, classes=["mk-table"], float_format=float_format,
                      na_rep="", escape=True, sparsify=False, table_id=tid)
    # one line per cell, so that a wide table scrolls instead of squeezing its columns; columns of long
    # text (a scenario, a command) wrap at a readable width
    nidx = df.index.nlevels
    rules = [f"#{tid}{{width:max-content;max-width:none}}", f"#{tid} th,#{tid} td{{white-space:nowrap}}"]
    if fit:  # the page's width; long text wraps in whatever room the short columns leave
        rules = [f"#{tid}{{width:100%;max-width:100%}}",
                 f"#{tid} th,#{tid} td{{white-space:nowrap;vertical-align:top}}",
                 f"#{tid} thead th{{white-space:normal}}"]  # headers wrap at their spaces
        levels = [df.index.get_level_values(k).astype(str) for k in range(nidx)]
        if len(df) and any(lv.str.len().max() > LONG_TEXT for lv in levels):
            rules.append(f"#{tid} tbody th{{white-space:normal;min-width:12em}}")
    for j, c in enumerate(df.columns):
        col = df[c]
        text = col.dtype == object or pd.api.types.is_string_dtype(col.dtype)
        # only text with spaces can wrap (a long identifier stays on its line, whatever its length)
        if fit and text and len(col) and col.astype(str).str.len().max() > LONG_TEXT // 2:
            # at the page's width a long identifier (a full respondent id) breaks too, rather than push the
            # columns after it out of view
            rules.append(f"#{tid} tbody td:nth-child({nidx + j + 1}){{white-space:normal;overflow-wrap:anywhere;"
                         f"min-width:{FIT_TEXT_MIN}}}")
        elif text and len(col) and col.astype(str).str.len().max() > LONG_TEXT and col.astype(str).str.contains(" ").any():
            rules.append(f"#{tid} tbody td:nth-child({nidx + j + 1}){{white-space:normal;"
                         + (f"min-width:{FIT_TEXT_MIN};overflow-wrap:break-word}}" if fit
                            else "min-width:22em;max-width:36em}"))
        elif fit and text and len(col) and col.astype(str).str.contains(" ").any():
            # short text (an interval "0.52 [0.36, 0.74]") may break at its spaces when the columns need the
            # room; the browser keeps it on one line while the table fits
            rules.append(f"#{tid} tbody td:nth-child({nidx + j + 1}){{white-space:normal}}")
    long = len(df) > LONG_TABLE_ROWS
    style = "overflow:auto;max-width:100%;" + (f"max-height:{max_height};" if long else "")
    cls = "mk-table-scroll" + (" mk-table-long" if long else "")
    cap = (f'<p class="mk-table-caption">{_html.escape(caption)}</p>') if caption else ""
    data = f' data-mk-table="{_html.escape(name, quote=True)}"' if name else ""
    return f'{cap}<style>{"".join(rules)}</style><div class="{cls}"{data} style="{style}">{body}</div>'


def _unsigned_zero(fmt):
    """``fmt`` with a leading minus dropped where the formatted value is zero (``-0.000`` → ``0.000``).

    >>> _unsigned_zero("{:.3f}".format)(-1e-17), _unsigned_zero("{:.3f}".format)(-0.25)
    ('0.000', '-0.250')
    """
    def formatted(x):
        s = fmt(x)
        return s[1:] if isinstance(s, str) and s.startswith("-") and not any(ch in s for ch in "123456789") else s

    return formatted


def show(df, stem: str | None = None, *, full=None, caption: str | None = None, directory=None,
         index: bool | None = None, float_format=None, fit: bool = False, view=None) -> None:
    """Display a table as HTML on the page (every row, scrollable when long) and save it as CSV.

    Parameters
    ----------
    df : pandas.DataFrame or pandas.Series, or a result object with ``to_frame()``
        The table shown (a result object shows its ``to_frame()``).
    stem : str, optional
        Save the table as ``<tables>/<stem>.csv`` first (see :func:`save`); ``None``: only display.
    full : pandas.DataFrame or a result object with ``to_frame()``, optional
        Save this table under ``stem`` instead of ``df``: the page shows a view of it (a few
        columns, a pivot), the CSV holds all of it. The view is marked as ``stem`` on the page.
    caption : str, optional
        A line of text shown above the table.
    directory, index
        As for :func:`save`.
    float_format : callable, optional
        Formats floats on the page only (e.g. ``"{:.3f}".format``); the CSV keeps full precision.
    fit : bool, default False
        Lay the table out at the page's width with wrapping cells (see :func:`table_html`).
    view : callable, optional
        A function of the table that gives what the page shows (e.g. :func:`moralkit.respondents.shorten`,
        short respondent labels); the CSV holds the table itself (as with ``full``).

    Returns
    -------
    None
        So that a ``show(...)`` at the end of a cell prints nothing more.

    Raises
    ------
    moralkit.errors.MoralkitTypeError
        When ``df`` or ``full`` is not a pandas table (also a ``TypeError``).
    """
    from IPython.display import HTML, display

    df = _as_table(df)
    full = None if full is None else _as_table(full)
    if not _is_table(df) or (full is not None and not _is_table(full)):
        raise MoralkitTypeError(f"show() takes pandas DataFrames or Series, got {type(df).__name__}"
                                + ("" if full is None else f" and full={type(full).__name__}"))
    if view is not None:
        full, df = (df if full is None else full), view(df)
    if full is not None and stem is None:
        raise MoralkitError("show(view, full=table) needs the stem to save the full table under")
    if stem is not None:
        save(df if full is None else full, stem, directory, index=index)
    display(HTML(table_html(df, caption=caption, name=stem, float_format=float_format, fit=fit)))


def download_link(df, stem: str, *, index: bool | None = None, text: str | None = None) -> str:
    """An HTML link that downloads ``df`` as ``<stem>.csv`` (the bytes :func:`save` writes, in a ``data:`` URI).

    The page carries the CSV itself, so the link works offline and from disk, with no server and no
    path to the tables folder.

    Examples
    --------
    >>> import pandas as pd
    >>> html = download_link(pd.DataFrame({"x": [1, 2]}), "05_demo")
    >>> 'download="05_demo.csv"' in html and html.startswith("<a ")
    True
    """
    import base64

    use_index = _write_index(df) if index is None else index
    data = base64.b64encode(df.to_csv(index=use_index).encode("utf-8")).decode("ascii")
    label = _html.escape(text or f"download {stem}.csv ({len(df)} rows)")
    return (f'<a class="mk-download" download="{_html.escape(stem, quote=True)}.csv" '
            f'href="data:text/csv;charset=utf-8;base64,{data}">{label}</a>')


def show_head(df, stem: str, n: int = 10, *, view=None, caption: str | None = None, directory=None,
              index: bool | None = None, float_format=None, fit: bool = False) -> None:
    """Save a long table as CSV, show its first ``n`` rows on the page and a link that downloads all of it.

    For per-scenario tables: the page stays short, the CSV (in ``<tables>/`` and behind the link) holds
    every row. Sort ``df`` first so that the rows worth reading come first. ``view``, a function of the
    first rows, gives what is shown (e.g. fewer columns, short labels); the CSV and the link hold ``df``.

    Raises
    ------
    moralkit.errors.MoralkitTypeError
        When ``df`` is not a pandas table (also a ``TypeError``).
    """
    from IPython.display import HTML, display

    if not _is_table(df):
        raise MoralkitTypeError(f"show_head() takes a pandas DataFrame or Series, got {type(df).__name__}")
    save(df, stem, directory, index=index)
    head = df.head(n) if view is None else view(df.head(n))
    note = f"the first {len(head)} of {len(df)} rows"
    display(HTML(table_html(head, caption=f"{caption} ({note})" if caption else note, name=stem,
                            float_format=float_format, fit=fit)
                 + f'<p class="mk-table-caption">{download_link(df, stem, index=index)}</p>'))
