"""moralkit.figures: the one saving helper for figures and tables, and HTML tables on the page."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from moralkit import figures
from moralkit.paths import project_root


def test_save_writes_png_and_svg_and_prints_relative_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("MORALKIT_FIGURES_DIR", str(project_root() / "figures" / "_test_tmp"))
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    try:
        saved = figures.save(fig, "09_line")
        assert [p.name for p in saved] == ["09_line.png", "09_line.svg"]
        assert all(p.stat().st_size > 500 for p in saved)
        assert repr(saved) == "saved: figures/_test_tmp/09_line.png, figures/_test_tmp/09_line.svg"
        assert str(project_root()) not in repr(saved) and str(project_root()) not in saved._repr_html_()
    finally:
        for p in (project_root() / "figures" / "_test_tmp").glob("*"):
            p.unlink()
        (project_root() / "figures" / "_test_tmp").rmdir()
        plt.close(fig)


def test_save_table_index_only_when_meaningful(tmp_path):
    df = pd.DataFrame({"model": ["a", "b"], "alpha": [0.5, 0.01]})
    (p,) = figures.save(df, "02_t", tmp_path)
    assert p.read_text().splitlines()[0] == "model,alpha"
    (p,) = figures.save(df.set_index("model"), "02_t", tmp_path)
    assert p.read_text().splitlines()[1] == "a,0.5"
    (p,) = figures.save(df, "02_t", tmp_path, index=True)
    assert p.read_text().splitlines()[1] == "0,a,0.5"


def test_save_rejects_other_objects_and_bad_stems(tmp_path):
    with pytest.raises(TypeError, match="matplotlib Figure or a pandas"):
        figures.save([1, 2], "02_x", tmp_path)
    with pytest.raises(ValueError, match="stem must be a file name"):
        figures.save(pd.DataFrame({"a": [1]}), "sub/02_x", tmp_path)


def test_wrong_types_raise_the_moralkit_type_error(tmp_path):
    """save, show and show_head refuse a non-table with MoralkitTypeError: a MoralkitError (the command line's
    one-line errors) and still a TypeError (``except TypeError`` keeps working)."""
    from moralkit.errors import MoralkitError, MoralkitTypeError

    assert issubclass(MoralkitTypeError, MoralkitError) and issubclass(MoralkitTypeError, TypeError)
    calls = [(figures.save, ([1, 2], "02_x", tmp_path), "save"),
             (figures.show, ("not a table", "05_x"), "show"),
             (figures.show, (pd.DataFrame({"a": [1]}), "05_x"), "show"),  # with full= not a table, below
             (figures.show_head, ({"a": [1]}, "05_x"), "show_head")]
    for i, (f, args, name) in enumerate(calls):
        kw = {"full": [1]} if i == 2 else {}
        with pytest.raises(MoralkitTypeError, match=rf"^{name}\(\) takes"):
            f(*args, directory=tmp_path, **kw) if f is not figures.save else f(*args, **kw)
    assert not list(tmp_path.iterdir())  # nothing was written


def test_relative_path_hides_machine_paths():
    assert figures.relative_path(project_root() / "data" / "psm") == "data/psm"
    assert figures.relative_path("/opt/elsewhere/x.csv") == "x.csv"
    assert figures.relative_path("data/psm") == "data/psm"


def test_table_html_shows_every_row_and_scrolls_when_long():
    short = figures.table_html(pd.DataFrame({"model": ["m<1>", "b"], "alpha": [0.5, 0.25]}), caption="Table 1")
    assert "<table" in short and "m&lt;1&gt;" in short and "Table 1" in short
    assert "max-height" not in short and "overflow:auto" in short  # wide tables scroll sideways
    long = figures.table_html(pd.DataFrame({"x": range(62)}))
    assert "max-height" in long and "mk-table-long" in long
    assert long.count("</tr>") == 63 and "..." not in long  # header + 62 rows, nothing elided
    wide = figures.table_html(pd.DataFrame([list(range(40))]))
    assert wide.count("<th>") == 42  # the index header, 40 columns, one row label


def test_show_displays_html_and_saves(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    out = figures.show(pd.Series([1, 2], name="n"), "05_s", directory=tmp_path, caption="c")
    assert out is None and (tmp_path / "05_s.csv").exists()
    assert "<table" in shown[0].data and "c</p>" in shown[0].data
    with pytest.raises(TypeError):
        figures.show("not a table")


def test_table_html_keeps_cells_on_one_line_and_wraps_long_text():
    df = pd.DataFrame({"model": ["m1", "m2"], "context": ["a long scenario " * 5, "short"]}).set_index("model")
    html = figures.table_html(df)
    tid = html.split('id="', 1)[1].split('"', 1)[0]
    assert f"#{tid}{{width:max-content" in html and "white-space:nowrap" in html
    assert f"#{tid} tbody td:nth-child(2){{white-space:normal" in html  # the index cell is child 1
    assert figures.table_html(df) != html  # every table gets its own id on a page


def test_fit_lets_short_text_break_at_its_spaces_and_caps_long_text_columns():
    """At the page's width (fit) an interval cell may wrap, so that six of them side by side stay in view."""
    df = pd.DataFrame({"model": ["m1"], "r_p": ["0.52 [0.36,\u00a00.74]"], "id": ["x_1"],
                       "context": ["a long scenario " * 5]}).set_index("model")
    fit, wide = figures.table_html(df, fit=True), figures.table_html(df)
    tid = fit.split('id="', 1)[1].split('"', 1)[0]
    assert f"#{tid} tbody td:nth-child(2){{white-space:normal}}" in fit  # the interval may wrap
    assert "td:nth-child(3)" not in fit  # an identifier without spaces stays on its line
    assert f"#{tid} tbody td:nth-child(4){{white-space:normal;overflow-wrap:anywhere;min-width:6em}}" in fit
    assert "td:nth-child(2)" not in wide  # without fit the table scrolls and the interval keeps its line


def test_show_a_view_and_save_the_full_table(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    full = pd.DataFrame({"model": ["a", "b"], "alpha": [0.5, 0.01], "n_obs": [160, 150]})
    figures.show(full[["model", "alpha"]], "02_table1", full=full, directory=tmp_path)
    assert (tmp_path / "02_table1.csv").read_text().splitlines()[0] == "model,alpha,n_obs"
    assert 'data-mk-table="02_table1"' in shown[0].data and "n_obs" not in shown[0].data
    with pytest.raises(ValueError, match="needs the stem"):
        figures.show(full, full=full)


def test_intervals_never_print_minus_zero():
    assert figures.format_interval(-0.00001, -0.00004, 0.0003, digits=4, signed=True) == "+0.0000 [+0.0000, +0.0003]"
    assert figures.format_interval(-0.001, -0.004, 0.3) == "0.00 [0.00, 0.30]"
    assert figures.format_interval(-0.2, -0.31, -0.1) == "-0.20 [-0.31, -0.10]"


def test_a_value_outside_its_interval_never_prints_as_the_interval_edge():
    assert figures.format_interval(0.5256, 0.5302, 0.6972) == "0.526 [0.530, 0.697]"  # below
    assert figures.format_interval(0.05798, 0.045, 0.05781, digits=3) == "0.0580 [0.0450, 0.0578]"  # above
    assert figures.format_interval(0.5302, 0.5256, 0.6972) == "0.53 [0.53, 0.70]"  # inside: the usual digits
    assert figures.format_interval(0.51, 0.46, 0.66) == "0.51 [0.46, 0.66]"
    assert figures.format_interval(0.51, float("nan"), float("nan")) == "0.51"  # no interval


def test_show_takes_a_result_object_by_its_to_frame(tmp_path, monkeypatch):
    """A result object (statsmodels-style ``to_frame()``) is shown and saved as its table."""
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))

    class Result:
        def to_frame(self):
            return pd.DataFrame({"model": ["a"], "alpha": [0.5]})

    figures.show(Result(), "02_r", directory=tmp_path)
    figures.show(Result().to_frame()[["model"]], "02_v", full=Result(), directory=tmp_path)
    assert (tmp_path / "02_r.csv").read_text() == "model,alpha\na,0.5\n"
    assert (tmp_path / "02_v.csv").read_text() == "model,alpha\na,0.5\n"
    assert "<table" in shown[0].data and 'data-mk-table="02_v"' in shown[1].data


def test_a_saved_svg_is_byte_identical_between_runs(tmp_path):
    """Clip paths get ids from a salt (the stem) rather than at random, and the date is left out."""
    out = []
    for k in range(2):
        fig, ax = plt.subplots()
        ax.bar([0, 1], [1, 2])  # bars are clipped to the axes: the SVG holds clip-path ids
        try:
            out.append((figures.save(fig, "09_bars", tmp_path / str(k))[1]).read_bytes())
        finally:
            plt.close(fig)
    assert b"clip-path" in out[0] and out[0] == out[1]


def _count_draws(monkeypatch) -> list:
    """Patch ``Figure.draw`` to record every full pass over a figure's artists (the costly part of a save)."""
    from matplotlib.figure import Figure

    draws, draw = [], Figure.draw

    def counted(self, renderer, *a, **k):
        draws.append(type(renderer).__name__)
        return draw(self, renderer, *a, **k)

    monkeypatch.setattr(Figure, "draw", counted)
    return draws


def test_in_a_notebook_save_shows_the_saved_png_and_draws_each_figure_twice(tmp_path, monkeypatch):
    """On the inline backend, save() puts the PNG it wrote on the page at the inline size and closes the figure.

    Two draws: one write for each of the PNG and the SVG (the tight box is measured once, without a
    layout pass; ``savefig(bbox_inches="tight")`` drew each file twice). The inline backend used to
    draw every figure twice more at the end of its cell (or at ``plt.show()``), for an image the PNG
    already holds; it has nothing left to draw.
    """
    import sys
    import types

    monkeypatch.setitem(sys.modules, "ipykernel", sys.modules.get("ipykernel") or types.ModuleType("ipykernel"))
    monkeypatch.setattr(matplotlib, "get_backend",
                        lambda auto_select=True: "module://matplotlib_inline.backend_inline")
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    draws = _count_draws(monkeypatch)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1], [1, 0])
    ax.set_title("a title")
    try:
        saved = figures.save(fig, "09_page", tmp_path)
        assert len(draws) == 2, f"save() drew the figure {len(draws)} times ({draws}); 1 for the PNG, 1 for the SVG"
        assert not plt.fignum_exists(fig.number), "the figure stays open, so the inline backend draws it again"
        plt.show()  # what the notebooks call after save(): nothing left to draw
        assert len(draws) == 2
        (img,) = shown
        png = saved[0].read_bytes()
        assert img.data == png  # the page shows the file in figures/
        assert img.width == round(figures._png_width(png) * fig.dpi / figures.PNG_DPI)
        assert abs(img.width - 4 * fig.dpi) < 0.15 * 4 * fig.dpi  # about the figure's width at fig.dpi, as inline
    finally:
        plt.close(fig)


def test_outside_a_notebook_save_neither_shows_nor_closes_the_figure(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [1, 0])
    try:
        figures.save(fig, "09_script", tmp_path)
        assert not figures._page_shows_figures()  # pytest: no kernel, the Agg backend
        assert shown == [] and plt.fignum_exists(fig.number)
        figures.save(fig, "09_asked", tmp_path, show=True)
        assert len(shown) == 1 and not plt.fignum_exists(fig.number)
    finally:
        plt.close(fig)


def _figures_of_every_kind():
    """Small figures with what the notebooks' figures hold: a suptitle, mathtext, a legend placed at
    ``loc="best"``, an annotation, a heatmap with a colorbar and text in its cells, ticks on top,
    ``fig.tight_layout()`` (with a rect) and a constrained layout."""
    import numpy as np

    figs = []
    fig, (a, b) = plt.subplots(1, 2, figsize=(5, 2.5))
    a.plot([0, 1, 2], [1, 0, 3], label="$\\alpha_{HM}$ line")
    a.plot([0, 1, 2], [2, 2, 1], label="other")
    a.legend(loc="best")
    a.annotate("a point", (1, 0), xytext=(1.5, 2.5), arrowprops={"arrowstyle": "->"})
    a.set_title("Title $G_{m,w}$")
    a.set_ylabel("a long label on y")
    b.bar(["x", "y"], [3e6, 1e6])  # an offset text ("1e6") on the y axis
    b.set_title("bars")
    fig.suptitle("Suptitle")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    figs.append(fig)

    fig, ax = plt.subplots(figsize=(3, 2.5), layout="constrained")
    m = np.arange(9.0).reshape(3, 3) / 8
    im = ax.imshow(m, cmap="Blues", vmin=0, vmax=1)
    for (i, j), v in np.ndenumerate(m):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(3), ["first row", "second", "third"])
    fig.colorbar(im, ax=ax, label="$G$")
    ax.set_title("heatmap")
    figs.append(fig)
    return figs


def test_the_saved_png_is_pixel_for_pixel_what_savefig_tight_writes(tmp_path):
    """One box measured without a layout draw, shared by both files: the PNG does not change."""
    import io

    from PIL import Image, ImageChops

    # two copies of each figure: matplotlib's constrained layout does not always settle where it was
    # after a second pass (with ticks on top and a title), so each way of saving gets a fresh figure
    for k, (fig0, fig) in enumerate(zip(_figures_of_every_kind(), _figures_of_every_kind())):
        try:
            buf = io.BytesIO()
            fig0.savefig(buf, format="png", dpi=figures.PNG_DPI, bbox_inches="tight")
            engine = type(fig.get_layout_engine())
            png, svg = figures.save(fig, f"09_kind{k}", tmp_path)
            ref, got = Image.open(buf).convert("RGBA"), Image.open(png).convert("RGBA")
            assert ref.size == got.size, (k, ref.size, got.size)
            assert ImageChops.difference(ref, got).getbbox() is None, f"figure {k}: the PNG changed"
            assert type(fig.get_layout_engine()) is engine  # the figure keeps its layout engine
            assert fig.dpi == 100
            # and matplotlib places its titles again in later draws (save() holds them still while writing)
            assert all(getattr(ax, "_autotitlepos", True) is not False for ax in fig.axes if ax.get_title())
        finally:
            plt.close(fig0)
            plt.close(fig)


def test_the_svg_keeps_a_margin_on_every_side(tmp_path, monkeypatch):
    """The box is measured at the PNG's resolution; the SVG's own tight box (text unhinted) lies within it,
    no more than a couple of points from the usual padding."""
    import io
    import re

    from matplotlib.backends.backend_svg import RendererSVG

    pad = matplotlib.rcParams["savefig.pad_inches"] * 72
    boxes, tight_box = [], figures._tight_box
    monkeypatch.setattr(figures, "_tight_box", lambda *a: boxes.append(tight_box(*a)) or boxes[-1])
    for k, fig in enumerate(_figures_of_every_kind()):
        try:
            svg = figures.save(fig, f"09_kind{k}", tmp_path)[1].read_text()
            box = boxes[-1]
            w, h = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
            assert abs(w - box.width * 72) < 1e-3 and abs(h - box.height * 72) < 1e-3
            fig.set_layout_engine(None)  # laid out by save(), as in the SVG
            fig.set_dpi(72)  # the SVG's resolution
            own = fig.get_tightbbox(RendererSVG(w, h, io.StringIO(), None, 72))
            margins = [(own.x0 - box.x0) * 72, (own.y0 - box.y0) * 72, (box.x1 - own.x1) * 72,
                       (box.y1 - own.y1) * 72]
            assert all(pad - 3 < m < pad + 3 for m in margins), (k, margins)
        finally:
            plt.close(fig)


def test_saving_a_figure_twice_writes_the_same_files(tmp_path):
    """Measuring the box leaves nothing behind that moves the next save (dpi, layout engine, title places).

    (On the figure with a tight layout; a constrained layout can move on a second pass in matplotlib
    itself, as two calls of ``savefig`` show.)"""
    fig, other = _figures_of_every_kind()
    plt.close(other)
    try:
        a = figures.save(fig, "09_twice", tmp_path / "a")
        b = figures.save(fig, "09_twice", tmp_path / "b")
        assert [p.read_bytes() for p in a] == [p.read_bytes() for p in b]
    finally:
        plt.close(fig)
