"""Simulated PSM respondents (never LLM output): quadratic-utility agents and random choosers.

Every dataset built here is *simulated*: its model label starts with ``"sim-"``
and its provider, backend and run are ``"simulated"``. These agents are what the
simulation study (power and size of the rationality test, recovery of the
utility parameters, partition sanity checks; notebook ``06_audit``) and the
tests use. Nothing here may be written to ``data/`` as if it were model
answers.

Agents
------
* **Quadratic single-peaked utility** (eq. (7) of the paper),
  ``u(q) = -1/2 sum_s a_s (q_s - b_s)^2`` with ``a_s > 0``, ``sum_s a_s = 1``.
  In round 0 the agent gives its best answer in ``X = {0..5}^5``; in each
  constrained round it sees the 100 alternatives of a
  :func:`moralkit.psm.design.make_design` design, with the corner flip decided by
  its own round-0 answer (Section 2.2), and picks the option of highest
  utility, or, with logit noise of scale ``noise > 0``, option ``j`` with
  probability proportional to ``exp(u(q_j) / noise)``.
* **Uniformly random chooser**: the null hypothesis of the rationality test
  (Section 2.3, H0): a uniformly random round-0 answer, then a uniformly
  random option in every round.

References
----------
Seror, A. (2025). *The Moral Mind(s) of Large Language Models*, Section 2.2
(design, corner flip), Section 2.3 (random behaviour, H0), Section 3.2,
eq. (7) (single-peaked quadratic utility).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ..checks import as_generator, check_choice, check_int
from ..errors import MoralkitError
from .dataset import PSMDataset
from .design import as_design

__all__ = [
    "SIMULATED",
    "QuadraticAgent",
    "logit_choices",
    "random_answers",
    "random_chosen_answers",
    "random_quadratic_agent",
    "simulate_agents",
    "simulate_quadratic",
    "simulate_quadratic_noises",
    "simulate_random",
]

#: Provider and run label of every simulated dataset.
SIMULATED = "simulated"

_X = np.array(list(itertools.product(range(6), repeat=5)), dtype=np.int64)  # all 7776 answers


@dataclass(frozen=True)
class QuadraticAgent:
    """A single-peaked quadratic utility ``u(q) = -1/2 sum_s a_s (q_s - b_s)^2`` (eq. (7)).

    Parameters
    ----------
    a : array_like (5,)
        Positive weights; normalised to sum to 1 (as in Table 2 (b)).
    b : array_like (5,)
        Ideal answers (real numbers; the paper's estimates lie in [2.2, 3.1]).

    References
    ----------
    Seror (2025), Section 3.2, eq. (7).
    """

    a: np.ndarray
    b: np.ndarray

    def __post_init__(self):
        a = np.asarray(self.a, dtype=float).reshape(-1)
        b = np.asarray(self.b, dtype=float).reshape(-1)
        if a.shape != (5,) or b.shape != (5,):
            raise MoralkitError(f"a and b must have 5 entries (one per statement), got shapes {a.shape} and {b.shape}")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise MoralkitError("a and b must be finite")
        if (a <= 0).any():
            raise MoralkitError("every weight a_s must be positive (eq. (7)); got " + np.array2string(a))
        object.__setattr__(self, "a", a / a.sum())
        object.__setattr__(self, "b", b)

    def utility(self, q) -> np.ndarray:
        """Utility of answers ``q`` (raw 0..5 coordinates; broadcasts over leading axes)."""
        q = np.asarray(q, dtype=float)
        return -0.5 * ((q - self.b) ** 2 * self.a).sum(-1)

    def best_answer(self) -> np.ndarray:
        """The unconstrained optimum in ``X = {0..5}^5`` (round 0)."""
        return _X[int(np.argmax(self.utility(_X)))].copy()


def random_quadratic_agent(seed=None, *, b_range=(0.5, 4.5), a_concentration: float = 5.0) -> QuadraticAgent:
    """Draw a quadratic agent: ``b_s ~ U(b_range)``, ``a ~ Dirichlet(a_concentration * 1)``.

    Parameters
    ----------
    seed : int, numpy Generator or None
    b_range : (float, float), default (0.5, 4.5)
    a_concentration : float, default 5
        Larger values give more balanced weights (Table 2 (b) reports weights 0.14-0.25).
    """
    rng = as_generator(seed)
    lo, hi = b_range
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise MoralkitError(f"b_range must be an increasing pair of finite numbers, got {b_range!r}")
    if not a_concentration > 0:
        raise MoralkitError("a_concentration must be positive")
    a = rng.dirichlet(np.full(5, float(a_concentration)))
    a = np.maximum(a, 1e-6)
    b = rng.uniform(lo, hi, size=5)
    return QuadraticAgent(a=a, b=b)


def _check_noise(noise) -> float:
    noise = float(noise)
    if not (noise >= 0 and np.isfinite(noise)):
        raise MoralkitError(f"noise must be a finite scale >= 0 (0 = no noise), got {noise!r}")
    return noise


def simulate_quadratic(agent: QuadraticAgent | None = None, design=None, *, noise: float = 0.0, seed=None,
                       model: str = "sim-quadratic", q0=None) -> PSMDataset:
    """A simulated quadratic-utility agent answering a PSM design.

    Parameters
    ----------
    agent : QuadraticAgent, optional
        Default: :func:`random_quadratic_agent` drawn with ``seed``.
    design : Design, int or None
        The design (or its seed; default ``make_design(0)``).
    noise : float, default 0
        Logit noise scale: option ``j`` is chosen with probability
        proportional to ``exp(u(q_j) / noise)``; 0 picks the best option.
    seed : int, numpy Generator or None
        Randomness for the agent (if drawn) and the noisy choices.
    model : str, default "sim-quadratic"
        Label; must start with ``"sim-"`` so simulated data is never mistaken for LLM answers.
    q0 : array_like (5,), optional
        Round-0 answer; default the agent's best answer in X (it decides the corner flips).

    Returns
    -------
    PSMDataset
        Labelled simulated; ``q0`` set; all rounds answered.

    References
    ----------
    Seror (2025), Section 2.2 (design, corner flip) and eqs. (7)-(8).

    Examples
    --------
    >>> import numpy as np
    >>> from moralkit.psm.design import make_design
    >>> agent = QuadraticAgent(a=np.full(5, 0.2), b=np.full(5, 2.5))
    >>> ds = simulate_quadratic(agent, make_design(0), model="sim-a")
    >>> ds.model, ds.n_obs
    ('sim-a', 160)
    """
    if not str(model).startswith("sim-"):
        raise MoralkitError(f"simulated datasets must be labelled 'sim-...', got model={model!r}")
    noise = _check_noise(noise)
    rng = as_generator(seed)
    if agent is None:
        agent = random_quadratic_agent(rng)
    if not isinstance(agent, QuadraticAgent):
        raise MoralkitError("agent must be a QuadraticAgent")
    design = as_design(design)
    q0 = agent.best_answer() if q0 is None else np.asarray(q0, dtype=np.int64)
    arrays = design.arrays(q0)
    return _quadratic_dataset(model, arrays, agent.utility(arrays[2]), noise, rng, q0)


def _quadratic_dataset(model, arrays, utilities, noise: float, rng, q0) -> PSMDataset:
    corners, prices, options, ci, pi, idx = arrays
    chosen = logit_choices(utilities, noise, rng) + 1
    return PSMDataset(model=str(model), corners=corners, prices=prices, options=options, chosen=chosen,
                      round_index=idx, corner_index=ci, price_index=pi, q0=q0,
                      provider=SIMULATED, backend=SIMULATED, run=SIMULATED)


def simulate_quadratic_noises(agent: QuadraticAgent, design, noises, seeds, *, model: str = "sim-quadratic",
                              q0=None) -> list[PSMDataset]:
    """One quadratic agent answering a design at several logit noise levels.

    ``simulate_quadratic_noises(agent, design, noises, seeds)[k]`` is
    ``simulate_quadratic(agent, design, noise=noises[k], seed=seeds[k])`` (with ``model`` and ``q0``), the
    same dataset: the agent sees the same option sets at every level, so they and their utilities are
    computed once. The datasets share one ``options`` array (do not write into it); their other arrays are
    their own. The power study of :func:`moralkit.studies.audit.power_study` draws every agent at eight levels.

    Parameters
    ----------
    agent : QuadraticAgent
    design : Design, int or None
    noises : sequence of float
        Logit noise scales (0 = the best option).
    seeds : sequence of int, numpy Generator or None
        One per noise level: the randomness of that level's choices.
    model : str, default "sim-quadratic"
        Label of every dataset; must start with ``"sim-"``.
    q0 : array_like (5,), optional
        Round-0 answer; default the agent's best answer in X.

    Returns
    -------
    list of PSMDataset

    References
    ----------
    Seror (2025), Section 2.2 (design, corner flip) and eqs. (7)-(8).
    """
    if not str(model).startswith("sim-"):
        raise MoralkitError(f"simulated datasets must be labelled 'sim-...', got model={model!r}")
    if not isinstance(agent, QuadraticAgent):
        raise MoralkitError("agent must be a QuadraticAgent")
    noises, seeds = [_check_noise(x) for x in noises], list(seeds)
    if len(noises) != len(seeds):
        raise MoralkitError(f"give one seed per noise level: {len(noises)} levels, {len(seeds)} seeds")
    design = as_design(design)
    q0 = agent.best_answer() if q0 is None else np.asarray(q0, dtype=np.int64)
    arrays = design.arrays(q0)
    u = agent.utility(arrays[2])
    # every dataset gets its own small arrays; the options (160 x n x 5) are shared, as the docstring says
    return [_quadratic_dataset(model, [a if k == 2 else a.copy() for k, a in enumerate(arrays)], u, noise,
                               as_generator(seed), q0.copy())
            for noise, seed in zip(noises, seeds)]


def logit_choices(utilities, noise: float, seed=None, size: int | None = None) -> np.ndarray:
    """0-based options chosen by logit noise: option ``j`` with probability proportional to ``exp(u_j / noise)``.

    Parameters
    ----------
    utilities : array_like (T, n)
        Utility of each of the ``n`` options of each of ``T`` rounds.
    noise : float
        Logit noise scale; 0 picks the best option (the first on ties).
    seed : int, numpy Generator or None
    size : int, optional
        Draw ``size`` independent choice vectors at once (shape ``(size, T)``);
        default one vector (shape ``(T,)``). One vector uses the same random
        numbers as the first row of a batch.

    Returns
    -------
    ndarray of int64, shape (T,) or (size, T)

    References
    ----------
    Seror (2025), eq. (7) (the utility); the logit (random-utility) noise is this package's simulation device.
    """
    u = np.asarray(utilities, dtype=float)
    if u.ndim != 2 or u.shape[1] < 1:
        raise MoralkitError(f"utilities must have shape (T, n_options), got {u.shape}")
    noise = _check_noise(noise)
    if noise == 0:
        best = np.argmax(u, axis=1).astype(np.int64)
        return best if size is None else np.tile(best, (int(size), 1))
    rng = as_generator(seed)
    z = (u - u.max(1, keepdims=True)) / noise
    w = np.exp(z)
    w /= w.sum(1, keepdims=True)
    cum = np.cumsum(w, axis=1)
    draws = rng.random(len(w) if size is None else (int(size), len(w)))[..., None]
    return np.minimum((cum < draws).sum(-1), w.shape[1] - 1).astype(np.int64)


def random_answers(design, rng, q0=None):
    """The draws of :func:`simulate_random` as arrays, without building (and validating) a dataset.

    Draws the round-0 answer ``q0`` (uniform on X unless given), then a uniform option (1-based) in
    every round, from ``rng`` in that order. Returns ``(q0, design.arrays(q0), chosen)``; the hot
    loops of the convention audit (:mod:`moralkit.studies.conventions`) use it directly.
    """
    q0 = rng.integers(0, 6, size=5) if q0 is None else np.asarray(q0, dtype=np.int64)
    arrays = design.arrays(q0)
    chosen = rng.integers(1, arrays[2].shape[1] + 1, size=len(arrays[2]))
    return q0, arrays, chosen


def random_chosen_answers(design, rng, q0=None):
    """The draws of :func:`random_answers` (the same random numbers), keeping only what was chosen.

    Returns ``(q0, corners, prices, corner_index, answers)``: the round-0 answer, the effective corners,
    the prices, the nominal corner indices and the raw answers (T, 5) of the chosen options
    (:meth:`moralkit.psm.design.Design.chosen_answers`), without the (T, n, 5) alternatives of every round
    that :func:`random_answers` builds. The convention audit's null (:mod:`moralkit.studies.conventions`)
    draws thousands of such respondents.
    """
    q0 = rng.integers(0, 6, size=5) if q0 is None else np.asarray(q0, dtype=np.int64)
    corners, prices, _, ci, _, _ = design.arrays(q0, options=False)
    chosen = rng.integers(1, len(design[0].options_y) + 1, size=len(corners))
    return q0, corners, prices, ci, design.chosen_answers(corners, chosen)


def simulate_random(design=None, *, seed=None, model: str = "sim-random", q0=None) -> PSMDataset:
    """A simulated uniformly random respondent (H0 of the rationality test, Section 2.3).

    The round-0 answer is uniform on X (unless ``q0`` is given) and decides the
    corner flips; each constrained round's option is uniform on the 100 shown.

    Returns
    -------
    PSMDataset
        Labelled simulated.
    """
    if not str(model).startswith("sim-"):
        raise MoralkitError(f"simulated datasets must be labelled 'sim-...', got model={model!r}")
    q0, (corners, prices, options, ci, pi, idx), chosen = random_answers(as_design(design), as_generator(seed), q0)
    return PSMDataset(model=str(model), corners=corners, prices=prices, options=options, chosen=chosen,
                      round_index=idx, corner_index=ci, price_index=pi, q0=q0,
                      provider=SIMULATED, backend=SIMULATED, run=SIMULATED)


def simulate_agents(n: int, kind: str = "quadratic", design=None, *, noise: float = 0.0, seed=0,
                    agents=None) -> dict[str, PSMDataset]:
    """Several simulated respondents, each with its own child seed.

    Parameters
    ----------
    n : int
        Number of agents (ignored when ``agents`` is given).
    kind : {"quadratic", "random"}
    design : Design, int or None
        Shared design (default ``make_design(0)``).
    noise : float
        Logit noise scale (quadratic agents only).
    seed : int
        Master seed; agent ``i`` uses child ``i`` of ``SeedSequence(seed)``.
    agents : sequence of QuadraticAgent, optional
        Given utilities instead of random ones.

    Returns
    -------
    dict
        ``{"sim-quadratic-0": PSMDataset, ...}`` (or ``"sim-random-i"``).
    """
    check_choice(kind, ("quadratic", "random"), "kind")
    if agents is not None:
        agents = list(agents)
        n = len(agents)
    n = check_int(n, "n", minimum=0)
    design = as_design(design)
    children = np.random.SeedSequence(int(seed)).spawn(int(n))
    out = {}
    for i in range(int(n)):
        rng = np.random.default_rng(children[i])
        if kind == "random":
            out[f"sim-random-{i}"] = simulate_random(design, seed=rng, model=f"sim-random-{i}")
        else:
            ag = agents[i] if agents is not None else random_quadratic_agent(rng)
            out[f"sim-quadratic-{i}"] = simulate_quadratic(ag, design, noise=noise, seed=rng,
                                                           model=f"sim-quadratic-{i}")
    return out
