"""Requests each provider accepts, honest failure when it refuses, and the native Anthropic backend (issue 26).

The servers are test doubles on 127.0.0.1 (:mod:`moralkit.testing.fake_openai`,
:mod:`moralkit.testing.fake_anthropic`) whose answers are hashes of the prompt, never data. They are driven
through the official ``openai`` and ``anthropic`` SDKs: directly (what the fakes accept and refuse) and
through moralkit's backends and command line (what moralkit sends and records).
"""

import asyncio
import json

import anthropic
import openai
import pytest

import moralkit.cli as cli
from moralkit.collect.backends import (
    REASONING_MAX_TOKENS,
    AnthropicBackend,
    OpenAIBackend,
    Sampling,
    make_backend,
    rejected_parameters,
)
from moralkit.collect.psm import psm_quality, run_psm
from moralkit.collect.store import read_records
from moralkit.errors import MoralkitError
from moralkit.testing.fake_anthropic import FakeAnthropic
from moralkit.testing.fake_openai import FakeOpenAI

KEY = "sk-test-provider-key-000000"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("PROVIDER_KEY", KEY)


def _attempts(run):
    return [r for r in read_records(run) if r["kind"] == "attempt"]


def _manifest(run):
    return json.loads((run / "manifest.json").read_text())


def _run_sdk(coro):
    return asyncio.run(coro)


def _cli(capsys, *args):
    status = cli.main([str(a) for a in args])
    out = capsys.readouterr()
    return status, out.out, out.err


def _openai_args(srv, model, out, *extra):
    return ["collect", "psm", "--backend", "openai", "--model", model, "--base-url", srv.url, "--api-key-env",
            "PROVIDER_KEY", "--concurrency", "2", "--timeout", "5", "--backoff", "0.02", "--out", out,
            "--no-progress", *extra]


def _anthropic_args(srv, model, out, *extra):
    return ["collect", "psm", "--backend", "anthropic", "--model", model, "--base-url", srv.url, "--api-key-env",
            "PROVIDER_KEY", "--concurrency", "2", "--timeout", "5", "--backoff", "0.02", "--out", out,
            "--no-progress", *extra]


# ------------------------------------------------------------------ the fakes, through the official SDKs
def test_fake_openai_reasoning_model_refuses_with_the_documented_bodies():
    async def go(url):
        c = openai.AsyncOpenAI(api_key=KEY, base_url=url, max_retries=0)
        msgs = [{"role": "user", "content": "Respond solely with A or B"}]
        errs = {}
        for name, kw in {"max_tokens": dict(max_tokens=16), "top_p": dict(max_completion_tokens=999, top_p=0.9),
                         "temperature": dict(max_completion_tokens=999, temperature=0.5),
                         "top_k": dict(max_completion_tokens=999, extra_body={"top_k": 5})}.items():
            with pytest.raises(openai.BadRequestError) as e:
                await c.chat.completions.create(model="o4-mini", messages=msgs, **kw)
            errs[name] = e.value.body
        small = await c.chat.completions.create(model="o4-mini", messages=msgs, max_completion_tokens=50)
        ok = await c.chat.completions.with_raw_response.create(model="o4-mini", messages=msgs,
                                                               max_completion_tokens=500, temperature=1)
        chat = await c.chat.completions.create(model="fake-chat", messages=msgs, max_tokens=8, top_p=0.5,
                                               temperature=0.2)
        await c.close()
        return errs, small, ok, chat

    with FakeOpenAI(api_key=KEY) as srv:
        errs, small, ok, chat = _run_sdk(go(srv.url))
    assert errs["max_tokens"] == {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                             "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                                  "param": "max_tokens", "code": "unsupported_parameter"}
    assert errs["top_p"]["param"] == "top_p" and errs["top_p"]["code"] == "unsupported_parameter"
    assert errs["temperature"]["code"] == "unsupported_value" and "Only the default (1)" in errs["temperature"]["message"]
    assert errs["top_k"]["message"] == "Unrecognized request argument supplied: top_k"
    # hidden reasoning (192 tokens at the default effort) spends a budget of 50: empty text, finish "length"
    assert small.choices[0].message.content == "" and small.choices[0].finish_reason == "length"
    assert small.usage.completion_tokens_details.reasoning_tokens == 50
    body = json.loads(ok.text)
    assert body["choices"][0]["message"]["content"] in ("A", "B") and body["system_fingerprint"] == "fp_fake0001"
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 192
    assert ok.headers["x-ratelimit-remaining-requests"].isdigit() and ok.headers["x-request-id"].startswith("req_")
    assert chat.choices[0].message.content in ("A", "B")  # a chat model takes all of these


def test_fake_anthropic_versions_errors_and_headers():
    msgs = [{"role": "user", "content": "Respond solely with A or B"}]

    async def go(url):
        new = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0)
        old = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0,
                                       default_headers={"anthropic-version": "2023-06-01"})
        out = {}
        with pytest.raises(anthropic.BadRequestError) as e:
            await new.messages.create(model="claude-sonnet-4-6", max_tokens=8, messages=msgs,
                                      extra_body={"temperature": 1.0})
        out["new_temperature"] = e.value.body
        with pytest.raises(anthropic.BadRequestError) as e:
            await old.messages.create(model="claude-sonnet-4-6", max_tokens=8, messages=msgs,
                                      extra_body={"temperature": 0.5, "top_p": 0.9})
        out["both"] = e.value.body
        out["old_ok"] = await old.messages.create(model="claude-sonnet-4-6", max_tokens=8, messages=msgs,
                                                  extra_body={"temperature": 0.5, "top_k": 5})
        out["older_model_both"] = await old.messages.create(model="claude-3-haiku-20240307", max_tokens=8,
                                                            messages=msgs, extra_body={"temperature": 0.5, "top_p": 0.9})
        raw = await new.messages.with_raw_response.create(model="claude-haiku-4-5", max_tokens=8, messages=msgs)
        out["headers"], out["raw"] = raw.headers, json.loads(await raw.text())
        out["thinking"] = await new.messages.create(model="claude-thinker", max_tokens=100, messages=msgs)
        with pytest.raises(anthropic.BadRequestError) as e:
            await new.messages.create(model="claude-haiku-4-5", max_tokens=8, messages=msgs, extra_body={"seed": 1})
        out["seed"] = e.value.body
        bad = anthropic.AsyncAnthropic(api_key="sk-wrong-key-00000", base_url=url, max_retries=0)
        with pytest.raises(anthropic.AuthenticationError) as e:
            await bad.messages.create(model="claude-haiku-4-5", max_tokens=8, messages=msgs)
        out["auth"] = e.value.body
        for c in (new, old, bad):
            await c.close()
        return out

    with FakeAnthropic(api_key=KEY) as srv:
        out = _run_sdk(go(srv.url))
        srv.fault_rate, srv.faults = 1.0, ("529",)

        async def overloaded(url):
            c = anthropic.AsyncAnthropic(api_key=KEY, base_url=url, max_retries=0)
            with pytest.raises(anthropic.APIStatusError) as e:
                await c.messages.create(model="claude-haiku-4-5", max_tokens=8, messages=msgs)
            await c.close()
            return e.value

        e529 = _run_sdk(overloaded(srv.url))
    assert out["new_temperature"]["error"] == {"type": "invalid_request_error",
                                               "message": "temperature: Extra inputs are not permitted"}
    assert out["both"]["error"]["message"] == ("`temperature` and `top_p` cannot both be specified for this model. "
                                               "Please use only one.")
    assert out["old_ok"].content[0].text in ("A", "B") and out["older_model_both"].stop_reason == "end_turn"
    assert out["raw"]["type"] == "message" and out["raw"]["id"].startswith("msg_")
    assert out["headers"]["request-id"].startswith("req_")
    assert int(out["headers"]["anthropic-ratelimit-requests-remaining"]) > 0
    assert [b.type for b in out["thinking"].content] == ["thinking"] and out["thinking"].stop_reason == "max_tokens"
    assert out["seed"]["error"]["message"] == "seed: Extra inputs are not permitted"
    assert out["auth"]["error"]["type"] == "authentication_error"
    assert e529.status_code == 529 and e529.body["error"]["type"] == "overloaded_error"
    assert e529.response.headers["retry-after"] == "1" and e529.body["request_id"].startswith("req_")


# ------------------------------------------------------------------ what moralkit sends
def test_openai_requests_carry_only_what_was_set_or_the_survey_needs(tmp_path):
    with FakeOpenAI() as srv:
        run_psm(OpenAIBackend("fake-chat", base_url=srv.url, api_key_env="PROVIDER_KEY"), tmp_path / "chat", limit=2,
                progress=False)
        chat = [set(b) for b in srv.bodies("/chat/completions")]
        n = len(srv.requests)
        run_psm(OpenAIBackend("fake-chat", base_url=srv.url, api_key_env="PROVIDER_KEY"), tmp_path / "p", limit=1,
                sampling=Sampling(top_p=0.9), progress=False)
        top_p = [b.get("top_p") for b in srv.bodies("/chat/completions")[n:]]
        n = len(srv.requests)
        b = OpenAIBackend("o4-mini", base_url=srv.url, api_key_env="PROVIDER_KEY")
        run_psm(b, tmp_path / "o4", limit=2, sampling=Sampling(max_tokens=4000, reasoning_effort="low"), progress=False)
        reasoning = srv.bodies("/chat/completions")[n:]
    assert chat and all(k == {"model", "messages", "temperature", "max_tokens", "seed"} for k in chat)  # no top_p
    assert top_p and all(v == 0.9 for v in top_p)
    # a reasoning model (by its name): max_completion_tokens, no temperature at its only value 1, the effort
    assert all(set(r) == {"model", "messages", "max_completion_tokens", "reasoning_effort", "seed"} for r in reasoning)
    assert {r["reasoning_effort"] for r in reasoning} == {"low"} and b.reasoning
    # the manifest records exactly what was sent
    sent = _manifest(tmp_path / "o4")["sessions"][-1]["sent"]
    assert sum(e["requests"] for e in sent) == len(reasoning)
    assert all(set(e["params"]) == {"model", "max_completion_tokens", "reasoning_effort", "seed"} for e in sent)
    assert all(a["reasoning_tokens"] == 64 for a in _attempts(tmp_path / "o4"))


def test_top_k_is_sent_where_accepted_and_refused_for_openais_api(tmp_path, monkeypatch):
    """Issue 26 defect: ``--top-k`` was written to the manifest but never sent."""
    with FakeOpenAI(accepts_top_k=True) as srv:
        status = cli.main([str(a) for a in _openai_args(srv, "fake-chat", tmp_path / "k", "--limit", "2", "--top-k", "40")])
        bodies = srv.bodies("/chat/completions")
    assert status == 0 and bodies and all(b["top_k"] == 40 for b in bodies)
    assert _manifest(tmp_path / "k")["sessions"][-1]["sent"][0]["params"]["top_k"] == 40
    # OpenAI's own API has no top_k: refused before any request and before the run directory exists
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(MoralkitError, match="OpenAI's API has no top_k"):
        run_psm(OpenAIBackend("gpt-4.1-mini"), tmp_path / "openai", sampling=Sampling(top_k=40), progress=False)
    assert not (tmp_path / "openai").exists()


def test_system_fingerprint_and_response_id_are_recorded_per_answer(tmp_path):
    """Issue 26 defect: ``system_fingerprint`` was not recorded, though seeded answers repeat only while it does."""
    with FakeOpenAI(latency=lambda path, body: 0.0) as srv:
        b = OpenAIBackend("gpt-4.1-mini", base_url=srv.url, api_key_env="PROVIDER_KEY", concurrency=1)
        run_psm(b, tmp_path / "run", limit=2, progress=False)
        srv.fingerprint = "fp_fake0002"  # the provider changed its backend between two sessions
        run_psm(b, tmp_path / "run", limit=4, progress=False)
        ids = [rid for rid, _ in srv.usable]
    att = _attempts(tmp_path / "run")
    assert [a["system_fingerprint"] for a in att] == ["fp_fake0001"] * 3 + ["fp_fake0002"] * 2
    assert [a["response_id"] for a in att] == ids
    assert all(a["reasoning_tokens"] == 0 for a in att)


def test_max_tokens_switches_once_to_max_completion_tokens_and_records_why(tmp_path):
    """A reasoning model whose name gives nothing away (a gateway alias): the documented 400 teaches the backend."""
    with FakeOpenAI() as srv:
        b = OpenAIBackend("house-reasoner", base_url=srv.url, api_key_env="PROVIDER_KEY")
        assert not b.reasoning and b.token_param == "max_tokens"
        run_psm(b, tmp_path / "run", limit=3, sampling=Sampling(max_tokens=2000), progress=False)
        bodies = srv.bodies("/chat/completions")
    assert [("max_tokens" in x) for x in bodies] == [True] + [False] * (len(bodies) - 1)
    assert b.token_param == "max_completion_tokens" and b.reasoning
    man = _manifest(tmp_path / "run")["sessions"][-1]
    assert man["adaptations"][0]["changed"] == "max_tokens -> max_completion_tokens"
    assert "Use 'max_completion_tokens' instead" in man["adaptations"][0]["because"]
    assert {e["requests"] for e in man["sent"] if "max_tokens" in e["params"]} == {1}
    assert not [r for r in read_records(tmp_path / "run") if r["kind"] == "error"]  # re-sent, not an error
    assert psm_quality(tmp_path / "run")["answered"] == 3


def test_default_budget_of_a_reasoning_model_leaves_room_for_its_reasoning(tmp_path):
    with FakeOpenAI() as srv:
        run_psm(OpenAIBackend("gpt-5-mini", base_url=srv.url, api_key_env="PROVIDER_KEY"), tmp_path / "run",
                limit=2, progress=False)
        budgets = {b["max_completion_tokens"] for b in srv.bodies("/chat/completions")}
    assert budgets == {REASONING_MAX_TOKENS}
    assert _manifest(tmp_path / "run")["sampling"]["max_tokens"] == REASONING_MAX_TOKENS
    assert psm_quality(tmp_path / "run")["answered"] == 2


# ------------------------------------------------------------------ honest failure
def test_a_refused_parameter_stops_at_once_names_it_and_the_flag_and_the_fixed_command_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeOpenAI() as srv:
        status, stdout, err = _cli(capsys, *_openai_args(srv, "o4-mini", out, "--limit", "3", "--temperature", "0.5"))
        n = len(srv.bodies("/chat/completions"))
        assert status == 2 and n == 1  # one request, no retries
        assert "'temperature'" in err and "change it with --temperature" in err
        assert "Only the default (1) value is supported" in err
        # the same command with the flag fixed, in the same run directory (it holds no answer yet)
        status, stdout, err = _cli(capsys, *_openai_args(srv, "o4-mini", out, "--limit", "3"))
    assert status == 0, err
    assert "complete: 4/4 rounds (incl. round 0) done" in stdout
    man = _manifest(out)
    assert man["sampling"]["temperature"] == 1.0
    assert man["sessions"][-1]["replaced_identity"]["sampling"]["temperature"] == 0.5


def test_an_empty_answer_at_the_budget_is_status_length_and_counted(tmp_path, capsys):
    with FakeOpenAI() as srv:
        status, stdout, err = _cli(capsys, *_openai_args(srv, "o4-mini", tmp_path / "run", "--limit", "2",
                                                         "--max-tokens", "100"))
    assert status == 0, err
    q = psm_quality(tmp_path / "run")
    assert q["status"] == {"length": 3 * 3} and q["answered"] == 0  # round 0 (budget 100) and two rounds, 3 tries
    assert "9 answers empty at the output budget (status length: raise --max-tokens" in stdout
    att = _attempts(tmp_path / "run")
    assert all(a["finish_reason"] == "length" and a["raw"] == "" and a["reasoning_tokens"] == 100 for a in att)


def test_a_budget_spent_on_reasoning_every_time_stops_the_session(tmp_path, capsys):
    with FakeOpenAI() as srv:
        status, stdout, err = _cli(capsys, *_openai_args(srv, "o4-mini", tmp_path / "run", "--limit", "20",
                                                         "--max-tokens", "50"))
        n = len(srv.bodies("/chat/completions"))
    assert status == 2
    assert "25 answers in a row were empty at the output budget" in err and "raise --max-tokens" in err
    assert n <= 3 + 25 + 2  # round 0's three tries, then 25 in a row (plus the one still in flight)


def test_rejected_parameters_are_read_from_either_providers_errors():
    assert rejected_parameters({"param": "top_p", "message": "x"}) == ["top_p"]
    assert rejected_parameters(None, "Unrecognized request argument supplied: top_k") == ["top_k"]
    assert rejected_parameters(None, "output_config.effort: Input should be 'low'") == ["output_config"]
    assert rejected_parameters(None, "Something else went wrong") == []


# ------------------------------------------------------------------ the native Anthropic backend
def test_anthropic_psm_via_the_command_line(tmp_path, capsys):
    out = tmp_path / "run"
    with FakeAnthropic(api_key=KEY) as srv:
        status, stdout, err = _cli(capsys, *_anthropic_args(srv, "claude-sonnet-4-6", out, "--limit", "5",
                                                            "--system", "Answer briefly."))
        bodies = srv.bodies("/v1/messages")
        versions = {r["headers"]["anthropic-version"] for r in srv.requests}
        ids = [rid for rid, _ in srv.usable]
    assert status == 0, err
    assert "complete: 6/6 rounds (incl. round 0) done" in stdout
    # 2026-10-21: no sampling parameters, the system message at the top level, never a seed
    assert versions == {"2026-10-21"}
    assert all(set(b) == {"model", "messages", "max_tokens", "system"} for b in bodies)
    assert all(b["system"] == "Answer briefly." and [m["role"] for m in b["messages"]] == ["user"] for b in bodies)
    att = _attempts(out)
    assert sorted(a["response_id"] for a in att) == sorted(ids)
    assert {a["finish_reason"] for a in att} == {"end_turn"} and "system_fingerprint" not in att[0]
    man = _manifest(out)
    assert man["backend"] == "anthropic" and man["backend_info"]["api_version"] == "2026-10-21"
    assert man["backend_info"]["send_seed"] is False and man["backend_info"]["sampling_sent"] is False
    assert KEY not in (out / "manifest.json").read_text()


def test_anthropic_sampling_is_refused_or_sent_by_api_version(tmp_path, capsys):
    with FakeAnthropic(api_key=KEY) as srv:
        # the SDK's version takes no temperature: refused before the run directory exists
        status, _, err = _cli(capsys, *_anthropic_args(srv, "claude-sonnet-4-6", tmp_path / "a", "--temperature", "0.5"))
        assert status == 2 and "--anthropic-version 2023-06-01" in err and not (tmp_path / "a").exists()
        status, _, err = _cli(capsys, *_anthropic_args(srv, "claude-sonnet-4-6", tmp_path / "b", "--anthropic-version",
                                                       "2023-06-01", "--temperature", "0.5", "--top-p", "0.9"))
        assert status == 2 and "not both" in err and not srv.requests
        status, _, err = _cli(capsys, *_anthropic_args(srv, "claude-sonnet-4-6", tmp_path / "c", "--anthropic-version",
                                                       "2023-06-01", "--top-p", "0.9", "--top-k", "20", "--limit", "2"))
        assert status == 0, err
        top_p = srv.bodies("/v1/messages")
        n = len(srv.requests)
        status, _, err = _cli(capsys, *_anthropic_args(srv, "claude-sonnet-4-6", tmp_path / "d", "--anthropic-version",
                                                       "2023-06-01", "--temperature", "0.3", "--limit", "2"))
        assert status == 0, err
        temp = srv.bodies("/v1/messages")[n:]
    # never temperature and top_p together
    assert all(b["top_p"] == 0.9 and b["top_k"] == 20 and "temperature" not in b for b in top_p)
    assert all(b["temperature"] == 0.3 and "top_p" not in b for b in temp)


def test_anthropic_refusal_names_the_parameter_and_flag(tmp_path, capsys):
    with FakeAnthropic(api_key=KEY) as srv:
        status, _, err = _cli(capsys, *_anthropic_args(srv, "claude-sonnet-4-6", tmp_path / "run",
                                                       "--reasoning-effort", "extreme", "--limit", "2"))
        n = len(srv.requests)
    assert status == 2 and n == 1
    assert "the server rejected 'output_config'; change it with --reasoning-effort" in err
    assert "change what the message names and re-run" in err


def test_anthropic_budget_spent_before_any_text_is_status_length(tmp_path):
    with FakeAnthropic(api_key=KEY, thinking_tokens=300) as srv:
        b = make_backend("anthropic", "claude-thinker", base_url=srv.url, api_key_env="PROVIDER_KEY")
        run_psm(b, tmp_path / "run", limit=1, progress=False)
    att = _attempts(tmp_path / "run")
    assert {a["status"] for a in att} == {"length"} and {a["finish_reason"] for a in att} == {"max_tokens"}


def test_make_backend_anthropic_info_and_key():
    b = make_backend("anthropic", "claude-haiku-4-5", base_url="http://127.0.0.1:9", api_key_env="PROVIDER_KEY")
    assert isinstance(b, AnthropicBackend) and b.secrets() == [KEY]
    assert b.info()["backend"] == "anthropic" and b.info()["anthropic"] == anthropic.__version__
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        import os

        os.environ.pop("ANTHROPIC_API_KEY", None)
        AnthropicBackend("claude-haiku-4-5")


def test_reasoning_effort_keeps_old_runs_identical_and_is_refused_by_local_models():
    from moralkit.collect.backends import TransformersBackend

    assert "reasoning_effort" not in Sampling().to_dict()  # a run recorded before the field is the same run
    assert Sampling(reasoning_effort="low").to_dict()["reasoning_effort"] == "low"
    with pytest.raises(ValueError, match="reasoning_effort must be a word"):
        Sampling(reasoning_effort="sk-not a word")
    with pytest.raises(MoralkitError, match="local transformers models take none"):
        TransformersBackend.check_sampling(None, Sampling(reasoning_effort="low"))


# ------------------------------------------------------------------ the README table's OpenAI-compatible rows
@pytest.mark.parametrize("profile", ["gemini", "openrouter", "together", "vllm", "ollama", "llamacpp"])
def test_what_moralkit_sends_each_openai_compatible_provider_is_accepted(tmp_path, profile):
    """For each OpenAI-compatible row of the provider table, a fake that refuses any field the provider
    does not document (:mod:`moralkit.testing.fake_compatible`) accepts every request of a PSM and a
    MoralChoice collection as moralkit sends them by default (through the official ``openai`` SDK, at the
    documented base-URL path). ``--top-k`` is accepted where the provider documents ``top_k`` and refused at
    once, naming the flag, where it does not."""
    import warnings

    import moralkit.moralchoice as mc
    from moralkit.collect.moralchoice import run_moralchoice
    from moralkit.testing.fake_compatible import PROFILES, FakeCompatible

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sid = mc.load_scenarios("low")["scenario_id"].iloc[0]
    with FakeCompatible(profile) as srv:
        assert srv.url.endswith(PROFILES[profile].prefix)

        def backend():
            return OpenAIBackend("fake-chat", base_url=srv.url, api_key_env="PROVIDER_KEY", backoff=0.01)

        ds = run_psm(backend(), tmp_path / "psm", limit=2, progress=False)
        run_moralchoice(backend(), tmp_path / "mc", ambiguity="low", scenarios=[sid], samples=2, progress=False)
        statuses = [r["path"] for r in srv.requests]
        bodies = srv.bodies("/chat/completions")
        assert len(bodies) == 3 + 6 * 2 and len(srv.usable) == len(bodies)  # every request answered, none refused
        assert ds.n_rounds == 2 and all("top_p" not in b and "top_k" not in b for b in bodies)
        assert all(p == PROFILES[profile].prefix + "/chat/completions" for p in statuses)
        top_k = Sampling(top_k=40)
        if "top_k" in PROFILES[profile].fields:
            run_psm(backend(), tmp_path / "k", limit=1, sampling=top_k, progress=False)
            assert srv.bodies("/chat/completions")[-1]["top_k"] == 40
        else:
            with pytest.raises(MoralkitError, match="--top-k"):
                run_psm(backend(), tmp_path / "k", limit=1, sampling=top_k, progress=False)


@pytest.mark.parametrize("make, message", [
    (lambda: OpenAIBackend("m", base_url="http://127.0.0.1:9", concurrency=2.5), r"concurrency must be an integer, got 2\.5"),
    (lambda: OpenAIBackend("m", base_url="http://127.0.0.1:9", concurrency=0), "concurrency must be an integer >= 1, got 0"),
    (lambda: OpenAIBackend("m", base_url="http://127.0.0.1:9", rpm=True), r"rpm must be an integer, got True \(bool\)"),
    (lambda: OpenAIBackend("m", base_url="http://127.0.0.1:9", max_retries=-1), "max_retries must be an integer >= 0"),
    (lambda: OpenAIBackend("m", base_url="http://127.0.0.1:9", max_tokens_param="max_new_tokens"),
     "max_tokens_param must be one of 'auto', 'max_tokens', 'max_completion_tokens', got 'max_new_tokens'"),
    (lambda: Sampling(max_tokens=2.5), r"max_tokens must be an integer, got 2\.5"),
    (lambda: Sampling(top_k=-1), "top_k must be an integer >= 0, got -1"),
])
def test_backend_options_are_checked_by_the_shared_checks(make, message):
    """Issue 29: the backends' integer and one-of options go through moralkit.checks (a float concurrency or
    token cap was truncated before); each error names the option and what it takes."""
    with pytest.raises(MoralkitError, match=message):
        make()


def test_collection_options_are_checked_by_the_shared_checks():
    from moralkit.collect.cost import CostMeter, survey_parts
    from moralkit.collect.likelihood_run import scoring_order
    from moralkit.collect.logprob_api import logprob_request
    from moralkit.collect.tokens import TokenCounter

    with pytest.raises(MoralkitError, match=r"top_logprobs must be an integer <= 20, got 21"):
        logprob_request({}, "ab", 0, "m", top_logprobs=21)
    with pytest.raises(MoralkitError, match=r"--tpm \(tokens per minute\) must be an integer, got 0\.5"):
        CostMeter(tpm=0.5)
    with pytest.raises(MoralkitError, match="survey must be one of 'psm', 'moralchoice', 'paper', got 'mc'"):
        survey_parts("mc", TokenCounter())
    with pytest.raises(MoralkitError, match="order must be one of 'overlap-first', 'table', got 'random'"):
        scoring_order(None, None, order="random")
