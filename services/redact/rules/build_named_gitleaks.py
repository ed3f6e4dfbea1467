#!/usr/bin/env python3
"""Rows for `named.tsv` from gitleaks' vendor-named rules.

gitleaks writes about a hundred of its rules as "the vendor's name, a few name characters, an
assignment, then a key of this shape" (its `GenerateSemiGenericRegex`: `dropbox` then
`[a-z0-9]{15}`, `BUNDLE_GEMS__CONTRIBSYS__COM` then `[a-f0-9]{8}:[a-f0-9]{8}`). Each such
rule holds two facts about a vendor's key, the names a text gives it by and its shape, and
those are what a row of `named.tsv` holds. This script reads them from the rule set gitleaks
publishes (`config/gitleaks.toml`) and prints one row per rule, in `named.tsv`'s columns:

    vendor  kind  keywords  shape  source  positive  negative

- `keywords`: the rule's own keyword list (gitleaks' prefilter), generic words dropped;
- `shape`: the key's regex as the rule writes it, case-insensitive where the rule is, as the
  first group, followed by what gitleaks ends a key with (a quote, a blank, `;`, an escaped
  line break or the line's end), so a longer run is not read as a key's prefix;
- `source`: `gitleaks <commit> config/gitleaks.toml <rule id>`;
- `positive` / `negative`: a key drawn from the shape after the vendor's name, and the same
  name with a stand-in (`tests/vendors.rs` holds each row to both).

Skipped: a rule for an id rather than a secret (`…-client-id`, `…-access-id`: a client id is
public); a key shorter than 8 characters; a rule with no keyword that names a vendor; gitleaks'
generic and password rules (the redactor's own keyword and password rules read those); a key
that opens with its own keyword (`NRAK-`, `tfp_`: the curated table reads it by its prefix);
a rule that merges several regexes.

Run: python3 build_named_gitleaks.py /path/to/gitleaks-checkout-or-bare-mirror >> named.tsv
(the section header is printed first; a bare mirror is read at HEAD). Deterministic.
"""

import os
import random
import re
import subprocess
import sys
import tomllib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_named import GENERIC, Unsampleable, random_enough, sample, sre_parse, write_rows  # noqa: E402

# what gitleaks writes before and after the key in a vendor-named rule
KEY_OPENS = "[\\x60'\"\\s=]{0,5}("
KEY_ENDS = ")(?:[\\x60'\"\\s;]|\\\\[nr]|$)"
SEMI_GENERIC = "{0,50}?"

MIN_KEY = 8


def rule_set(root):
    """(commit, the parsed `config/gitleaks.toml`) of a checkout or a bare mirror."""
    path = os.path.join(root, "config", "gitleaks.toml")
    if os.path.exists(path):
        with open(path, "rb") as f:
            text = f.read()
    else:
        text = subprocess.run(
            ["git", "-C", root, "show", "HEAD:config/gitleaks.toml"],
            check=True,
            capture_output=True,
        ).stdout
    commit = subprocess.run(
        ["git", "-C", root, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return commit, tomllib.loads(text.decode("utf-8"))


def key_shape(regex):
    """The key's part of a vendor-named rule's regex, or None for a rule of another form."""
    if SEMI_GENERIC not in regex or not regex.endswith(KEY_ENDS):
        return None
    at = regex.rfind(KEY_OPENS)
    if at < 0:
        return None
    return regex[at + len(KEY_OPENS) : -len(KEY_ENDS)]


def rows(root):
    rng = random.Random(46)
    commit, config = rule_set(root)
    skipped = {}

    def skip(reason):
        skipped[reason] = skipped.get(reason, 0) + 1

    for rule in config["rules"]:
        rule_id = rule["id"]
        shape = key_shape(rule.get("regex", ""))
        if shape is None:
            continue
        if rule_id.endswith("-id") or "client-id" in rule_id:
            skip("an id, not a secret")
            continue
        if KEY_ENDS in shape:
            skip("several regexes merged (each read apart elsewhere)")
            continue
        if rule_id.startswith("generic-") or "password" in rule_id:
            skip("a generic or a password rule (the redactor's own rules read those)")
            continue
        keywords = [
            k.lower()
            for k in rule.get("keywords", [])
            if k.lower() not in GENERIC and re.fullmatch(r"[a-z0-9][a-z0-9._-]+", k.lower())
        ]
        if not keywords:
            skip("no keyword that names a vendor")
            continue
        insensitive = rule["regex"].startswith("(?i)")
        key = f"(?i:{shape})" if insensitive else shape
        full = f"({key}{KEY_ENDS}"
        try:
            compiled = re.compile(full)
            low = sre_parse.parse(key).getwidth()[0]
        except re.error:
            skip("not a Python regex")
            continue
        token = None
        for _ in range(40):
            try:
                candidate = sample(key, rng)
            except Unsampleable:
                break
            m = compiled.fullmatch(candidate)
            if m and random_enough(m.group(1)):
                token = candidate
                break
        if token is None:
            skip("no sample")
            continue
        if low < MIN_KEY:
            skip("shorter than a key")
            continue
        if any(k in token.lower() for k in keywords):
            # a key that opens with its own keyword (`nrak-`, `tfp_`, `live_`) is read from
            # its prefix by the curated table; read after its keyword it could never match
            skip("self-prefixed")
            continue
        first = keywords[0]
        name = re.sub(r"[^A-Za-z0-9_]+", "_", first).upper()
        vendor = rule_id.split("-")[0]
        kind = re.sub(r"[^a-z0-9]+", "_", rule_id.lower()).strip("_")
        source = f"gitleaks {commit[:12]} config/gitleaks.toml {rule_id}"
        positive = f"{name}_TOKEN = \"{token}\""
        negative = f"{name}_TOKEN = \"<your-{first}-token>\""
        yield [vendor, kind, ",".join(sorted(set(keywords))), full, source, positive, negative]
    for reason, n in sorted(skipped.items()):
        print(f"skipped {n}: {reason}", file=sys.stderr)


def main():
    write_rows(
        ["# built by build_named_gitleaks.py from gitleaks' vendor-named rules: see its docstring"],
        rows(sys.argv[1]),
    )


if __name__ == "__main__":
    main()
