"""The commands on run directories and the response cache: ``export``, ``repair``, ``models``, ``runs``, ``cache``."""

from __future__ import annotations

from .options import new_file

__all__ = ["register_export", "register_repair", "register_models", "register_runs", "register_cache",
           "cmd_export", "cmd_repair", "cmd_models", "cmd_runs", "cmd_cache"]


def register_export(sub) -> None:
    """Add ``export`` (the tidy .csv.gz of run directories) to the subparsers ``sub``."""
    e = sub.add_parser("export", help="write the tidy .csv.gz of one or more run directories", allow_abbrev=False)
    e.add_argument("run_dirs", nargs="+")
    e.add_argument("--out", type=new_file, required=True)
    e.set_defaults(func=cmd_export)


def register_repair(sub) -> None:
    """Add ``repair`` (make a damaged run directory resumable) to the subparsers ``sub``."""
    r = sub.add_parser("repair", allow_abbrev=False,
                       help="make a damaged run directory resumable: quarantine corrupt or duplicated lines "
                            "(nothing is deleted), merge records.jsonl with records.jsonl.gz")
    r.add_argument("run_dir")
    r.add_argument("--manifest-from", default=None, metavar="OTHER_RUN_OR_MANIFEST",
                   help="give a run directory that has records but no manifest.json the manifest of the run it "
                        "belongs to (a run directory or a manifest.json), after checking that the records agree")
    r.set_defaults(func=cmd_repair)


def register_models(sub) -> None:
    """Add ``models`` (the offline models shipped by PyPI packages) to the subparsers ``sub``."""
    m = sub.add_parser("models", help="list the offline models shipped by PyPI packages", allow_abbrev=False)
    m.set_defaults(func=cmd_models)


def register_runs(sub) -> None:
    """Add ``runs`` (the run directories under a folder, as a Markdown table) to the subparsers ``sub``."""
    r = sub.add_parser("runs", help="the run directories under ROOT (default data/raw) as a Markdown table: "
                                    "what each holds and the command that resumes it", allow_abbrev=False)
    r.add_argument("root", nargs="?", default=None, help="folder of run directories (default: data/raw)")
    r.add_argument("--survey", default=None, choices=["psm", "moralchoice", "moralchoice-likelihood"])
    r.set_defaults(func=cmd_runs)


def register_cache(sub) -> None:
    """Add ``cache`` (the response cache across runs) to the subparsers ``sub``."""
    ca = sub.add_parser("cache", help="the response cache across runs (--cache): its place, entries and size",
                        allow_abbrev=False)
    ca.add_argument("--clear", action="store_true", help="delete every cached response")
    ca.set_defaults(func=cmd_cache)


def cmd_export(a):
    from moralkit.collect.store import distinct_runs, read_manifest
    from moralkit.errors import DataError

    distinct_runs(a.run_dirs)
    surveys = {d: read_manifest(d).get("survey") for d in a.run_dirs}
    survey = surveys[a.run_dirs[0]]
    if len(set(surveys.values())) > 1:
        raise DataError("one export holds one survey; the runs given are of " +
                        ", ".join(f"{d}: {v}" for d, v in surveys.items()))
    if survey == "psm":
        from moralkit.collect.psm import export_psm

        print(export_psm(a.run_dirs, a.out))
    elif survey == "moralchoice-likelihood":
        from moralkit.collect.likelihood_run import export_likelihood

        print(export_likelihood(a.run_dirs, a.out))
    else:
        from moralkit.collect.moralchoice import export_moralchoice

        print(export_moralchoice(a.run_dirs, a.out))


def cmd_repair(a):
    from moralkit.collect.store import repair_run
    from moralkit.errors import DataError

    r = repair_run(a.run_dir, manifest_from=a.manifest_from)
    aside = "; set aside (nothing deleted): " + ", ".join(r["set_aside"]) if r["set_aside"] else "; nothing set aside"
    print(f"{a.run_dir}: {r['kept']} records kept, {r['fixed']} fixed in place, {r['quarantined']} lines moved to "
          f"quarantine.jsonl {r['reasons'] or ''}, {r['merged_from_gz']} merged from records.jsonl.gz"
          + (f", {r['journal_quarantined']} batch-journal lines moved to quarantine.jsonl" if r["journal_quarantined"]
             else "") + aside
          + (f"; manifest taken from {r['manifest_from']}" if r["manifest_from"] else ""))
    if r["problem"]:
        raise DataError(f"{a.run_dir} is still not resumable: {r['problem']}")
    print("The run is resumable: re-run the collection command to resume.")


def cmd_models(a):
    from moralkit.collect.localmodels import LOCAL_MODELS, local_model_available

    for m in LOCAL_MODELS.values():
        print(f"{m.name:32s} {m.upstream:36s} {m.licence:11s} {m.size / 1e6:7.0f} MB  "
              f"{'installed' if local_model_available(m.name) else 'not installed: ' + m.pip}")


def cmd_runs(a):
    from moralkit.collect.summary import find_runs, runs_markdown

    print(runs_markdown(find_runs(a.root, survey=a.survey)))




def cmd_cache(a):
    from moralkit.collect.cache import ResponseCache

    c = ResponseCache()
    if a.clear:
        n = c.clear()
        print(f"{c.path}: cleared {n} cached responses")
    st = c.stats()
    print(f"{st['path']}: {st['entries']} cached responses, {st['bytes'] / 1e6:.2f} MB")
    c.close()

