#!/usr/bin/env python3
"""Rows for `prefixed.tsv` from trufflehog's detectors whose tokens open with a prefix of their own.

`build_named.py` reads the detectors that find a key by the vendor's name before it. Some 200
others find a token by the literal it opens with (`apify_api_` then 36 characters,
`\\b(apify\\_api\\_[a-zA-Z-0-9]{36})\\b`): that prefix and what follows it are a fact about the
vendor's format, which is what a row of `vendors.tsv` holds. This script reads them from a
trufflehog checkout (or bare mirror, read at HEAD) and prints one row per format, in
`vendors.tsv`'s columns:

    vendor  kind  keywords  shape  checksum  source  positive  secret  negative

- `keywords`: the literal prefix (matched case-sensitively where a word starts);
- `shape`: the detector's regex without its `\\b`s (RE2 syntax, which Rust's regex reads); the
  whole match is redacted;
- `source`: `trufflehog <commit> pkg/detectors/<dir>`;
- `positive` / `secret`: a token drawn from the shape, alone; `negative`: the prefix and three
  characters, shorter than any token of the shape.

Taken only when the regex is, inside one group, a literal of 4 characters or more holding a
letter, then classes with bounds (`{36}`, `{20,64}`): no alternation, no case-insensitive flag,
no context before or after. Skipped, and counted: a prefix `vendors.tsv` or the token shapes
already read (`existing` below), a body shorter than 16 characters, a shape no sample is drawn
from.

Run: python3 build_prefixed_trufflehog.py /path/to/trufflehog > prefixed.tsv
"""

import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from build_named import (  # noqa: E402
    Unsampleable,
    commit_of,
    detector_files,
    random_enough,
    sample,
    sre_constants,
    sre_parse,
    write_rows,
)

PATTERN = re.compile(
    r"MustCompile\(\s*(?:detectors\.PrefixRegex\(\s*\[\]string\{[^}]*\}\s*\)\s*\+\s*)?`([^`]*)`\s*\)"
)
MIN_PREFIX = 4
MIN_BODY = 16

# prefixes left out, and why: a word many texts open a name with, or a key its vendor publishes
# in the page or the app by design (an id, not a secret)
LEFT_OUT = {
    "web_": "a word: `web_` opens many names",
    "API_KEY": "a word: an environment variable's name, not a token's prefix",
    "pub-c-": "PubNub's publish key ships in the client app with the subscribe key",
    "sub-c-": "PubNub's subscribe key ships in the client app",
    "NRBR-": "New Relic's browser key is written into every page the agent watches",
    "3MVG9": "Salesforce's consumer key is an OAuth client's id",
    "cus_": "a customer's id (Checkout.com's, as Stripe's), not a secret",
    "cli_": "Lark's app id, published with the app",
    "act_": "Smooch's key id, which names the secret it pairs with",
    "pk-lf-": "Langfuse's public key, sent from the browser",
    "tkn.v1_": "the detector's shape takes the blank after the token",
}

# the prefixes boxfleet's own token shapes read (src/tokens.rs)
OWN_PREFIXES = [
    "sk-", "sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_", "ghp_", "gho_", "ghu_",
    "ghs_", "ghr_", "github_pat_", "glpat-", "gldt-", "glrt-", "glptt-", "gloas-", "glcbt-",
    "glft-", "glimt-", "glsoat-", "glagent-", "GR1348941", "xox", "xapp-", "AKIA", "ASIA",
    "AIza", "npm_", "pypi-", "eyJ", "ZXlK",
]


def existing_prefixes(vendors_tsv):
    out = list(OWN_PREFIXES)
    for line in open(vendors_tsv, encoding="utf-8"):
        if line.startswith("#") or not line.strip():
            continue
        out.extend(k for k in line.split("\t")[2].split(",") if k)
    return out


def split_alternatives(core):
    """The alternatives of a regex that is one group (past an optional piece before it), as
    regex texts, each to be read on its own: `(a|b)` is `a` and `b`."""
    text = core
    if text.startswith("(?:"):
        depth, i = 0, 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if text[i + 1 : i + 2] != "?":
            return []
        text = text[i + 2 :]
    if not (text.startswith("(") and text.endswith(")")) or text.startswith("(?"):
        return []
    inner = text[1:-1]
    out, depth, bracket, start, i = [], 0, False, 0, 0
    while i < len(inner):
        c = inner[i]
        if c == "\\":
            i += 2
            continue
        if bracket:
            bracket = c != "]"
        elif c == "[":
            bracket = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return []
        elif c == "|" and depth == 0:
            out.append(inner[start:i])
            start = i + 1
        i += 1
    out.append(inner[start:])
    return out


def alternatives(tree):
    """The sequences a parsed regex is one of: its one group's branches, or the group itself,
    past an optional piece before it (`(?:sandbox_)?(sk_pr_…)`)."""
    items = list(tree)
    while len(items) > 1 and items[0][0] == sre_constants.MAX_REPEAT and items[0][1][0] == 0:
        items = items[1:]
    if len(items) != 1 or items[0][0] != sre_constants.SUBPATTERN:
        return []
    inner = list(items[0][1][3])
    if len(inner) == 1 and inner[0][0] == sre_constants.BRANCH:
        return [list(branch) for branch in inner[0][1][1]]
    return [inner]


def literal_prefix(inner):
    """(prefix, the rest) of a sequence that opens with literals."""
    prefix = ""
    i = 0
    while i < len(inner) and inner[i][0] == sre_constants.LITERAL:
        prefix += chr(inner[i][1])
        i += 1
    rest = inner[i:]
    for op, av in rest:
        if op not in (sre_constants.MAX_REPEAT, sre_constants.LITERAL, sre_constants.IN):
            return None
        if op == sre_constants.MAX_REPEAT and av[1] == sre_constants.MAXREPEAT:
            return None
    return prefix, rest


def body_width(rest):
    low = 0
    for op, av in rest:
        low += av[0] if op == sre_constants.MAX_REPEAT else 1
    return low


def rows(root):
    commit = commit_of(root)[:12]
    known = existing_prefixes(os.path.join(os.path.dirname(os.path.abspath(__file__)), "vendors.tsv"))
    rng = random.Random(46)
    skipped = {}
    seen = set()

    def skip(reason):
        skipped[reason] = skipped.get(reason, 0) + 1

    def row(alternative, parts, directory):
        core = f"({alternative})"
        try:
            tree = sre_parse.parse(core)
        except Exception:
            return None
        found = alternatives(tree)
        split = literal_prefix(found[0]) if len(found) == 1 else None
        if split is None:
            return None
        prefix, rest = split
        if len(prefix) < MIN_PREFIX or not any(c.isalpha() for c in prefix) or not rest:
            return None
        if not re.fullmatch(r"[A-Za-z0-9_.:-]+", prefix):
            return None
        if prefix in LEFT_OUT:
            return skip("left out (LEFT_OUT)")
        if any(prefix.startswith(k) or k.startswith(prefix) for k in known):
            return skip("a prefix already read")
        if body_width(rest) < MIN_BODY:
            return skip("a body shorter than 16")
        if prefix in seen:
            return skip("a prefix read by an earlier detector")
        token = None
        for _ in range(40):
            try:
                candidate = sample(core, rng)
            except Unsampleable:
                break
            if re.fullmatch(core, candidate) and random_enough(candidate[len(prefix):]):
                token = candidate
                break
        if token is None:
            return skip("no sample")
        seen.add(prefix)
        vendor = directory.split("/")[0]
        kind = re.sub(r"[^a-z0-9]+", "_", f"{directory}_token".lower()).strip("_")
        source = f"trufflehog {commit} {'/'.join(parts[:-1])}"
        negative = f"{prefix}abc"
        return [vendor, kind, prefix, core, "none", source, token, token, negative]

    kinds = set()
    for path, text in detector_files(root):
        parts = path.split("/")
        directory = "/".join(parts[2:-1]) if len(parts) > 3 else parts[-1][:-3]
        for m in PATTERN.finditer(text):
            regex = m.group(1)
            if "(?i" in regex:
                continue
            for alternative in split_alternatives(regex.replace("\\b", "")):
                out = row(alternative, parts, directory)
                if out is None:
                    continue
                # two formats of one detector: the second kind named by its prefix
                if out[1] in kinds:
                    out[1] = re.sub(r"[^a-z0-9]+", "_", f"{directory}_{out[2]}".lower()).strip("_")
                kinds.add(out[1])
                yield out
    for reason, n in sorted(skipped.items()):
        print(f"skipped {n}: {reason}", file=sys.stderr)


def main():
    write_rows(
        [
            "# vendor\tkind\tkeywords\tshape\tchecksum\tsource\tpositive\tsecret\tnegative",
            "# built by build_prefixed_trufflehog.py from trufflehog's self-prefixed detectors: see its docstring",
        ],
        rows(sys.argv[1]),
    )


if __name__ == "__main__":
    main()
