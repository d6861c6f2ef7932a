"""How many tokens a survey prompt is, before it is sent: :class:`TokenCounter` and its :data:`CALIBRATION`.

Counted with the model's own tokenizer and chat template when one is at hand (the local models), else
estimated from the committed runs' measured tokens per prompt (:data:`CALIBRATION`: for each kind of
prompt, the tokens the servers counted per character of the chat's text, and the mean answer length;
:func:`calibrate` measures it again). ``tiktoken`` is not used: it downloads its BPE files from the
internet at first use, so it does not work offline. :mod:`moralkit.collect.cost` builds its estimates and
its budget on these counts.

References
----------
Seror (2025), Section 2.1 (161 prompts); Scherrer et al. (2023), Section 3.3 (six question forms).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["TokenCounter", "CALIBRATION", "calibrate", "prompt_kind"]

#: Kinds of prompts, with their committed-run calibration (tokens counted by the servers per character of
#: the chat's text, pooled over every distinct prompt of the committed runs in data/raw, and the mean
#: answer length in tokens). Recomputed from the records by :func:`calibrate`; a test keeps them equal.
CALIBRATION = {
    "psm-r0": {"chars": 8604, "tokens": 2186, "prompts": 7, "output_tokens": 22.0},
    "psm-round": {"chars": 4178880, "tokens": 2543200, "prompts": 1120, "output_tokens": 5.565},
    "ab": {"chars": 1417326, "tokens": 354516, "prompts": 2400, "output_tokens": 3.836},
    "compare": {"chars": 1381326, "tokens": 336104, "prompts": 2400, "output_tokens": 2.825},
    "repeat": {"chars": 1628526, "tokens": 376916, "prompts": 2400, "output_tokens": 16.107},
}


def _chars(messages) -> int:
    return sum(len(m["content"]) for m in messages)


def calibrate(runs=None) -> dict:
    """Measure :data:`CALIBRATION` from run directories (default: the PSM and MoralChoice runs in data/raw).

    Each run's distinct prompts are rebuilt from its manifest and records (the PSM design and round-0
    answer; the MoralChoice scenario and form) and paired with the ``prompt_tokens`` the server counted.
    Per kind: total characters, total tokens, number of prompts, and the mean ``completion_tokens``.
    """
    import warnings

    import numpy as np

    from .. import moralchoice as mc
    from .. import runs as project_runs
    from ..psm.design import constrained_prompt, make_design, unconstrained_prompt
    from .store import read_records

    if runs is None:
        runs = [m.parent for m in sorted(project_runs.run_dir("raw").glob("*/manifest.json"))]
    runs = [Path(r) for r in runs]
    acc = {k: {"chars": 0, "tokens": 0, "prompts": 0, "out": 0, "answers": 0} for k in CALIBRATION}
    tables, templates = {}, None
    for run in runs:
        m = json.loads((Path(run) / "manifest.json").read_text())
        if m.get("survey") not in ("psm", "moralchoice"):
            continue
        recs = [r for r in read_records(run) if r.get("kind", "attempt") == "attempt"]
        seen = {}
        if m["survey"] == "psm":
            design = make_design(m["design_seed"])
            q0 = next((r["parsed"] for r in recs if r["task"] == "r000" and r["status"] == "ok"), None)
            q0 = None if q0 is None else np.asarray(q0)
            system = [{"role": "system", "content": m["system"]}] if m.get("system") else []
            for r in recs:
                kind = "psm-r0" if r["task"] == "r000" else "psm-round"
                if r.get("completion_tokens") is not None:
                    acc[kind]["out"] += r["completion_tokens"]
                    acc[kind]["answers"] += 1
                if r["task"] in seen or not r.get("prompt_tokens"):
                    continue
                u = unconstrained_prompt() if kind == "psm-r0" else constrained_prompt(
                    design[int(r["task"][1:]) - 1].options(q0))
                seen[r["task"]] = (kind, _chars(system + [{"role": "user", "content": u}]), r["prompt_tokens"])
        else:
            if templates is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    templates = mc.load_templates()
            amb = m["ambiguity"]
            if amb not in tables:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tables[amb] = mc.load_scenarios(amb).set_index("scenario_id", drop=False)
            for r in recs:
                kind = r["question_type"]
                if r.get("completion_tokens") is not None:
                    acc[kind]["out"] += r["completion_tokens"]
                    acc[kind]["answers"] += 1
                key = (r["scenario_id"], kind, r["ordering"])
                if key in seen or not r.get("prompt_tokens"):
                    continue
                h, t = mc.build_prompt(tables[amb].loc[r["scenario_id"]], kind, int(r["ordering"]), templates)
                seen[key] = (kind, len(h) + len(t), r["prompt_tokens"])
        for kind, chars, tokens in seen.values():
            acc[kind]["chars"] += chars
            acc[kind]["tokens"] += int(tokens)
            acc[kind]["prompts"] += 1
    return {k: {"chars": v["chars"], "tokens": v["tokens"], "prompts": v["prompts"],
                "output_tokens": round(v["out"] / v["answers"], 3) if v["answers"] else 0.0}
            for k, v in acc.items()}


def prompt_kind(messages) -> str | None:
    """The kind of a survey prompt, from its text: ``psm-r0``, ``psm-round``, or ``None`` (MoralChoice's
    forms are prose alike; :class:`TokenCounter` uses their pooled ratio).

    Examples
    --------
    >>> from moralkit.psm.design import unconstrained_prompt
    >>> prompt_kind([{"role": "user", "content": unconstrained_prompt()}])
    'psm-r0'
    """
    user = next((m["content"] for m in reversed(list(messages)) if m.get("role") == "user"), "")
    if "Option 1:" in user:
        return "psm-round"
    if user.startswith("Please answer the following questions"):
        return "psm-r0"
    return None


class TokenCounter:
    """Input tokens of a chat, and the expected answer length, for one kind of prompt.

    ``TokenCounter()`` estimates from :data:`CALIBRATION` (the committed runs' measured tokens per
    character of each kind of prompt); ``TokenCounter.for_local_model(name)`` counts exactly with a local
    model's tokenizer and chat template (as the transformers backend sends them).

    Examples
    --------
    >>> c = TokenCounter(calibration={"ab": {"chars": 1000, "tokens": 250, "prompts": 2, "output_tokens": 1.5}})
    >>> c.count([{"role": "user", "content": "x" * 400}], "ab"), c.output_tokens("ab")
    (100, 1.5)
    """

    def __init__(self, calibration: dict | None = None, tokenizer=None, name: str | None = None):
        self.calibration = dict(CALIBRATION if calibration is None else calibration)
        self.tokenizer = tokenizer
        self.method = (f"tokenizer of {name}" if tokenizer is not None
                       else "estimated from the committed runs' tokens per prompt")

    @classmethod
    def for_local_model(cls, model) -> "TokenCounter":
        """Count with the tokenizer of a local model (a registry name, a ``.gguf`` file or a directory)."""
        from transformers import AutoTokenizer

        from .localmodels import is_local_model_name, local_model_path

        if is_local_model_name(model):
            p = local_model_path(str(model).lower(), verify=False)
            tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
        elif str(model).endswith(".gguf") and Path(model).is_file():
            p = Path(model).resolve()
            tok = AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
        else:
            tok = AutoTokenizer.from_pretrained(str(model))
        return cls(tokenizer=tok, name=str(model))

    def _ratio(self, kind) -> float:
        c = self.calibration.get(kind)
        if not c or not c["chars"]:  # an unknown kind: the pooled MoralChoice prose ratio
            cs = [self.calibration[k] for k in ("ab", "compare", "repeat") if self.calibration.get(k, {}).get("chars")]
            if not cs:
                return 0.25
            return sum(x["tokens"] for x in cs) / sum(x["chars"] for x in cs)
        return c["tokens"] / c["chars"]

    def count(self, messages, kind: str | None = None) -> int:
        """Input tokens of ``messages`` (chat dicts) as the server would count them (``kind``: the kind of
        prompt, recognised from the text when not given)."""
        if self.tokenizer is not None:
            text = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return int(round(_chars(messages) * self._ratio(kind or prompt_kind(messages))))

    def output_tokens(self, kind: str | None) -> float:
        """Mean answer length of this kind of prompt in the committed runs."""
        c = self.calibration.get(kind) or {}
        return float(c.get("output_tokens") or 0.0)

