"""Benchmark: CPU of ``moralkit.figures.save`` against the two ``savefig(bbox_inches="tight")`` calls it replaced.

The figures are the package's own, drawn from published numbers (no notebook run needed): Figure 3
(``networks.plot_similarity``, a constrained layout with a heatmap and its cell labels) and Figure 4
(``networks.plot_networks``, seven panels after ``fig.tight_layout``) of Seror (2025), Table 3. Each
figure is saved both ways in turns (old, new, old, new, ...) on fresh copies, and the minimum CPU
seconds of each are compared, so both see the same load. Also reported: the figure draws per save
and whether the two PNGs are pixel-identical.

Usage::

    nice .venv/bin/python benchmarks/bench_figure_save.py [--repeat 5]

One line ``BENCH {json}`` per figure (benchmarks/_record.py): ``cpu_s_savefig``, ``cpu_s_save``,
``ratio``, ``draws_savefig``, ``draws_save``, ``png_identical``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _record import emit, load  # noqa: E402


def _savefig_twice(fig, d: Path, stem: str) -> None:
    """What save() did before: each file laid out and cropped by savefig itself."""
    import matplotlib

    for ext in ("png", "svg"):
        with matplotlib.rc_context({"svg.hashsalt": stem}):
            fig.savefig(d / f"{stem}.{ext}", dpi=150 if ext == "png" else None, bbox_inches="tight",
                        metadata={"Date": None} if ext == "svg" else {})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5, help="turns per way of saving (the minimum is reported)")
    a = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    from PIL import Image, ImageChops

    from moralkit import figures
    from moralkit.psm import networks as nw
    from moralkit.psm import reference

    pub3 = reference.published_table3()
    makers = {"fig3_similarity": lambda: nw.plot_similarity(pub3, title="published (Seror 2025, Table 3)"),
              "fig4_networks": lambda: nw.plot_networks(pub3, title="published (Seror 2025, Table 3)")}
    draws, draw = [], Figure.draw

    def counted(self, renderer, *args, **kw):
        draws.append(1)
        return draw(self, renderer, *args, **kw)

    Figure.draw = counted
    ways = {"savefig": _savefig_twice, "save": lambda fig, d, stem: figures.save(fig, stem, d, show=False)}
    with tempfile.TemporaryDirectory(prefix="figsave-") as tmp:
        warm = makers["fig3_similarity"]()
        for name, way in ways.items():  # fonts and mathtext parsed once before timing
            way(warm, Path(tmp), "warm")
        plt.close(warm)
        for key, make in makers.items():
            t0 = load()
            cpu = {k: [] for k in ways}
            n = {}
            for _ in range(max(1, a.repeat)):
                for name, way in ways.items():
                    d = Path(tmp) / name
                    d.mkdir(exist_ok=True)
                    fig = make()
                    draws.clear()
                    c = time.process_time()
                    way(fig, d, key)
                    cpu[name].append(time.process_time() - c)
                    n[name] = len(draws)
                    plt.close(fig)
            pngs = [Image.open(Path(tmp) / k / f"{key}.png").convert("RGBA") for k in ways]
            same = pngs[0].size == pngs[1].size and ImageChops.difference(*pngs).getbbox() is None
            best = {k: min(v) for k, v in cpu.items()}
            emit("figure_save", key, t0, cpu_s_savefig=round(best["savefig"], 3), cpu_s_save=round(best["save"], 3),
                 ratio=round(best["save"] / best["savefig"], 3), draws_savefig=n["savefig"], draws_save=n["save"],
                 png_identical=bool(same), repeat=max(1, a.repeat))
    Figure.draw = draw
    return 0


if __name__ == "__main__":
    sys.exit(main())
