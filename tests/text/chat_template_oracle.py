#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Chat template conformance: every case in tests/data/chat-cases rendered with every template
(tests/data/chat-templates/*.jinja and Qwen3's tokenizer_config.json) by Python jinja2, set up as
transformers' apply_chat_template sets it up, and by Decapybara's render-chat; the outputs must be
byte-identical. Where jinja2 raises, render-chat must fail too, and for the template's own
raise_exception() with the same message.

One step comes before transformers' rendering, as in Decapybara: for a template that takes
content only as a string (it renders a user turn given as a string, but not the same turn given
as one text part the same way), every content that is a list of text parts only is joined with
newlines. This file decides that with jinja2 on its own, so the C code's decision is checked too.

    chat_template_oracle.py RENDER_CHAT DATA_DIR      the test (exit 0 only with zero differences)
    chat_template_oracle.py --render TEMPLATE CASE    print jinja2's rendering of one case
"""

import datetime
import difflib
import glob
import json
import os
import subprocess
import sys

try:
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed (pip install -r tests/requirements.txt): skipping")
    sys.exit(77)


class RaisedByTemplate(Exception):
    """What the template's raise_exception() raised (transformers raises TemplateError)."""


def load_template(path):
    with open(path, encoding="utf-8") as f:
        if path.endswith(".json"):
            return json.load(f)["chat_template"]
        return f.read()


def environment():
    # transformers.utils.chat_template_utils._compile_jinja_template
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


PROBE = "Decapybara content probe 7f3a"


def takes_strings(template):
    def probe(content):
        try:
            return template.render(messages=[{"role": "user", "content": content}], tools=None,
                                   documents=None, add_generation_prompt=True)
        except Exception:
            return None
    as_string = probe(PROBE)
    return as_string is not None and PROBE in as_string \
        and probe([{"type": "text", "text": PROBE}]) != as_string


def join_text_parts(messages):
    def joined(content):
        if not isinstance(content, list) or not all(
                isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                for p in content):
            return content
        return "\n".join(p["text"] for p in content)
    return [dict(m, content=joined(m["content"])) if isinstance(m, dict) and "content" in m else m
            for m in messages]


def render(source, case):
    """(output, None) or (None, (error message, raised by the template?))."""
    try:
        template = environment().from_string(source)
        messages = case["messages"]
        if takes_strings(template):
            messages = join_text_parts(messages)
        # apply_chat_template: special tokens, then the caller's kwargs, then the named variables
        variables = {"eos_token": "<|im_end|>"}
        variables.update(case.get("kwargs", {}))
        output = template.render(messages=messages, tools=case.get("tools"), documents=None,
                                 add_generation_prompt=case.get("add_generation_prompt", False),
                                 **variables)
        return output, None
    except jinja2.exceptions.TemplateError as e:
        raised = type(e) is jinja2.exceptions.TemplateError
        return None, (str(e), raised)
    except Exception as e:  # TypeError and the like, as transformers would see them
        return None, ("%s: %s" % (type(e).__name__, e), False)


def first_difference(want, got):
    lines = list(difflib.unified_diff(want.splitlines(True), got.splitlines(True), "jinja2",
                                      "render-chat", n=2))
    return "".join(lines[:40])


def main(argv):
    if len(argv) == 4 and argv[1] == "--render":
        with open(argv[3], encoding="utf-8") as f:
            out, err = render(load_template(argv[2]), json.load(f))
        print(out if err is None else "ERROR: %s" % err[0], end="")
        return 0
    if len(argv) != 3:
        print(__doc__)
        return 2
    render_chat, data = argv[1], argv[2]
    templates = sorted(glob.glob(os.path.join(data, "chat-templates", "*.jinja")))
    templates.append(os.path.join(data, "tokenizer", "qwen3", "tokenizer_config.json"))
    cases = sorted(glob.glob(os.path.join(data, "chat-cases", "*.json")))
    if not cases or len(templates) < 2:
        print("no cases or templates found under %s" % data)
        return 1
    loaded = {}
    for path in cases:
        with open(path, encoding="utf-8") as f:
            loaded[path] = json.load(f)

    compared = failures = rendered = raised = 0
    for template in templates:
        name = os.path.basename(template)
        run = subprocess.run([render_chat, template] + cases, capture_output=True, text=True)
        if run.returncode != 0:
            print("FAIL %s: render-chat exited %d: %s" % (name, run.returncode, run.stderr))
            failures += 1
            continue
        ours = {r["case"]: r for r in json.loads(run.stdout)}
        source = load_template(template)
        for path in cases:
            compared += 1
            label = "%s x %s" % (name, os.path.basename(path))
            want, err = render(source, loaded[path])
            got = ours[path]
            if err is None:
                rendered += 1
                if "output" not in got:
                    print("FAIL %s: jinja2 renders but render-chat failed: %s" % (label, got["error"]))
                    failures += 1
                elif got["output"] != want:
                    print("FAIL %s: outputs differ\n%s" % (label, first_difference(want, got["output"])))
                    failures += 1
                continue
            raised += 1
            message, by_template = err
            if "error" not in got:
                print("FAIL %s: jinja2 raised (%s) but render-chat rendered" % (label, message))
                failures += 1
            elif by_template and got["error"] != message:
                print("FAIL %s: error messages differ\n  jinja2:      %s\n  render-chat: %s"
                      % (label, message, got["error"]))
                failures += 1
    print("%d renderings compared (%d outputs, %d errors), %d differences"
          % (compared, rendered, raised, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
