#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/DBUS.md from the D-Bus introspection XML and its doc comments (the gtk-doc style that
gdbus-codegen reads: "Name: text", "@arg: text", "@short_description: text").

    dbus-doc.py XML > docs/DBUS.md        regenerate
    dbus-doc.py --check XML docs/DBUS.md  the test: fails when the committed file is stale
"""
import sys
import textwrap
import xml.etree.ElementTree as ET

SOURCE = "data/io.github.decapybara.Engine1.xml"


def parse_comment(text):
    """(summary paragraphs, {arg: description}) of one doc comment."""
    lines = textwrap.dedent(text.strip("\n")).strip().splitlines()
    body, args, current = [], {}, None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if i == 0 and stripped.endswith(":") and " " not in stripped:
            continue  # "Name:" heading
        if i == 0 and ":" in stripped and " " not in stripped.split(":", 1)[0]:
            stripped = stripped.split(":", 1)[1].strip()  # "Name: text"
        if stripped.startswith("@"):
            name, _, rest = stripped[1:].partition(":")
            current = name.strip()
            args[current] = rest.strip()
        elif current is not None and stripped and line[:1].isspace():
            args[current] += " " + stripped
        else:
            current = None
            body.append(stripped)
    paragraphs = " ".join(l if l else "\n\n" for l in body).replace(" \n\n ", "\n\n")
    return paragraphs.strip(), args


def children_with_docs(element):
    """(child, doc comment text or '') for each child element, the comment just before it."""
    doc = ""
    for child in element:
        if child.tag is ET.Comment:
            doc = child.text or ""
            continue
        yield child, doc
        doc = ""


def render(path):
    tree = ET.parse(path, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    out = [f"<!-- Generated from {SOURCE} by tests/dbus/dbus-doc.py; do not edit: the test "
           "check-dbus-doc fails when this file is stale. -->", ""]
    for iface, doc in children_with_docs(tree.getroot()):
        if iface.tag != "interface":
            continue
        name = iface.get("name")
        text, args = parse_comment(doc)
        out += [f"# {name}", ""]
        if "short_description" in args:
            out += [f"*{args['short_description']}*", ""]
        if text:
            out += [text, ""]
        members = list(children_with_docs(iface))
        props = [(m, d) for m, d in members if m.tag == "property"]
        if props:
            out += ["## Properties", "", "| Property | Type | Access | Description |", "|---|---|---|---|"]
            for m, d in props:
                desc = parse_comment(d)[0].replace("\n\n", " ").replace("|", "\\|")
                out.append(f"| `{m.get('name')}` | `{m.get('type')}` | {m.get('access')} | {desc} |")
            out.append("")
        for kind, title in (("method", "Methods"), ("signal", "Signals")):
            items = [(m, d) for m, d in members if m.tag == kind]
            if not items:
                continue
            out += [f"## {title}", ""]
            for m, d in items:
                text, arg_docs = parse_comment(d)
                sig = ", ".join(
                    (f"{a.get('direction', 'in').upper()} " if kind == "method" else "")
                    + f"{a.get('type')} {a.get('name')}" for a in m.findall("arg"))
                out += [f"### {m.get('name')}", "", "```", f"{m.get('name')} ({sig})", "```", ""]
                if text:
                    out += [text, ""]
                for a in m.findall("arg"):
                    if a.get("name") in arg_docs:
                        out.append(f"- `{a.get('name')}`: {arg_docs[a.get('name')]}")
                if any(a.get("name") in arg_docs for a in m.findall("arg")):
                    out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def main(argv):
    if len(argv) == 4 and argv[1] == "--check":
        expected = render(argv[2])
        with open(argv[3], encoding="utf-8") as f:
            if f.read() != expected:
                sys.stderr.write(f"{argv[3]} is stale: regenerate it with\n"
                                 f"  python3 tests/dbus/dbus-doc.py {SOURCE} > docs/DBUS.md\n")
                return 1
        return 0
    if len(argv) == 2:
        sys.stdout.write(render(argv[1]))
        return 0
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
