#!/usr/bin/env python3
"""Builds `named.tsv`, boxfleet-redact's table of tokens known by the vendor named beside them.

Most vendors issue keys with no prefix of their own: 32 hex digits, 40 letters and digits. A
scanner finds such a key by the vendor's name written shortly before it (`ABYSSALE_API_KEY=…`,
`abyssale: …`). trufflehog's detectors hold, for some 750 vendors, that name (the detector's
keywords) and the key's shape (its length and alphabet): facts about each vendor's format. This
script reads them from a trufflehog checkout and writes one row per shape:

    vendor  kind  keywords  shape  source  positive  negative

- `keywords`: the vendor's names, comma-separated, matched in any case where a word starts
  (generic words a detector keys a second pattern on, `id`, `key`, `user`, are dropped);
- `shape`: the key's regex (RE2 syntax, which Rust's regex crate reads), its first group the
  part redacted, read on the keyword's line within 40 characters after the keyword;
- `source`: the detector the format was read from (`trufflehog pkg/detectors/<dir>`, commit);
- `positive`: a sample the row must redact (the keyword, a key's name and a key drawn from the
  shape); `negative`: the same name with a value of the shape's length that is no random key.

A detector's shapes are taken only when written as the vendor's name followed by a key
(`detectors.PrefixRegex([...]) + \\`...\\``); self-prefixed formats (`fio-u-…`) are rows of the
curated table instead. Shapes a sample cannot be drawn from are skipped and counted.

Run: python3 build_named.py /path/to/trufflehog-checkout-or-bare-mirror > named.tsv
(a bare git mirror is read at HEAD through `git archive`). Deterministic: a fixed seed.
"""

import os
import random
import re
import subprocess
import sys
import tarfile
import io
import warnings

warnings.simplefilter("ignore", FutureWarning)

try:
    import re._parser as sre_parse  # Python 3.11+
    import re._constants as sre_constants
except ImportError:  # pragma: no cover
    import sre_parse
    import sre_constants

PREFIX = re.compile(
    r"MustCompile\(\s*detectors\.PrefixRegex\(\s*\[\]string\{([^}]*)\}\s*\)\s*\+\s*`([^`]*)`\s*\)"
)
KEYWORDS = re.compile(r"func \(\w+ \*?Scanner\) Keywords\(\) \[\]string \{\s*return \[\]string\{([^}]*)\}")
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

# the shortest key a row reads: shorter runs are the ids, users and servers a detector reads
# beside its key (`[a-z0-9]{8}`), no secret on their own
MIN_KEY = 16
# the longest (the redactor's MAX_UNBOUNDED)
MAX_KEY = 1024

# keywords that name no vendor: a detector's second pattern (a client id, a user) keyed on a
# generic word; as a vendor's name they would make every `id` or `key` in a text one
GENERIC = {
    "accessid", "account", "api", "apikey", "app_id", "appid", "client", "consumer",
    "customer", "data", "host", "id", "key", "name", "org", "password", "pat", "role",
    "secret", "subject", "subscription", "token", "url", "user", "user_id", "username", "line",
}


def detector_files(root):
    """(path, text) of each detector's non-test Go source."""
    if os.path.isdir(os.path.join(root, "pkg", "detectors")):
        for dirpath, _, names in os.walk(os.path.join(root, "pkg", "detectors")):
            for name in sorted(names):
                if name.endswith(".go") and not name.endswith("_test.go"):
                    path = os.path.join(dirpath, name)
                    with open(path, encoding="utf-8", errors="replace") as f:
                        yield os.path.relpath(path, root), f.read()
        return
    data = subprocess.run(
        ["git", "-C", root, "archive", "HEAD", "pkg/detectors"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in sorted(tar.getmembers(), key=lambda m: m.name):
            if member.isfile() and member.name.endswith(".go") and not member.name.endswith("_test.go"):
                yield member.name, tar.extractfile(member).read().decode("utf-8", "replace")


def commit_of(root):
    try:
        return subprocess.run(
            ["git", "-C", root, "rev-parse", "HEAD"], check=True, capture_output=True, text=True
        ).stdout.strip()
    except Exception:
        return "unknown"


class Unsampleable(Exception):
    pass


def sample(pattern, rng):
    """A string matching `pattern` (the regex subset key shapes use), from `rng`."""
    tree = sre_parse.parse(pattern)
    return "".join(draw(tree, rng))


def draw(items, rng):
    out = []
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(av))
        elif name == "IN":
            out.append(draw_class(av, rng))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = av
            if high == sre_constants.MAXREPEAT:
                high = max(low, 1) + 8
            # keys are usually the longest their shape allows; take a length in the upper half
            n = rng.randint(low + (high - low) // 2, high) if high > low else low
            for _ in range(n):
                out.extend(draw(sub, rng))
        elif name == "SUBPATTERN":
            out.extend(draw(av[-1], rng))
        elif name == "BRANCH":
            out.extend(draw(rng.choice(av[1]), rng))
        elif name in ("AT", "ASSERT", "ASSERT_NOT"):
            pass
        elif name == "ANY":
            out.append(rng.choice(ALNUM))
        elif name == "CATEGORY":
            out.append(draw_class([(op, av)], rng))
        else:
            raise Unsampleable(name)
    return out


def draw_class(items, rng):
    chars = []
    negate = False
    for op, av in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            chars.append(chr(av))
        elif name == "RANGE":
            chars.extend(chr(c) for c in range(av[0], av[1] + 1))
        elif name == "CATEGORY":
            cat = str(av)
            if cat == "CATEGORY_DIGIT":
                chars.extend("0123456789")
            elif cat == "CATEGORY_WORD":
                chars.extend(ALNUM + "_")
            elif cat == "CATEGORY_SPACE":
                chars.append(" ")
            else:
                raise Unsampleable(cat)
        else:
            raise Unsampleable(name)
    if negate:
        chars = [c for c in ALNUM if c not in chars]
    # a key's characters: letters and digits first, symbols as they come
    plain = [c for c in chars if c.isalnum() and c.isascii()]
    pool = plain if plain and rng.random() < 0.9 else [c for c in chars if c.isascii() and c.isprintable()]
    if not pool:
        raise Unsampleable("empty class")
    return rng.choice(pool)


def strip_bounds(shape):
    return shape


def rows(root):
    rng = random.Random(46)
    commit = commit_of(root)
    skipped = {}
    seen = set()
    by_dir = {}
    for path, text in detector_files(root):
        by_dir.setdefault(os.path.dirname(path), []).append((path, text))
    for directory in sorted(by_dir):
        files = by_dir[directory]
        rel = directory.split("pkg/detectors/", 1)[-1]
        vendor_dir = rel.split("/")[0]
        for path, text in files:
            for match in PREFIX.finditer(text):
                keywords = [k.lower() for k in QUOTED.findall(match.group(1))]
                # POSIX classes as plain ranges (both regex dialects read those alike)
                shape = match.group(2).replace("[:alnum:]", "A-Za-z0-9").replace("[:alpha:]", "A-Za-z").replace("[:digit:]", "0-9")
                # a vendor's name starts a word: `.azure-api.net` or `\"username\":` is no name
                keywords = [
                    k for k in keywords
                    if len(k) >= 2 and k not in GENERIC and re.fullmatch(r"[a-z0-9][a-z0-9._:/-]+", k)
                ]
                if not keywords:
                    skipped["no keyword"] = skipped.get("no keyword", 0) + 1
                    continue
                try:
                    compiled = re.compile(shape)
                except re.error:
                    skipped["not a Python regex"] = skipped.get("not a Python regex", 0) + 1
                    continue
                if compiled.groups < 1:
                    shape = "(" + shape + ")"
                    compiled = re.compile(shape)
                # a key, not the id, user, host or server a detector reads beside it: 16
                # characters or more, no URL or host name in the shape
                low = sre_parse.parse(shape).getwidth()[0]
                high = sre_parse.parse(shape).getwidth()[1]
                if high > MAX_KEY:
                    skipped["longer than the redactor reads a key"] = skipped.get("longer than the redactor reads a key", 0) + 1
                    continue
                if low < MIN_KEY or re.search(r"https?|\\\.[a-z]|:\\/\\/|//", shape):
                    skipped["an id, a host or a short value, not a key"] = skipped.get("an id, a host or a short value, not a key", 0) + 1
                    continue
                key = (tuple(keywords), shape)
                if key in seen:
                    continue
                seen.add(key)
                token = None
                for _ in range(20):
                    try:
                        candidate = sample(shape, rng)
                    except Unsampleable as e:
                        skipped["unsampleable " + str(e)] = skipped.get("unsampleable " + str(e), 0) + 1
                        break
                    m = compiled.search(candidate)
                    if m and m.group(1) and random_enough(m.group(1)):
                        token = candidate
                        break
                if token is None:
                    skipped.setdefault("no sample", 0)
                    skipped["no sample"] += 1
                    continue
                first = keywords[0]
                name = re.sub(r"[^A-Za-z0-9]+", "_", first).upper()
                positive = f"{name}_API_KEY={token}"
                negative = f"{name}_API_KEY=<your-{first}-api-key>"
                kind = re.sub(r"[^a-z0-9]+", "_", rel.lower()).strip("_") + "_secret"
                vendor = vendor_dir
                source = f"trufflehog {commit[:12]} pkg/detectors/{rel}"
                yield [vendor, kind, ",".join(sorted(set(keywords))), shape, source, positive, negative]
    for reason, n in sorted(skipped.items()):
        print(f"skipped {n}: {reason}", file=sys.stderr)


def random_enough(token):
    """A drawn key the redactor reads as one (its `reads_as_random`): a digit, or capitals and
    small letters both, and five different characters."""
    digit = any(c.isdigit() for c in token)
    upper = any(c.isupper() for c in token)
    lower = any(c.islower() for c in token)
    return (digit or (upper and lower)) and len(set(token)) >= 5


def write_rows(header_lines, rows_to_write, out=sys.stdout):
    """Writes `header_lines` (each a `#` comment) and the rows, tab-separated; counts them on stderr."""
    for line in header_lines:
        out.write(line + "\n")
    n = 0
    for row in rows_to_write:
        for field in row:
            assert "\t" not in field and "\n" not in field, row
        out.write("\t".join(row) + "\n")
        n += 1
    print(f"{n} rows", file=sys.stderr)


def main():
    write_rows(
        [
            "# vendor\tkind\tkeywords\tshape\tsource\tpositive\tnegative",
            "# built by build_named.py from trufflehog's detectors: see its docstring",
        ],
        rows(sys.argv[1]),
    )


if __name__ == "__main__":
    main()
