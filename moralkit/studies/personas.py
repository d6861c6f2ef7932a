"""The persona study in one call: how far a system prompt naming a moral theory moves one model, on both
surveys (notebook 07 and the findings, :func:`moralkit.studies.findings.persona_effects`).

Each persona-respondent (``<base>+persona-<name>``, :mod:`moralkit.collect.personas`) is compared with the
base model: on MoralChoice by :func:`moralkit.studies.steerability.likelihood_effects` (and, on request,
:func:`~moralkit.studies.steerability.placebo_effects`) per ambiguity level, on the PSM by
:func:`~moralkit.studies.steerability.psm_paired_effects` and its summary.

References
----------
Scherrer et al. (2023), eq. 8 (marginal action likelihood); Seror (2025), Section 3.2 (the NLLS ideal
points b).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..checks import check_int

__all__ = ["PersonaEffects", "persona_study", "persona_labels", "psm_shift_sentence"]


def persona_labels(labels, base: str) -> list[str]:
    """The persona-respondents of ``base`` among ``labels``, sorted."""
    return sorted(m for m in labels if str(m).startswith(f"{base}+persona-"))


@dataclass
class PersonaEffects:
    """The result of :func:`persona_study`.

    Attributes
    ----------
    moralchoice : DataFrame
        :func:`~moralkit.studies.steerability.likelihood_effects` per level (column ``ambiguity``).
    placebos : DataFrame
        :func:`~moralkit.studies.steerability.placebo_effects` per level (empty unless asked for).
    psm : DataFrame
        :func:`~moralkit.studies.steerability.psm_paired_effects`: one row per respondent and statement.
    psm_summary : DataFrame
        :func:`~moralkit.studies.steerability.psm_effects_summary` of ``psm``.
    notes : list of str
        What was missing (a level without persona likelihoods, a PSM without persona runs).
    """

    moralchoice: pd.DataFrame = field(default_factory=pd.DataFrame)
    placebos: pd.DataFrame = field(default_factory=pd.DataFrame)
    psm: pd.DataFrame = field(default_factory=pd.DataFrame)
    psm_summary: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """The MoralChoice effects (a copy), one row per persona-respondent and level."""
        return self.moralchoice.copy()

    def plot(self, ax=None):
        """Each persona's mean change of p(action 1) with its 95 % interval, per level.

        Returns
        -------
        matplotlib Axes
        """
        import matplotlib.pyplot as plt

        ax = ax if ax is not None else plt.subplots(figsize=(6, 0.6 + 0.35 * max(1, len(self.moralchoice))))[1]
        t = self.moralchoice.reset_index(drop=True)
        if len(t):
            y = range(len(t))
            ax.hlines(list(y), t["delta_lo"], t["delta_hi"], color="0.6", lw=4)
            ax.plot(t["mean_delta"], list(y), "o", color="C0")
            ax.set_yticks(list(y), [f"{p} ({a})" for p, a in zip(t["persona"], t["ambiguity"])])
            ax.axvline(0, color="k", lw=0.5)
        ax.set_xlabel("change of p(action 1), persona minus base")
        return ax

    def _repr_html_(self) -> str:
        return self.moralchoice._repr_html_() + self.psm_summary._repr_html_()


def persona_study(psm: dict, metrics_by_level: dict, scenarios_by_level: dict, base: str, *, n_boot: int = 2000,
                  n_perm: int = 9999, psm_boot: int = 200, seed: int = 0, placebos: bool = True,
                  unpaired: bool = True) -> PersonaEffects:
    """Persona effects of ``base``'s persona-respondents on both surveys.

    Parameters
    ----------
    psm : dict {label: PSMDataset}
        The PSM runs (:func:`moralkit.studies.crossmethod.load_own_runs`).
    metrics_by_level : dict {"low" | "high": DataFrame}
        MoralChoice scenario metrics per level (exact likelihoods where a respondent has them).
    scenarios_by_level : dict {"low" | "high": DataFrame}
        The scenario tables (:func:`moralkit.moralchoice.load_scenarios`), for the rules' directions.
    base : str
        The model without a persona.
    n_boot, n_perm : int
        Bootstrap draws and permutations of the MoralChoice effects.
    psm_boot : int
        Bootstrap draws of the PSM effects.
    seed : int
    placebos : bool, default True
        Also compute :func:`~moralkit.studies.steerability.placebo_effects`.
    unpaired : bool, default True
        Also give the unpaired PSM intervals beside the paired ones.

    Returns
    -------
    PersonaEffects
    """
    from . import steerability

    n_boot, n_perm = check_int(n_boot, "n_boot", minimum=2), check_int(n_perm, "n_perm", minimum=1)
    out = PersonaEffects()
    effects, placebo_rows = [], []
    for level, m_level in metrics_by_level.items():
        models = set(m_level["model"].unique()) if len(m_level) else set()
        personas = persona_labels(models, base)
        if base not in models or not personas:
            out.notes.append(f"No persona-respondent has {level}-ambiguity MoralChoice likelihoods yet "
                             "(data/moralchoice_likelihood).")
            continue
        keep = m_level["model"].isin([base, *personas])
        effects.append(steerability.likelihood_effects(
            m_level[keep], base, scenarios_by_level[level], n_boot=n_boot, n_perm=n_perm, seed=seed,
            placebos=[m.split("+persona-", 1)[1] for m in personas]).assign(ambiguity=level))
        if placebos:
            placebo_rows.append(steerability.placebo_effects(m_level[keep], base, scenarios_by_level[level],
                                                             n_perm=n_perm, seed=seed).assign(ambiguity=level))
    out.moralchoice = pd.concat(effects, ignore_index=True) if effects else pd.DataFrame()
    out.placebos = pd.concat(placebo_rows, ignore_index=True) if placebo_rows else pd.DataFrame()
    personas = persona_labels(psm, base)
    if base in psm and personas:
        others = [m for m in (f"{base}-s1", *personas) if m in psm]
        out.psm = steerability.psm_paired_effects({m: psm[m] for m in [base, *others]}, base, others,
                                                  n_boot=psm_boot, seed=seed, unpaired=unpaired)
        out.psm_summary = steerability.psm_effects_summary(out.psm)
    else:
        out.notes.append("No persona-respondent has finished the PSM yet (data/psm/*+persona-*.csv.gz).")
    return out


def psm_shift_sentence(effects: pd.DataFrame, summary: pd.DataFrame) -> str:
    """Two lines on the PSM shifts of b: how many intervals exclude 0, how many signed predictions are met,
    what a second sampling seed does, and how much narrower the paired intervals are than the unpaired.

    Parameters
    ----------
    effects, summary : DataFrame
        :attr:`PersonaEffects.psm` and :attr:`PersonaEffects.psm_summary` (with the unpaired intervals).
    """
    signed = summary[summary["persona"].notna()]
    w = effects[effects["paired"]]
    ratio = (w["delta_hi_unpaired"] - w["delta_lo_unpaired"]) / (w["delta_hi"] - w["delta_lo"])
    return (f"Persona-respondents: {signed['interval_excludes_0'].sum()} of {signed['statements'].sum()} shifts of b "
            f"have a 95 % interval that excludes 0; {signed['expected_side'].sum()} of "
            f"{signed['with_expectation'].sum()} signed predictions are met. Largest |shift| "
            f"{signed['max_abs_delta'].max():.2f}; a second sampling seed (other option sets in "
            f"{effects.loc[effects['persona'].isna(), 'rounds_options_differ'].max()} of 160 rounds) moves b by "
            f"up to {summary.loc[summary['persona'].isna(), 'max_abs_delta'].max():.2f}.\n"
            f"paired intervals are {ratio.min():.1f}-{ratio.max():.1f} times narrower than unpaired ones")
