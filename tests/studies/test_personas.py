"""moralkit.studies.personas: the persona study notebook 07 and the findings share (SIMULATED metrics)."""

import numpy as np
import pandas as pd
import pytest

from moralkit.paths import moralchoice_dir
from moralkit.studies import personas, steerability


def _metrics(scen, shift, rng):
    base = rng.uniform(0.2, 0.8, len(scen))
    rows = []
    for m, d in (("base", 0.0), ("base+persona-care", shift)):
        rows.append(pd.DataFrame({"model": m, "scenario_id": scen["scenario_id"], "p_action1": np.clip(base + d, 0, 1),
                                  "estimator": "token_probability"}))
    return pd.concat(rows, ignore_index=True)


@pytest.mark.skipif(moralchoice_dir() is None, reason="MoralChoice survey files not available")
def test_persona_study_is_the_steerability_functions_on_each_level():
    """persona_study gives what likelihood_effects gives per level (same seed), and notes what is missing."""
    from moralkit import moralchoice as mc

    low = mc.load_scenarios("low").head(60)
    m = _metrics(low, 0.1, np.random.default_rng(0))
    res = personas.persona_study({}, {"low": m, "high": m.iloc[:0]}, {"low": low}, "base", n_boot=50, n_perm=99,
                                 seed=3, placebos=True)
    direct = steerability.likelihood_effects(m, "base", low, n_boot=50, n_perm=99, seed=3,
                                             placebos=["care"]).assign(ambiguity="low")
    pd.testing.assert_frame_equal(res.moralchoice, direct)
    assert len(res.placebos) and set(res.placebos["ambiguity"]) == {"low"}
    assert res.psm.empty and any("high-ambiguity" in n for n in res.notes) and any("PSM" in n for n in res.notes)
    assert res.to_frame().equals(res.moralchoice) and "persona" in res._repr_html_()
    assert personas.persona_labels(["base", "base+persona-care", "other+persona-x"], "base") == ["base+persona-care"]
