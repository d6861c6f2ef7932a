"""``findings``: what the committed runs show, as Markdown (:mod:`moralkit.studies.findings`)."""

from __future__ import annotations

__all__ = ["register_findings", "cmd_findings"]


def register_findings(sub) -> None:
    """Add ``findings`` to the subparsers ``sub``."""
    f = sub.add_parser("findings", help="what the committed runs in data/ show, as Markdown (the README's section "
                                        "'What the committed runs show')", allow_abbrev=False)
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(func=cmd_findings)


def cmd_findings(a):
    from moralkit.studies.findings import findings_markdown

    print(findings_markdown(seed=a.seed), end="")

