#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Validate nezhactl -j output against Documentation/nezhactl.schema.json.

    json_check.py [--lines] DEFINITION [FILE]

DEFINITION names one of the schema's $defs (rail_show, health_show, ...);
FILE (default: stdin) holds one JSON document, or with --lines one per
line (monitor).  Exit 0 valid, 1 invalid (the reason on stderr), 4 when
python3-jsonschema is missing (the caller's SKIP).
"""
import json
import os
import sys

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                      "Documentation", "nezhactl.schema.json")


def main():
    args = sys.argv[1:]
    lines = False
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
    root = dict(schema)
    root["$ref"] = "#/$defs/" + args[0]
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator = cls(root, format_checker=jsonschema.FormatChecker())
    text = open(args[1]).read() if len(args) == 2 else sys.stdin.read()
    docs = [l for l in text.splitlines() if l.strip()] if lines else [text]
    if not docs:
        print("no JSON at all", file=sys.stderr)
        return 1
    for n, doc in enumerate(docs, 1):
        try:
            value = json.loads(doc)
        except ValueError as e:
            print("document %d is not JSON: %s" % (n, e), file=sys.stderr)
            return 1
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.path))
        if errors:
            e = errors[0]
            print("document %d: %s at /%s" % (n, e.message,
                  "/".join(str(p) for p in e.path)), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
