"""The batch test double answers a malformed or truncated body as the providers do (HTTP 400), not with a traceback.

A client killed mid-request leaves the server a truncated body; the real APIs answer such a request with
400 ``invalid_request_error`` (OpenAI: ``{"error": {...}}``; Anthropic: ``{"type": "error", "error": {...}}``).
Driven through the official SDKs' low-level ``post`` with a raw body.
"""

import anthropic
import openai
import pytest

from moralkit.testing.fake_batches import FakeBatchServer


@pytest.mark.parametrize("body", [b"", b'{"input_file_id": "file-1", "endp'])
def test_openai_batches_truncated_body_is_a_400(body):
    with FakeBatchServer() as srv:
        client = openai.OpenAI(base_url=srv.openai_url, api_key="sk-test", max_retries=0)
        with pytest.raises(openai.BadRequestError) as e:
            client.post("/batches", cast_to=object, content=body, options={"headers": {"Content-Type": "application/json"}})
        assert e.value.status_code == 400
        assert e.value.body["type"] == "invalid_request_error"
        assert "could not parse the request body" in e.value.body["message"]


def test_anthropic_message_batches_truncated_body_is_a_400():
    with FakeBatchServer() as srv:
        client = anthropic.Anthropic(base_url=srv.anthropic_url, api_key="sk-ant-test", max_retries=0)
        with pytest.raises(anthropic.BadRequestError) as e:
            client.post("/v1/messages/batches", cast_to=object, content=b'{"requests": [',
                        options={"headers": {"Content-Type": "application/json"}})
        assert e.value.status_code == 400
        assert e.value.body["type"] == "error"
        assert e.value.body["error"]["type"] == "invalid_request_error"
