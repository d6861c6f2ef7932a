"""Cost before, during and after a collection (issue 26 item 3, issue 27 item 5): prices, token estimates,
modes, --max-cost, --tpm, and token and cost totals in the end-of-run line, the manifest and `runs`.

The server is :class:`moralkit.collect.faultserver.FaultServer` (a test double; its answers are never data),
driven through the official ``openai`` SDK by the real collector.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

from moralkit.collect import cost
from moralkit.collect.store import read_records
from moralkit.errors import MoralkitError
from moralkit.testing.faultserver import FaultServer

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, FAULT_KEY="sk-test-fault-server-key-0000", PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
SHARED = ROOT.parent / "shared" / "moralchoice"


@pytest.fixture
def cli(capsys, monkeypatch):
    """The command line run in this process (``moralkit.cli.main``: the same exit statuses and output as
    ``python -m moralkit``, without starting an interpreter per call, which dominated these tests' time)."""
    import moralkit.cli as main_module

    monkeypatch.setenv("FAULT_KEY", ENV["FAULT_KEY"])

    def run(*args):
        capsys.readouterr()
        code = main_module.main([str(a) for a in args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    return run


def _usage(req, text):
    """A server that bills what the calibrated estimate predicts for the prompt, and 2 output tokens."""
    return cost.TokenCounter().count(req["messages"]), 2


def test_price_table_is_offline_and_has_batch_prices():
    p = cost.price_for("gpt-4o", "OpenAI")
    assert (p.input_mtok, p.output_mtok) == (2.5, 10.0) and p.source.startswith("genai-prices")
    assert (p.batch_input_mtok, p.batch_output_mtok) == (1.25, 5.0)  # the table's batch variant: 50 %
    assert cost.price_for("fault-double") is None and cost.price_for("qwen2.5-coder-0.5b-instruct") is None
    u = cost.price_for("anything", price_in=3, price_out=15)
    assert u.source == "user" and u.cost(1e6, 1e6) == 18.0 and u.cost(1e6, 1e6, batch=True) == 9.0
    with pytest.raises(MoralkitError, match="both --price-in and --price-out"):
        cost.price_for("x", price_in=1.0)


@pytest.mark.skipif(not SHARED.exists(), reason="MoralChoice survey files not available")
def test_paper_scale_requests_and_modes():
    """161 PSM prompts + (687 + 679) scenarios x 6 forms x M (5 low, 10 high) = 61,511 requests online;
    n = M sends each form once: 161 + 8,196 = 8,357; log-probabilities: 1 output token per A/B or compare form."""
    parts = cost.survey_parts("paper", cost.TokenCounter())
    t = cost.estimate_table(parts, cost.price_for("m", price_in=1.0, price_out=1.0)).set_index("mode")
    assert t.loc["online", "requests"] == 161 + 687 * 6 * 5 + 679 * 6 * 10 == 61_511
    assert t.loc["batch + n=M", "requests"] == 161 + (687 + 679) * 6 == 8_357
    assert t.loc["batch", "cost_usd"] == pytest.approx(t.loc["online", "cost_usd"] / 2)
    assert t.loc["online", "output_tokens"] == t.loc["online + n=M", "output_tokens"]  # n bills every choice
    assert t.loc["online + n=M", "input_tokens"] < t.loc["online", "input_tokens"] / 5  # the prompt once per form
    lp = t.loc["batch + n=M + logprobs"]
    assert lp["output_tokens"] < t.loc["batch + n=M", "output_tokens"]
    ab_cmp = [p for p in parts if p.kind in ("ab", "compare")]
    rep = [p for p in parts if p.kind == "repeat"]
    psm = [p for p in parts if p.survey == "psm"]
    expected = sum(p.prompts for p in ab_cmp) + sum(p.prompts * p.samples * p.output_tokens for p in rep + psm)
    assert lp["output_tokens"] == round(expected)


def test_calibration_is_what_the_committed_runs_measure():
    """CALIBRATION is recomputed from data/raw's records (prompts rebuilt, tokens as the server counted them)."""
    if not SHARED.exists():
        pytest.skip("MoralChoice survey files not available")
    assert cost.calibrate() == cost.CALIBRATION


def test_max_cost_stops_cleanly_resumably_and_never_overspends(tmp_path, cli):
    out = tmp_path / "run"
    args = ["collect", "psm", "--backend", "openai", "--model", "fault-double", "--api-key-env", "FAULT_KEY",
            "--concurrency", "2", "--timeout", "5", "--backoff", "0.02", "--out", out, "--no-progress", "--limit", "10",
            "--price-in", "100", "--price-out", "100"]
    with FaultServer(rate=0.0, usage=_usage) as srv:
        args[args.index("--api-key-env"):args.index("--api-key-env")] = ["--base-url", srv.url]
        p = cli(*args, "--max-cost", "1.50")
        assert p.returncode == 3, p.stderr[-2000:]
        assert "budget:" in p.stderr and "remains" in p.stderr and "re-run the same command to resume" in p.stderr
        recs = read_records(out)
        tin, tout, _ = cost.records_usage(recs)
        assert 0 < tin * 100 / 1e6 + tout * 100 / 1e6 <= 1.50  # what was billed stays within the budget
        man = json.loads((out / "manifest.json").read_text())
        res = man["sessions"][-1]["result"]
        assert res["prompt_tokens"] == tin and res["max_cost_usd"] == 1.5 and res["run_cost_usd"] <= 1.5
        n_first = len(recs)
        p = cli(*args, "--max-cost", "100")  # resume with a larger budget
        assert p.returncode == 0, p.stderr[-2000:]
        assert "complete: 11/11 rounds" in p.stdout and "tokens" in p.stdout and "of --max-cost $100.00" in p.stdout
        recs2 = read_records(out)
        assert recs2[:n_first] == recs  # nothing lost or re-sent
        keys = [(r["task"], r["attempt"]) for r in recs2 if r["kind"] == "attempt"]
        assert len(keys) == len(set(keys)) == len(srv.usable)  # no request paid twice


def test_end_line_and_manifest_carry_tokens_and_cost(tmp_path, cli):
    out = tmp_path / "run"
    with FaultServer(rate=0.0, usage=lambda req, text: (1000, 5)) as srv:
        p = cli("collect", "psm", "--backend", "openai", "--model", "fault-double", "--base-url", srv.url,
                 "--api-key-env", "FAULT_KEY", "--out", out, "--no-progress", "--limit", "3", "--price-in", "2",
                 "--price-out", "10")
    assert p.returncode == 0, p.stderr[-2000:]
    # 4 requests x 1000 in, 5 out at $2 / $10 per million: $0.0080 + $0.0002
    assert "tokens 4,000 in / 20 out, $0.0082" in p.stdout
    res = json.loads((out / "manifest.json").read_text())["sessions"][-1]["result"]
    assert (res["prompt_tokens"], res["completion_tokens"], res["cost_usd"]) == (4000, 20, 0.0082)


def test_tpm_paces_every_request_through_aiolimiter(tmp_path, monkeypatch):
    import aiolimiter

    from moralkit.collect.backends import OpenAIBackend
    from moralkit.collect.psm import run_psm

    got = []
    orig = aiolimiter.AsyncLimiter.acquire

    async def acquire(self, amount=1):
        got.append((self.max_rate, amount))
        return await orig(self, amount)

    monkeypatch.setattr(aiolimiter.AsyncLimiter, "acquire", acquire)
    os.environ["FAULT_KEY"] = "k"
    with FaultServer(rate=0.0) as srv:
        b = OpenAIBackend("fault-double", base_url=srv.url, api_key_env="FAULT_KEY", concurrency=2)
        b.cost_meter = cost.CostMeter(tpm=1_000_000)
        run_psm(b, tmp_path / "run", limit=2, progress=False)
    assert len(got) == 3 and all(rate == 1_000_000 for rate, _ in got)
    assert got[1][1] > 1000  # a constrained round: ~2,270 prompt tokens + 16 output tokens


def test_max_cost_without_a_price_is_refused_with_the_fix():
    with pytest.raises(MoralkitError, match="--price-in and --price-out"):
        cost.CostMeter(max_cost=1.0)
