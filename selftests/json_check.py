#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Validate nezhactl -j output against Documentation/nezhactl.schema.json.

    json_check.py [--lines] DEFINITION [FILE]
    json_check.py --each DEFINITION=FILE...

DEFINITION names one of the schema's $defs (rail_show, health_show, ...);
FILE (default: stdin) holds one JSON document, or with --lines one per
line (monitor).  Exit 0 valid, 1 invalid (the reason on stderr), 4 when
python3-jsonschema is missing (the caller's SKIP).  --each checks several
files in one run (a guest under TCG pays seconds per Python start) and
prints one line per file: "ok FILE" or "not ok FILE: why".
"""
import json
import os
import sys

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "Documentation", "nezhactl.schema.json")


def check(validator, text, lines):
    """None if every document of text is valid, else why not."""
    docs = [l for l in text.splitlines() if l.strip()] if lines else [text]
    if not docs:
        return "no JSON at all"
    for n, doc in enumerate(docs, 1):
        try:
            value = json.loads(doc)
        except ValueError as e:
            return "document %d is not JSON: %s" % (n, e)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            return "document %d: %s at /%s" % (n, e.message,
                                               "/".join(str(p) for p in e.path))
    return None


def validator_for(jsonschema, schema, definition):
    root = dict(schema)
    root["$ref"] = "#/$defs/" + definition
    cls = jsonschema.validators.validator_for(schema)
    return cls(root, format_checker=jsonschema.FormatChecker())


def main():
    args = sys.argv[1:]
    lines = False
    if args and args[0] == "--each":
        try:
            import jsonschema
        except ImportError:
            print("python3-jsonschema not installed", file=sys.stderr)
            return 4
        with open(SCHEMA) as f:
            schema = json.load(f)
        jsonschema.validators.validator_for(schema).check_schema(schema)
        bad = 0
        for pair in args[1:]:
            definition, _, path = pair.partition("=")
            if definition not in schema["$defs"]:
                why = "no definition %r in the schema" % definition
            else:
                why = check(validator_for(jsonschema, schema, definition),
                            open(path).read(), definition == "monitor_event")
            print("ok %s" % path if why is None else "not ok %s: %s" % (path, why))
            bad += why is not None
        return 1 if bad else 0
    if args and args[0] == "--lines":
        lines, args = True, args[1:]
    if not args or len(args) > 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import jsonschema
    except ImportError:
        print("python3-jsonschema not installed", file=sys.stderr)
        return 4
    with open(SCHEMA) as f:
        schema = json.load(f)
    if args[0] not in schema["$defs"]:
        print("no definition %r in the schema" % args[0], file=sys.stderr)
        return 2
    jsonschema.validators.validator_for(schema).check_schema(schema)
    validator = validator_for(jsonschema, schema, args[0])
    text = open(args[1]).read() if len(args) == 2 else sys.stdin.read()
    why = check(validator, text, lines)
    if why:
        print(why, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
