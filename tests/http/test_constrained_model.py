#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Constrained decoding end to end: the real engine serving a model on the CPU backend, the
official SDKs as clients. Every case of tests/text/constrained-cases.json (schemas from the SDK
docs, pydantic and LangChain shapes, agent tools) x 2 seeds at temperature 1 x each max_tokens
budget, each through one of the APIs in turn (Chat Completions response_format json_schema strict
/ json_object, the Responses API's text.format, Anthropic's output_config.format; tool_choice
required or named in Chat Completions, any or tool in Anthropic's Messages): every answer must end
by itself within the budget (finish_reason stop / tool_calls, stop_reason end_turn / tool_use)
and its JSON (or each tool call's arguments) must parse and validate with jsonschema. A budget
that the case's shortest answer cannot fit is refused up front with a 400 naming max_tokens:
counted, not failed. Then the SDK's chat.completions.parse() with a pydantic model, and
LangChain's with_structured_output when LangChain is installed.

usage: test_constrained_model.py [MODEL [CASES [MAX_TOKENS...]]]: MODEL defaults to the demo
model (Qwen3.5 template: thinking first, XML tool calls; a small vocabulary), CASES (a count) to
every case, MAX_TOKENS to 800. With the tiny model (random weights: only the mask keeps an answer
valid; Qwen3's 151K vocabulary and template: JSON tool calls) a free string ends only where the
budget closes it, so that run uses small budgets. Exit 77 (skip) when the SDKs or jsonschema
cannot be imported."""
import concurrent.futures
import json
import os
import sys

try:
    import anthropic
    import jsonschema
    import openai
    import pydantic
except ImportError as e:
    print(f"skipping: {e}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_fixture import Engine  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "..", "text", "constrained-cases.json")
SEEDS = (1, 2)
MAX_TOKENS = 800
ASK = [{"role": "user", "content": "Answer in the requested format."}]


def anthropic_tool(tool):
    f = tool["function"]
    return {"name": f["name"], "description": f.get("description", ""),
            "input_schema": f.get("parameters", {"type": "object"})}


def run_schema(oai, ant, case, seed, api, max_tokens):
    """The answer's text for a schema case, through api; (text, finish)."""
    schema = case.get("schema")
    common = dict(model="m", max_tokens=max_tokens, temperature=1)
    if schema is None:
        r = oai.chat.completions.create(messages=ASK, seed=seed, response_format={"type": "json_object"}, **common)
        return r.choices[0].message.content, r.choices[0].finish_reason
    if api == 0:
        r = oai.chat.completions.create(messages=ASK, seed=seed, **common, response_format={
            "type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}})
        return r.choices[0].message.content, r.choices[0].finish_reason
    if api == 1:
        r = oai.responses.create(model="m", input=ASK[0]["content"], max_output_tokens=max_tokens, temperature=1,
                                 extra_body={"seed": seed},
                                 text={"format": {"type": "json_schema", "name": "answer", "schema": schema,
                                                  "strict": True}})
        return r.output_text, "stop" if r.status == "completed" else r.status
    r = ant.messages.create(messages=ASK, model="m", max_tokens=max_tokens, extra_body={
        "seed": seed, "temperature": 1, "output_config": {"format": {"type": "json_schema", "schema": schema}}})
    text = "".join(b.text for b in r.content if b.type == "text")
    return text, "stop" if r.stop_reason == "end_turn" else r.stop_reason


def run_tools(oai, ant, case, seed, api, max_tokens):
    """The tool calls of a tool case, through api: ([(name, arguments dict)], finish, text)."""
    choice = case["tool_choice"]
    common = dict(model="m", max_tokens=max_tokens, temperature=1)
    if api % 2 == 0:
        tc = "required" if choice == "required" else {"type": "function", "function": {"name": choice}}
        r = oai.chat.completions.create(messages=ASK, seed=seed, tools=case["tools"], tool_choice=tc, **common)
        m = r.choices[0].message
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in (m.tool_calls or [])]
        return calls, r.choices[0].finish_reason, m.content or ""
    tc = {"type": "any"} if choice == "required" else {"type": "tool", "name": choice}
    r = ant.messages.create(messages=ASK, tools=[anthropic_tool(t) for t in case["tools"]], tool_choice=tc,
                            model="m", max_tokens=max_tokens, extra_body={"seed": seed, "temperature": 1})
    calls = [(b.name, b.input) for b in r.content if b.type == "tool_use"]
    text = "".join(b.text for b in r.content if b.type == "text")
    return calls, "tool_calls" if r.stop_reason == "tool_use" else r.stop_reason, text


def check(oai, ant, case, seed, api, max_tokens):
    """None when the answer holds, "refused" for a 400 naming max_tokens, else what is wrong."""
    where = f"{case['name']} seed {seed} api {api} max_tokens {max_tokens}"
    try:
        if "tools" in case:
            calls, finish, text = run_tools(oai, ant, case, seed, api, max_tokens)
            if finish != "tool_calls" or not calls or text.strip():
                return f"{where}: finish {finish}, calls {calls}, text {text!r}"
            tools = {t["function"]["name"]: t["function"] for t in case["tools"]}
            if case["tool_choice"] != "required" and [n for n, _ in calls] != [case["tool_choice"]]:
                return f"{where}: not one call of {case['tool_choice']}: {calls}"
            for name, args in calls:
                if name not in tools:
                    return f"{where}: unknown tool {name}"
                jsonschema.validate(args, tools[name].get("parameters", {"type": "object"}))
            return None
        text, finish = run_schema(oai, ant, case, seed, api, max_tokens)
        if finish != "stop":
            return f"{where}: finish {finish} after {text[:200]!r}"
        value = json.loads(text)
        jsonschema.validate(value, case.get("schema", {"type": "object"}))
        return None
    except (openai.BadRequestError, anthropic.BadRequestError) as e:
        if "max_tokens" in str(e) and "too few" in str(e):
            return "refused"
        return f"{where}: {type(e).__name__}: {str(e)[:300]}"
    except Exception as e:  # noqa: BLE001 (any failure is reported with its case)
        return f"{where}: {type(e).__name__}: {str(e)[:300]}"


class Weather(pydantic.BaseModel):
    city: str
    celsius: float
    conditions: list[str]
    windy: bool


def check_parse_helper(oai, max_tokens):
    """The SDK's parse() with a pydantic model: every seed's answer parses into the model (a
    LengthFinishReasonError would mean the budget cut it)."""
    for seed in range(5, 9):
        r = oai.chat.completions.parse(model="m", messages=ASK, seed=seed, temperature=1,
                                       max_tokens=max_tokens, response_format=Weather)
        parsed = r.choices[0].message.parsed
        assert isinstance(parsed, Weather), r
        print(f"parse() within {max_tokens} tokens: {parsed!r}"[:200])


def check_langchain(url, max_tokens):
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:
        print("LangChain's with_structured_output: langchain_openai is not installed, skipped")
        return
    for seed in (3, 4):
        llm = ChatOpenAI(base_url=url + "/v1", api_key="none", model="m", temperature=1, seed=seed,
                         max_tokens=max_tokens)
        out = llm.with_structured_output(Weather).invoke("Weather?")
        assert isinstance(out, Weather), out
        print(f"with_structured_output within {max_tokens} tokens: {out!r}"[:200])


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("DECAPYBARA_DEMO_MODEL",
                                                                 "build/data/demo-model/demo.mcapy")
    if not os.path.exists(model):
        print(f"skipping: no model at {model}")
        return 77
    with open(CASES) as f:
        cases = json.load(f)
    if len(sys.argv) > 2 and sys.argv[2] != "all":
        cases = cases[:int(sys.argv[2])]
    budgets = [int(b) for b in sys.argv[3:]] or [MAX_TOKENS]
    engine = Engine("--threads", "2", "--conversations", "4", model=model)
    failures = []
    try:
        oai = openai.OpenAI(base_url=engine.url + "/v1", api_key="none", max_retries=0, timeout=600)
        ant = anthropic.Anthropic(base_url=engine.url, api_key="none", max_retries=0, timeout=600)
        jobs = [(case, seed, (i * len(SEEDS) + k + b) % 3, max_tokens)
                for b, max_tokens in enumerate(budgets) for i, case in enumerate(cases)
                for k, seed in enumerate(SEEDS)]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda j: check(oai, ant, *j), jobs))
        failures = [r for r in results if r not in (None, "refused")]
        for r in failures:
            print("FAIL", r)
        n_refused = results.count("refused")
        print(f"{results.count(None)} of {len(jobs) - n_refused} answers ({len(cases)} cases x {len(SEEDS)} seeds x "
              f"max_tokens {budgets}) end within their budget, parse and validate; {n_refused} more refused "
              f"with a 400 naming max_tokens (the shortest answer does not fit)")
        if n_refused * 2 > len(jobs):
            failures.append("most requests refused")
        check_parse_helper(oai, max(budgets))
        check_langchain(engine.url, max(budgets))
    finally:
        status = engine.stop()
        if status != 0:
            print(engine.log_text())
            failures.append(f"engine exit status {status}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
