# SPDX-License-Identifier: MIT
"""Every answer the SDKs receive, checked against the SDKs' own pydantic types, strictly.

The SDKs' models accept unknown fields (extra="allow") and the SDKs parse leniently, so a missing
required field or an answer in the wrong shape can go unnoticed until a strict client (another
language's SDK, a typed agent framework) fails on it. Validating transport sits under the openai
and anthropic clients (http_client=...): it reads each response whole (streams too), validates the
JSON body or every SSE event with pydantic in strict mode against the type the SDK documents for
that route, and fails the test on

- a required field missing or a value of the wrong type or literal (pydantic's strict mode);
- a field the type does not name, anywhere in the tree, unless it is one of EXTENSIONS (the
  fields Decapybara adds on purpose, documented in docs/API.md).

Then it hands the SDK the same bytes. `checked` counts the bodies and events validated."""
import json
import types
import typing

import pydantic

try:  # the HTTP library the pinned SDKs are built on (httpx2; httpx before)
    import httpx2 as httpx
except ImportError:
    import httpx

import anthropic.types as at
import openai.types as ot
import openai.types.chat as oc
import openai.types.responses as orr
from openai.types.shared import ErrorObject

# Fields Decapybara sends beyond the SDKs' types (docs/API.md): the reasoning text of Chat
# Completions (as vLLM and DeepSeek send it) and the context length of the served model.
EXTENSIONS = {"reasoning_content", "context_length", "max_model_len"}


class StrictnessError(AssertionError):
    pass


def _extras(value, path):
    """Paths of the fields a validated value holds that its types do not name."""
    if isinstance(value, pydantic.BaseModel):
        for name in (value.model_extra or {}):
            if name not in EXTENSIONS:
                yield f"{path}.{name}"
        for name in type(value).model_fields:
            yield from _extras(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _extras(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _extras(item, f"{path}.{key}")


_adapters = {}


def _union_member(kind, obj):
    """The member of a union of event or block types whose `type` literal is obj["type"], so that
    an error names that one type instead of every member."""
    while typing.get_origin(kind) is typing.Annotated:
        kind = typing.get_args(kind)[0]
    if typing.get_origin(kind) not in (typing.Union, types.UnionType) or not isinstance(obj, dict):
        return kind
    for member in typing.get_args(kind):
        field = getattr(member, "model_fields", {}).get("type")
        if field is not None and obj.get("type") in typing.get_args(field.annotation):
            return member
    raise StrictnessError(f"no type in the SDK's union is named {obj.get('type')!r}: {obj}")


def validate(kind, obj, what="answer"):
    """Validates one JSON value against a type (a pydantic model or a typing union) strictly."""
    kind = _union_member(kind, obj)
    adapter = _adapters.setdefault(kind, pydantic.TypeAdapter(kind))
    try:
        value = adapter.validate_json(json.dumps(obj), strict=True)
    except pydantic.ValidationError as e:
        raise StrictnessError(f"{what} is not a valid {getattr(kind, '__name__', kind)}: {e}\n{obj}") from None
    unknown = list(_extras(value, "$"))
    if unknown:
        raise StrictnessError(f"{what} has fields that {getattr(kind, '__name__', kind)} does not name: "
                              f"{unknown}\n{obj}")
    return value


def _sse_events(body):
    """(event name or None, data text) of each event of an SSE body."""
    for block in body.decode().replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        if data:
            yield event, "\n".join(data)


class _CompletionChunkChoice(ot.CompletionChoice):
    finish_reason: typing.Optional[typing.Literal["stop", "length", "content_filter"]]


class _CompletionChunk(ot.Completion):
    """The SDK parses legacy completion stream chunks as Completion, whose finish_reason may not
    be null; OpenAI sends null in every chunk but the last, and so do we. Only that differs."""
    choices: list[_CompletionChunkChoice]


class _AnthropicModelPage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    data: list[at.ModelInfo]
    has_more: bool
    first_id: str | None
    last_id: str | None


class _OpenAIModelPage(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    object: str
    data: list[ot.Model]


class _OpenAIError(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    error: ErrorObject


def _types(method, path, anthropic_client, stream):
    """(type of a plain answer, type of a stream event) for a route."""
    if path == "/v1/chat/completions":
        return oc.ChatCompletion, oc.ChatCompletionChunk
    if path == "/v1/completions":
        return ot.Completion, _CompletionChunk
    if path == "/v1/responses":
        return orr.Response, orr.ResponseStreamEvent
    if path == "/v1/messages":
        return at.Message, at.RawMessageStreamEvent
    if path == "/v1/messages/count_tokens":
        return at.MessageTokensCount, None
    if path == "/v1/models":
        return (_AnthropicModelPage if anthropic_client else _OpenAIModelPage), None
    if path.startswith("/v1/models/"):
        return (at.ModelInfo if anthropic_client else ot.Model), None
    return None, None


class ValidatingTransport(httpx.BaseTransport):
    def __init__(self):
        self.inner = httpx.HTTPTransport()
        self.checked = 0

    def handle_request(self, request):
        response = self.inner.handle_request(request)
        body = response.read()
        anthropic_client = "anthropic-version" in request.headers
        streaming = response.headers.get("content-type", "").startswith("text/event-stream")
        plain, event_type = _types(request.method, request.url.path, anthropic_client, streaming)
        where = f"{request.method} {request.url.path} {response.status_code}"
        if response.status_code >= 400:
            validate(at.ErrorResponse if anthropic_client else _OpenAIError, json.loads(body), where)
            self.checked += 1
        elif streaming:
            for event, data in _sse_events(body):
                if data == "[DONE]" or event == "ping":
                    continue
                obj = json.loads(data)
                if event == "error" and anthropic_client:
                    validate(at.ErrorResponse, obj, f"{where} error event")
                elif "error" in obj and event is None:
                    validate(_OpenAIError, obj, f"{where} error event")
                else:
                    validate(event_type, obj, f"{where} event {event or obj.get('object')}")
                    if event is not None and obj.get("type") != event:
                        raise StrictnessError(f"{where}: event {event} carries type {obj.get('type')}")
                self.checked += 1
        elif plain is not None:
            validate(plain, json.loads(body), where)
            self.checked += 1
        return httpx.Response(response.status_code, headers=response.headers, content=body,
                              request=request, extensions=response.extensions)


def clients(url, api_key="unused"):
    """(openai client, anthropic client, transport) with every answer validated."""
    import anthropic
    import openai
    transport = ValidatingTransport()
    oai = openai.OpenAI(base_url=url + "/v1", api_key=api_key, max_retries=0,
                        http_client=openai.DefaultHttpxClient(transport=transport))
    ant = anthropic.Anthropic(base_url=url, api_key=api_key, max_retries=0,
                              http_client=anthropic.DefaultHttpxClient(transport=transport))
    return oai, ant, transport
