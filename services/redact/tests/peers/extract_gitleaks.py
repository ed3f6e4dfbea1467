#!/usr/bin/env python3
r"""Extract gitleaks' rule test cases (true and false positives) as redaction fixtures.

Usage:
    python3 extract_gitleaks.py REPO [--commit SHA] [--out FILE] [--all-rules]

    REPO         a gitleaks git checkout or bare mirror, e.g.
                 /work/.mirror/gitleaks+gitleaks/repo
    --commit     the commit to read (default: the pinned COMMIT below); it is
                 the value written to every line's "commit" field
    --out        write the fixtures there instead of stdout
    --all-rules  also read rule functions that main.go leaves out (see below)

    e.g. python3 extract_gitleaks.py /work/.mirror/gitleaks+gitleaks/repo > gitleaks.jsonl

    A summary (rules read, samples by source kind, skips by reason, notes on
    odd cases) goes to stderr.  The output depends only on the commit and the
    options: the same command gives the same file.

What it reads, with `git show COMMIT:path` (nothing is checked out, Go is
never run):
  * cmd/generate/config/rules/*.go: one or more rule functions per file, each
    building a `config.Rule{...}` and handing its true positives `tps` and
    false positives `fps` to `utils.Validate(r, tps, fps)` or, as maps from a
    file path to a text, to `utils.ValidateWithPaths(r, tps, fps)`;
  * cmd/generate/config/base/config.go: the global allowlist;
  * cmd/generate/config/main.go: which rule functions make up gitleaks'
    config.  Those it does not call (at the pinned commit GCPServiceAccount,
    commented out there, SquareSecret and TrelloAccessToken) are skipped and
    counted: gitleaks never runs their Validate, and two would fail it
    (gcp-service-account's keyword is `\"type\": \"service_account\"`, with
    backslashes its one case lacks; square-secret generates from
    `[0-9A-Za-z\\-_]`, whose range `\\-_` yields `\ ] ^`, which the rule's
    `[\w-]` rejects, in most draws).  --all-rules reads them anyway.

How it evaluates: a small lexer (with Go's semicolon insertion), a parser for
the part of Go those files use, and a tree-walking interpreter.  Supported:
"..." strings with all Go escapes, `...` raw strings, rune literals, numbers,
`+` concatenation, == != ! && || and comparisons, identifiers bound in the
function (`:=`, `=`, `var`, grouped `var (...)`) or at package level in any
file of the package (evaluated lazily), composite literals (slices, maps,
structs, elided inner types, `&T{...}`), append (with `xs...`), len,
string(...) / []byte(...), `for ... range` over slices, maps (in source
order) and strings, `for {}` with continue / break, `if` with an init
statement, function literals, calls of the package's own helpers
(newPlausibleSecret, generateTestValues), fmt.Sprintf (%s %v %d %q %c %%),
strings.Join / ToUpper / ToLower / Repeat, the base64 encoders, and these
gitleaks helpers, re-implemented here from what their sources say:
  * regex builders: utils.Hex / Numeric / AlphaNumeric / AlphaNumericExtended
    (Short, Long) / Hex8_4_4_4_12 (character-class strings),
    regexp.MustCompile, utils.GenerateSemiGenericRegex,
    GenerateUniqueTokenRegex, MergeRegexps;
  * utils.GenerateSampleSecret(id, s) -> `<id>_api_token = "<s>"`;
  * utils.GenerateSampleSecrets(id, s) -> the 26 assignment forms gitleaks
    lists (INI, JSON, XML, YAML, C#, Go, Java, Kotlin, PHP, Python, Makefile,
    logstash, System.setProperty), written out in SAMPLE_FORMS in the order
    of gitleaks' source (gitleaks iterates a Go map, so its own order is
    random); {i} is the id, {I} the id upper-cased, {s} the secret, replaced
    in one pass;
  * secrets.NewSecret(re) -> a random string matching re, from our own
    generator (RegexGen) for the subset used there: literals, escapes,
    classes (ranges, negation, \d \w \s, [[:alnum:]] and friends), `.`,
    groups of all kinds, alternation, * + ? {n} {n,} {m,n}, anchors (which
    produce nothing).  It does with repetitions what gitleaks' generator
    (reggen, called with limit 1) does, so lengths are gitleaks' own: {n} and
    {n,} give n, {m,n} gives m (m > 0), {0,n}, ? and * give 0 or 1, + gives
    1; a negated class or `.` picks from printable ASCII.  Case-insensitive
    flags do not change what is generated.  Every generated string is
    checked against its own regex.
  * config.Allowlist.ContainsStopWord (lower-cased substring test) and
    Regexp.MatchString, which newPlausibleSecret's retry loop uses.
A value the interpreter cannot compute becomes an "unresolved" marker
carrying the reason; it spreads through concatenation and calls, and a
sample holding one is skipped and counted by reason - never guessed.

Randomness: Python's random.Random, seeded with the string
"boxfleet-redact/gitleaks|<file>|<function>" (package-level variables:
"boxfleet-redact/gitleaks|var|<name>"), so each rule's samples are
reproducible and independent of the other rules.  gitleaks' generator stops
(logging.Fatal) when Validate finds a true positive undetected or a false
positive detected, so a run it accepts has only passing samples.  When a draw
of ours has a random sample that would fail that way (by our detection,
below), the rule function is evaluated again with "#1", "#2", ... appended to
the seed (at most MAX_DRAWS times) and the first passing draw is kept; at the
pinned commit that happens once, to artifactory-reference-token, whose first
draw fell under the rule's entropy threshold.

What it writes: one JSON object per sample, keys in this order: peer
("gitleaks"), commit, path (the rule file), rule (RuleID), vendor, case
("tps[3]", "fps[0]", or tps["file.php"] for ValidateWithPaths maps), text,
secrets, expect ("positive" for tps, "negative" for fps).

secrets for a positive: what gitleaks' detector would report, found by
running the rule's regex, translated to Python `re` (scoped groups for Go's
mid-pattern flags such as (?i), \z -> \Z, `$` -> \Z outside (?m),
[[:class:]] expanded, a `{` that is no repetition escaped, re.ASCII for Go's
ASCII \w \d \s \b), the way gitleaks does it: the rule runs only if one of
its Keywords occurs in the lower-cased text; then for every non-overlapping
match, newlines trimmed from its ends, the regex is applied again to the
match and the secret is the SecretGroup if the rule sets one, else the first
non-empty capture group, else the whole match; a secret at or below the
rule's Entropy is dropped (gitleaks' formula, which divides by the byte
length), and so is one that the rule's allowlists or the global allowlist
exempt (regexes on the secret, the match or the line, stop words, AND /
OR conditions, paths), each applied as gitleaks applies it.  Two deliberate
exceptions (SECRET_WHOLE_MATCH), whose capture groups are not the secret,
take the whole match: jwt-base64 (its groups only tell which JWT header field
the token starts with, `(?P<alg>aGJHY2lPaU)`...) and microsoft-teams-webhook
(its group is the repeated `([a-z0-9]{4}-){3}` of a GUID, so gitleaks'
"secret" is five characters of the URL).  If nothing is found but the sample
came from GenerateSampleSecret(s), the secret handed to it is used
(counted); else the sample is skipped ("regex finds no secret in Python").
For a negative, secrets is [].

Also skipped: negatives of ValidateWithPaths that are negative only because
of their file path (the rule's Path regex does not match the map key; their
text alone is a positive), path-only rules (no Regex, no text), empty texts,
and a text that repeats an earlier case of the same rule with the same
expectation (GenerateSampleSecrets' "ini - quoted2" and "python - double
quote" forms are the same string; jwt-base64's padded and unpadded encodings
often coincide).  The cases kept keep their index, so `case` still points
into gitleaks' list.  A negative that is negative only because none of the
rule's keywords occurs is kept (that is gitleaks' verdict on the text) and
counted.

vendor: from VENDORS (rule-file name -> vendor), with per-rule overrides in
VENDOR_BY_RULE; the generic families are "Generic", "Private key", "JWT",
"curl" and "Kubernetes".

Standard library only.  Written for boxfleet-redact; no gitleaks code is used.
"""

import argparse
import base64
import collections
import json
import math
import random
import re
import subprocess
import sys
import warnings

PEER = "gitleaks"
COMMIT = "b58d3f102cf3a2c84cb7f923d05c25c9b1aed84b"
RULES_DIR = "cmd/generate/config/rules"
BASE_CONFIG = "cmd/generate/config/base/config.go"
MAIN_GO = "cmd/generate/config/main.go"  # lists the rules gitleaks ships
SEED = "boxfleet-redact/gitleaks"
LOOP_LIMIT = 100000  # iterations of one `for` before giving up

# rules whose capture groups are not the secret (see the docstring):
# jwt-base64's groups name the JWT header field the token starts with,
# microsoft-teams-webhook's group is the repeated `([a-z0-9]{4}-){3}` of a GUID
SECRET_WHOLE_MATCH = {"jwt-base64", "microsoft-teams-webhook"}

warnings.filterwarnings("ignore", category=FutureWarning)  # "possible nested set" etc.


# ======================================================================
# values

class Unres:
    """A value that could not be computed; `reason` says why."""

    __slots__ = ("reason",)

    def __init__(self, reason):
        self.reason = reason

    def __repr__(self):
        return "Unres(%r)" % self.reason


class Txt(str):
    """A Go string with where it came from.

    kinds: subset of {"random", "template", "computed"}; secret: the secret
    a GenerateSampleSecret(s) form was built around (else None).
    """

    kinds = frozenset()
    secret = None

    @staticmethod
    def of(s, kinds=frozenset(), secret=None):
        t = Txt(s)
        t.kinds = frozenset(kinds)
        t.secret = secret
        return t


def kinds_of(*vals):
    k = set()
    for v in vals:
        if isinstance(v, Txt):
            k |= v.kinds
    return k


class GoMap:
    """A Go map value: pairs in source order."""

    def __init__(self, pairs):
        self.pairs = list(pairs)

    def get(self, key, default=None):
        for k, v in self.pairs:
            if k == key:
                return v
        return default


class Struct:
    def __init__(self, typ, fields):
        self.typ = typ
        self.fields = dict(fields)

    def __repr__(self):
        return "Struct(%s)" % self.typ


class Rx:
    """A compiled-regexp value: its Go pattern text."""

    def __init__(self, pattern):
        self.pattern = str(pattern)


class Result:
    """What a rule function hands to Validate / ValidateWithPaths."""

    def __init__(self, rule, tps, fps, with_paths):
        self.rule, self.tps, self.fps, self.with_paths = rule, tps, fps, with_paths


class GoError(Exception):
    """Raised for syntax or constructs this interpreter does not handle."""


# ======================================================================
# lexer

class Tok:
    __slots__ = ("kind", "val", "line")

    def __init__(self, kind, val, line):
        self.kind, self.val, self.line = kind, val, line

    def __repr__(self):
        return "%s:%r@%d" % (self.kind, self.val, self.line)


OPERATORS = sorted(
    "... := == != <= >= && || += -= ++ -- << >> &^ <- "
    "+ - * / % & | ^ < > = ! ( ) [ ] { } , ; . : ~".split(),
    key=len, reverse=True)
KEYWORDS = {"break", "case", "chan", "const", "continue", "default", "defer", "else",
            "fallthrough", "for", "func", "go", "goto", "if", "import", "interface",
            "map", "package", "range", "return", "select", "struct", "switch", "type", "var"}
ESCAPES = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11,
           "\\": 92, "'": 39, '"': 34}


def unescape(body, line):
    """Body of a Go "..." string or '...' rune -> str (octal/\\x escapes are bytes)."""
    out = bytearray()
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        e = body[i + 1]
        if e in ESCAPES:
            out.append(ESCAPES[e])
            i += 2
        elif e == "x":
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif e in "01234567":
            out.append(int(body[i + 1:i + 4], 8))
            i += 4
        elif e == "u":
            out += chr(int(body[i + 2:i + 6], 16)).encode("utf-8")
            i += 6
        elif e == "U":
            out += chr(int(body[i + 2:i + 10], 16)).encode("utf-8")
            i += 10
        else:
            raise GoError("line %d: unknown escape \\%s" % (line, e))
    return out.decode("utf-8", errors="surrogateescape")


def lex(src):
    toks = []
    i, line, n = 0, 1, len(src)

    def newline():
        if toks and (toks[-1].kind in ("ident", "int", "float", "str", "rune")
                     and toks[-1].val not in KEYWORDS - {"break", "continue", "fallthrough", "return"}
                     or toks[-1].kind == "op" and toks[-1].val in (")", "]", "}", "++", "--")):
            toks.append(Tok("op", ";", line))

    while i < n:
        c = src[i]
        if c == "\n":
            newline()
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.index("*/", i + 2)
            chunk = src[i:j]
            if "\n" in chunk:
                newline()
                line += chunk.count("\n")
            i = j + 2
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            toks.append(Tok("ident", src[i:j], line))
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = re.compile(r"0[xX][0-9a-fA-F_]+|\d[\d_]*(\.\d*)?([eE][+-]?\d+)?|\.\d+").match(src, i)
            s = m.group(0)
            if s.lower().startswith("0x"):
                toks.append(Tok("int", int(s, 16), line))
            elif "." in s or "e" in s.lower():
                toks.append(Tok("float", float(s), line))
            else:
                toks.append(Tok("int", int(s.replace("_", ""), 10), line))
            i = m.end()
        elif c == '"':
            j = i + 1
            while src[j] != '"':
                if src[j] == "\\":
                    j += 1
                if src[j] == "\n":
                    raise GoError("line %d: newline in string" % line)
                j += 1
            toks.append(Tok("str", unescape(src[i + 1:j], line), line))
            i = j + 1
        elif c == "`":
            j = src.index("`", i + 1)
            body = src[i + 1:j]
            toks.append(Tok("str", body.replace("\r", ""), line))
            line += body.count("\n")
            i = j + 1
        elif c == "'":
            j = i + 1
            while src[j] != "'":
                if src[j] == "\\":
                    j += 1
                j += 1
            s = unescape(src[i + 1:j], line)
            if len(s) != 1:
                raise GoError("line %d: odd rune literal" % line)
            toks.append(Tok("rune", ord(s), line))
            i = j + 1
        else:
            for op in OPERATORS:
                if src.startswith(op, i):
                    toks.append(Tok("op", op, line))
                    i += len(op)
                    break
            else:
                raise GoError("line %d: unexpected character %r" % (line, c))
    newline()
    toks.append(Tok("eof", None, line))
    return toks


# ======================================================================
# parser: nodes are tuples ("kind", ...)

class Parser:
    def __init__(self, toks):
        self.toks = toks
        self.i = 0

    # -- helpers
    def peek(self, k=0):
        return self.toks[self.i + k]

    def at(self, val, k=0):
        t = self.toks[self.i + k]
        return t.kind in ("op", "ident") and t.val == val

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, val):
        t = self.next()
        if t.val != val or t.kind not in ("op", "ident"):
            raise GoError("line %d: expected %r, got %r" % (t.line, val, t.val))
        return t

    def ident(self):
        t = self.next()
        if t.kind != "ident":
            raise GoError("line %d: expected identifier, got %r" % (t.line, t.val))
        return t.val

    def skip_semis(self):
        while self.at(";"):
            self.next()

    # -- file
    def parse_file(self):
        """-> (imports {alias: path}, decls [(kind, name, node)])"""
        imports, decls = {}, []
        self.skip_semis()
        self.expect("package")
        self.ident()
        self.skip_semis()
        while self.at("import"):
            self.next()
            specs = []
            if self.at("("):
                self.next()
                self.skip_semis()
                while not self.at(")"):
                    specs.append(self.import_spec())
                    self.skip_semis()
                self.next()
            else:
                specs.append(self.import_spec())
            for alias, path in specs:
                imports[alias] = path
            self.skip_semis()
        while self.peek().kind != "eof":
            t = self.peek()
            if self.at("func"):
                self.next()
                if self.at("("):
                    raise GoError("line %d: methods are not supported" % t.line)
                name = self.ident()
                params = self.params()
                self.skip_result()
                body = self.block()
                decls.append(("func", name, ("funclit", params, body)))
            elif self.at("var") or self.at("const"):
                for name, node in self.var_decl()[1]:
                    decls.append(("var", name, node))
            elif self.at("type"):
                raise GoError("line %d: type declarations are not supported" % t.line)
            else:
                raise GoError("line %d: unexpected %r at top level" % (t.line, t.val))
            self.skip_semis()
        return imports, decls

    def import_spec(self):
        alias = None
        if self.peek().kind == "ident" or self.at("."):
            alias = self.next().val
        path = self.next()
        if path.kind != "str":
            raise GoError("line %d: bad import" % path.line)
        return (alias or path.val.rsplit("/", 1)[-1]), path.val

    def params(self):
        """'(' a, b string, c int ')' -> ['a', 'b', 'c']"""
        self.expect("(")
        groups, cur, depth = [], [], 0
        while True:
            t = self.next()
            if depth == 0 and t.kind == "op" and t.val in (",", ")"):
                if cur:
                    groups.append(cur)
                cur = []
                if t.val == ")":
                    break
                continue
            if t.kind == "op" and t.val in "([{":
                depth += 1
            elif t.kind == "op" and t.val in ")]}":
                depth -= 1
            cur.append(t)
        names = []
        for g in groups:
            if g[0].kind == "ident" and (len(g) == 1 or g[1].kind in ("ident",) or g[1].val in ("[", "*", "...")):
                names.append(g[0].val)
        return names

    def skip_result(self):
        depth = 0
        while True:
            t = self.peek()
            if depth == 0 and t.kind == "op" and t.val == "{":
                return
            if t.kind == "op" and t.val in "([":
                depth += 1
            elif t.kind == "op" and t.val in ")]":
                depth -= 1
            elif t.kind == "eof":
                raise GoError("unterminated function signature")
            self.next()

    # -- types
    def type_expr(self):
        t = self.peek()
        if self.at("["):
            self.next()
            if self.at("]"):
                self.next()
                return ("slice", self.type_expr())
            n = self.expr()
            self.expect("]")
            return ("array", n, self.type_expr())
        if self.at("*"):
            self.next()
            return ("ptr", self.type_expr())
        if self.at("map"):
            self.next()
            self.expect("[")
            k = self.type_expr()
            self.expect("]")
            return ("map", k, self.type_expr())
        if self.at("func"):
            self.next()
            self.params()
            if not (self.at(")") or self.at(",") or self.at("{") or self.at("]") or self.at(";")):
                self.type_expr()
            return ("functype",)
        if self.at("interface") or self.at("struct"):
            kw = self.next().val
            self.expect("{")
            if not self.at("}"):
                raise GoError("line %d: non-empty %s types are not supported" % (t.line, kw))
            self.expect("}")
            return ("named", kw + "{}")
        name = self.ident()
        if self.at("."):
            self.next()
            name += "." + self.ident()
        return ("named", name)

    # -- statements
    def block(self):
        self.expect("{")
        stmts = []
        self.skip_semis()
        while not self.at("}"):
            stmts.append(self.stmt())
            self.skip_semis()
        self.expect("}")
        return ("block", stmts)

    def var_decl(self):
        kw = self.next().val  # var / const
        specs = []
        if self.at("("):
            self.next()
            self.skip_semis()
            while not self.at(")"):
                specs.extend(self.var_spec())
                self.skip_semis()
            self.next()
        else:
            specs.extend(self.var_spec())
        return kw, specs

    def var_spec(self):
        names = [self.ident()]
        while self.at(","):
            self.next()
            names.append(self.ident())
        typ = None
        if not self.at("="):
            typ = self.type_expr()
        if self.at("="):
            self.next()
            vals = self.expr_list()
            if len(vals) != len(names):
                raise GoError("line %d: var with %d names, %d values" % (self.peek().line, len(names), len(vals)))
            return list(zip(names, vals))
        return [(nm, ("zero", typ)) for nm in names]

    def stmt(self):
        t = self.peek()
        if self.at("var") or self.at("const"):
            return ("vars", self.var_decl()[1])
        if self.at("return"):
            self.next()
            if self.at(";") or self.at("}"):
                return ("return", [])
            return ("return", self.expr_list())
        if self.at("if"):
            return self.if_stmt()
        if self.at("for"):
            return self.for_stmt()
        if self.at("continue") or self.at("break"):
            self.next()
            return (t.val,)
        if self.at("{"):
            return self.block()
        if t.kind == "ident" and t.val in ("switch", "select", "go", "defer", "goto", "type"):
            raise GoError("line %d: %s statements are not supported" % (t.line, t.val))
        return self.simple_stmt()

    def simple_stmt(self):
        lhs = self.expr_list()
        t = self.peek()
        if t.kind == "op" and t.val in (":=", "=", "+="):
            self.next()
            if self.at("range"):
                self.next()
                return ("range", lhs, t.val, self.expr())
            rhs = self.expr_list()
            return ("assign", t.val, lhs, rhs)
        if t.kind == "op" and t.val in ("++", "--"):
            self.next()
            return ("incdec", lhs[0], t.val)
        if len(lhs) != 1:
            raise GoError("line %d: expression list as statement" % t.line)
        return ("expr", lhs[0])

    def if_stmt(self):
        self.expect("if")
        init = None
        s = self.simple_stmt()
        if self.at(";"):
            self.next()
            init = s
            s = self.simple_stmt()
        if s[0] != "expr":
            raise GoError("line %d: bad if condition" % self.peek().line)
        body = self.block()
        els = None
        if self.at("else"):
            self.next()
            els = self.if_stmt() if self.at("if") else self.block()
        return ("if", init, s[1], body, els)

    def for_stmt(self):
        self.expect("for")
        if self.at("{"):
            return ("for", None, None, None, self.block())
        if self.at("range"):
            self.next()
            x = self.expr()
            return ("forrange", [], None, x, self.block())
        init = self.simple_stmt()
        if init[0] == "range":
            _, lhs, op, x = init
            return ("forrange", lhs, op, x, self.block())
        if self.at("{"):
            if init[0] != "expr":
                raise GoError("bad for condition")
            return ("for", None, init[1], None, self.block())
        self.expect(";")
        cond = None if self.at(";") else self.simple_stmt()[1]
        self.expect(";")
        post = None if self.at("{") else self.simple_stmt()
        return ("for", init, cond, post, self.block())

    # -- expressions
    def expr_list(self):
        out = [self.expr()]
        while self.at(","):
            self.next()
            out.append(self.expr())
        return out

    PREC = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3,
            "+": 4, "-": 4, "|": 4, "^": 4, "*": 5, "/": 5, "%": 5, "<<": 5, ">>": 5, "&": 5, "&^": 5}

    def expr(self, prec=1):
        left = self.unary()
        while True:
            t = self.peek()
            p = self.PREC.get(t.val) if t.kind == "op" else None
            if p is None or p < prec:
                return left
            self.next()
            right = self.expr(p + 1)
            left = ("bin", t.val, left, right)

    def unary(self):
        t = self.peek()
        if t.kind == "op" and t.val in ("!", "-", "+", "^"):
            self.next()
            return ("unary", t.val, self.unary())
        if t.kind == "op" and t.val == "&":
            self.next()
            return self.unary()  # pointers are the values themselves
        if t.kind == "op" and t.val == "*":
            self.next()
            return ("deref", self.unary())
        return self.primary()

    def primary(self):
        t = self.peek()
        if t.kind in ("str", "int", "float", "rune"):
            self.next()
            x = ("lit", t.kind, t.val)
        elif t.kind == "op" and t.val == "(":
            self.next()
            x = self.expr()
            self.expect(")")
            x = ("paren", x)
        elif t.kind == "op" and t.val == "[" or self.at("map"):
            x = ("type", self.type_expr())
        elif self.at("func"):
            self.next()
            params = self.params()
            self.skip_result()
            x = ("funclit", params, self.block())
        elif t.kind == "ident":
            self.next()
            x = ("ident", t.val)
        else:
            raise GoError("line %d: unexpected %r in expression" % (t.line, t.val))
        while True:
            if self.at("."):
                self.next()
                x = ("sel", x, self.ident())
            elif self.at("("):
                self.next()
                args, spread = [], False
                self.skip_semis()
                while not self.at(")"):
                    args.append(self.expr())
                    if self.at("..."):
                        self.next()
                        spread = True
                    if self.at(","):
                        self.next()
                    self.skip_semis()
                self.expect(")")
                x = ("call", x, args, spread)
            elif self.at("["):
                self.next()
                lo = None if self.at(":") else self.expr()
                if self.at(":"):
                    self.next()
                    hi = None if self.at("]") else self.expr()
                    self.expect("]")
                    x = ("slice", x, lo, hi)
                else:
                    self.expect("]")
                    x = ("index", x, lo)
            elif self.at("{") and self.is_type_node(x):
                x = ("composite", self.as_type(x), self.composite_body())
            else:
                return x

    @staticmethod
    def is_type_node(x):
        if x[0] == "type":
            return True
        # pkg.Name, e.g. config.Rule
        return x[0] == "sel" and x[1][0] == "ident" and x[2][:1].isupper() and x[1][1] in ("config", "regexp")

    @staticmethod
    def as_type(x):
        if x[0] == "type":
            return x[1]
        return ("named", x[1][1] + "." + x[2])

    def composite_body(self):
        """'{' elems '}' -> [(key node | None, value node)]; a value may be ("elided", elems)."""
        self.expect("{")
        elems = []
        self.skip_semis()
        while not self.at("}"):
            key = None
            val = self.elem()
            if self.at(":"):
                self.next()
                key = val
                val = self.elem()
            elems.append((key, val))
            if self.at(","):
                self.next()
            self.skip_semis()
        self.expect("}")
        return elems

    def elem(self):
        if self.at("{"):
            return ("elided", self.composite_body())
        if self.at("&") and self.at("{", 1):
            self.next()
            return ("elided", self.composite_body())
        return self.expr()


# ======================================================================
# regex generator (for secrets.NewSecret)

PRINTABLE = ("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ \t\n\r")
PRINTABLE_NO_NL = PRINTABLE[:-2]
DIGITS = "0123456789"
WORD = DIGITS + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_"
SPACE = "\t\n\f\r "
POSIX = {
    "alnum": DIGITS + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "alpha": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "digit": DIGITS, "lower": "abcdefghijklmnopqrstuvwxyz",
    "upper": "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "word": WORD, "space": SPACE + "\v",
    "xdigit": DIGITS + "abcdefABCDEF", "punct": "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    "blank": " \t",
}
POSIX_PY = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "lower": "a-z",
            "upper": "A-Z", "word": "\\w", "space": "\\s", "xdigit": "0-9a-fA-F",
            "punct": "!-/:-@\\[-`{-~", "blank": " \\t"}


class RegexGen:
    """Parse a (Go RE2 subset) regex and produce random strings matching it."""

    def __init__(self, pattern):
        self.p = pattern
        self.i = 0
        self.tree = self.alt()
        if self.i != len(self.p):
            raise GoError("regex: unexpected %r at %d" % (self.p[self.i], self.i))

    # nodes: ("lit", s) ("set", chars) ("cat", [..]) ("alt", [..]) ("rep", node, lo, hi) ("empty",)
    def alt(self):
        branches = [self.cat()]
        while self.i < len(self.p) and self.p[self.i] == "|":
            self.i += 1
            branches.append(self.cat())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def cat(self):
        items = []
        while self.i < len(self.p) and self.p[self.i] not in "|)":
            atom = self.atom()
            items.append(self.quant(atom))
        return ("cat", items)

    def quant(self, atom):
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c in "*+?":
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            elif c == "{":
                m = re.compile(r"\{(\d+)(,(\d*))?\}").match(p, self.i)
                if not m:
                    return atom
                self.i = m.end()
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            else:
                return atom
            if self.i < len(p) and p[self.i] == "?":
                self.i += 1  # lazy: same strings
            atom = ("rep", atom, lo, hi)
        return atom

    def atom(self):
        p = self.p
        c = p[self.i]
        if c == "(":
            self.i += 1
            if p.startswith("?", self.i):
                m = re.compile(r"\?(P?<\w+>|[imsU]*(-[imsU]*)?(:|\)))").match(p, self.i)
                if not m:
                    raise GoError("regex: unsupported group at %d" % self.i)
                self.i = m.end()
                if m.group(0).endswith(")") and not m.group(0).startswith("?P<") and not m.group(0).startswith("?<"):
                    return ("empty",)  # flags only
            node = self.alt()
            if self.i >= len(p) or p[self.i] != ")":
                raise GoError("regex: missing )")
            self.i += 1
            return node
        if c == "[":
            return self.char_class()
        if c == ".":
            self.i += 1
            return ("set", PRINTABLE_NO_NL)
        if c in "^$":
            self.i += 1
            return ("empty",)
        if c == "\\":
            return self.escape(in_class=False)
        if c in "*+?":
            raise GoError("regex: missing argument to repetition")
        self.i += 1
        return ("lit", c)

    def escape(self, in_class):
        p = self.p
        e = p[self.i + 1]
        self.i += 2
        if e == "d":
            return ("set", DIGITS)
        if e == "w":
            return ("set", WORD)
        if e == "s":
            return ("set", SPACE)
        if e in "DWS":
            base = {"D": DIGITS, "W": WORD, "S": SPACE}[e]
            return ("set", "".join(ch for ch in PRINTABLE if ch not in base))
        if e in "bBAz" and not in_class:
            return ("empty",)
        if e in "ntrfva":
            return ("lit", {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}[e])
        if e == "x":
            if p.startswith("{", self.i):
                j = p.index("}", self.i)
                ch = chr(int(p[self.i + 1:j], 16))
                self.i = j + 1
            else:
                ch = chr(int(p[self.i:self.i + 2], 16))
                self.i += 2
            return ("lit", ch)
        if e.isalnum():
            raise GoError("regex: unsupported escape \\%s" % e)
        return ("lit", e)

    def char_class(self):
        p = self.p
        self.i += 1
        neg = False
        if p.startswith("^", self.i):
            neg = True
            self.i += 1
        chars = []
        first = True
        while True:
            if self.i >= len(p):
                raise GoError("regex: missing ]")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if p.startswith("[:", self.i):
                j = p.index(":]", self.i)
                name = p[self.i + 2:j]
                if name not in POSIX:
                    raise GoError("regex: unknown class [:%s:]" % name)
                chars.extend(POSIX[name])
                self.i = j + 2
                continue
            lo = self.class_char()
            if isinstance(lo, str) and len(lo) > 1:  # \d, \w, ...
                chars.extend(lo)
                continue
            if p.startswith("-", self.i) and not p.startswith("-]", self.i):
                self.i += 1
                hi = self.class_char()
                if len(hi) != 1 or ord(hi) < ord(lo):
                    raise GoError("regex: bad range")
                chars.extend(chr(x) for x in range(ord(lo), ord(hi) + 1))
            else:
                chars.append(lo)
        if neg:
            excluded = set(chars)
            return ("set", "".join(ch for ch in PRINTABLE if ch not in excluded))
        seen = []
        for ch in chars:
            if ch not in seen:
                seen.append(ch)
        if any(ord(ch) > 0x7e for ch in seen):
            seen = [ch for ch in seen if ch in PRINTABLE] or seen
        return ("set", "".join(seen))

    def class_char(self):
        p = self.p
        if p[self.i] == "\\":
            node = self.escape(in_class=True)
            return node[1]
        c = p[self.i]
        self.i += 1
        return c

    def generate(self, rng):
        out = []
        self._gen(self.tree, rng, out)
        return "".join(out)

    def _gen(self, node, rng, out):
        kind = node[0]
        if kind == "lit":
            out.append(node[1])
        elif kind == "set":
            if not node[1]:
                raise GoError("regex: empty character class")
            out.append(node[1][rng.randrange(len(node[1]))])
        elif kind == "cat":
            for sub in node[1]:
                self._gen(sub, rng, out)
        elif kind == "alt":
            self._gen(node[1][rng.randrange(len(node[1]))], rng, out)
        elif kind == "rep":
            _, sub, lo, hi = node
            # reggen with limit 1: the upper bound is capped at 1
            cap = 1 if hi is None else min(hi, 1)
            count = lo + (rng.randrange(cap - lo + 1) if cap > lo else 0)
            for _ in range(count):
                self._gen(sub, rng, out)


# ======================================================================
# Go regex -> Python re

def go_regex_to_python(pat):
    """Translate an RE2 pattern to Python `re` syntax (raises GoError when it cannot)."""
    out = []
    i, n = 0, len(pat)
    # one frame per open group: flags set inside it ({flag: on}), wrapper open?
    frames = [{"flags": {}, "open": False, "m": False}]

    def wrapper(fr):
        on = "".join(sorted(f for f, v in fr["flags"].items() if v))
        off = "".join(sorted(f for f, v in fr["flags"].items() if not v))
        return "(?" + on + ("-" + off if off else "") + ":"

    while i < n:
        c = pat[i]
        fr = frames[-1]
        if c == "\\":
            e = pat[i + 1] if i + 1 < n else ""
            if e == "z":
                out.append(r"\Z")
            elif e in ("Q", "C", "p", "P"):
                raise GoError("regex: \\%s is not supported" % e)
            elif e == "x" and pat.startswith("{", i + 2):
                j = pat.index("}", i)
                out.append("\\U%08x" % int(pat[i + 3:j], 16))
                i = j + 1
                continue
            else:
                out.append(pat[i:i + 2])
            i += 2
        elif c == "[":
            j = i + 1
            cls = ["["]
            if j < n and pat[j] == "^":
                cls.append("^")
                j += 1
            first = True
            while True:
                if j >= n:
                    raise GoError("regex: missing ]")
                d = pat[j]
                if d == "]" and not first:
                    cls.append("]")
                    j += 1
                    break
                if d == "]" and first:
                    cls.append(r"\]")
                    j += 1
                elif pat.startswith("[:", j):
                    k = pat.index(":]", j)
                    name = pat[j + 2:k]
                    if name not in POSIX_PY:
                        raise GoError("regex: unknown class [:%s:]" % name)
                    cls.append(POSIX_PY[name])
                    j = k + 2
                elif d == "\\":
                    e = pat[j + 1]
                    if e in ("p", "P", "Q"):
                        raise GoError("regex: \\%s is not supported" % e)
                    if e == "x" and pat.startswith("{", j + 2):
                        k = pat.index("}", j)
                        cls.append("\\U%08x" % int(pat[j + 3:k], 16))
                        j = k + 1
                    else:
                        cls.append(pat[j:j + 2])
                        j += 2
                elif d in "[&~|":
                    cls.append("\\" + d)
                    j += 1
                else:
                    cls.append(d)
                    j += 1
                first = False
            out.append("".join(cls))
            i = j
        elif c == "(":
            if pat.startswith("(?", i):
                m = re.compile(r"\(\?([imsU]*)(?:-([imsU]*))?([:)])").match(pat, i)
                if m and (m.group(1) or m.group(2) or m.group(3) == ":"):
                    on, off, end = m.group(1), m.group(2) or "", m.group(3)
                    if "U" in on + off:
                        raise GoError("regex: (?U) is not supported")
                    if end == ")":  # flags for the rest of the current group
                        if fr["open"]:
                            out.append(")")
                        for f in on:
                            fr["flags"][f] = True
                        for f in off:
                            fr["flags"][f] = False
                        fr["m"] = fr["flags"].get("m", fr["m"])
                        out.append(wrapper(fr))
                        fr["open"] = True
                        i = m.end()
                        continue
                    out.append(m.group(0))
                    newm = fr["m"]
                    if "m" in on:
                        newm = True
                    if "m" in off:
                        newm = False
                    frames.append({"flags": {}, "open": False, "m": newm})
                    i = m.end()
                    continue
                m = re.compile(r"\(\?P?<(\w+)>").match(pat, i)
                if m:
                    out.append("(?P<%s>" % m.group(1))
                    frames.append({"flags": {}, "open": False, "m": fr["m"]})
                    i = m.end()
                    continue
                raise GoError("regex: unsupported group syntax at %d" % i)
            out.append("(")
            frames.append({"flags": {}, "open": False, "m": fr["m"]})
            i += 1
        elif c == ")":
            if fr["open"]:
                out.append(")")
            if len(frames) == 1:
                raise GoError("regex: unbalanced )")
            frames.pop()
            out.append(")")
            i += 1
        elif c == "|":
            if fr["open"]:
                out.append(")|" + wrapper(fr))
            else:
                out.append("|")
            i += 1
        elif c == "$":
            out.append("$" if fr["m"] else r"\Z")
            i += 1
        elif c == "{":
            m = re.compile(r"\{\d+(,\d*)?\}").match(pat, i)
            if m:
                out.append(m.group(0))
                i = m.end()
            else:
                out.append(r"\{")
                i += 1
        else:
            out.append(c)
            i += 1
    if len(frames) != 1:
        raise GoError("regex: missing )")
    if frames[0]["open"]:
        out.append(")")
    return "".join(out)


_PY_CACHE = {}


def py_regex(pattern):
    """Go pattern -> compiled Python regex, or a str saying why not."""
    if pattern not in _PY_CACHE:
        try:
            _PY_CACHE[pattern] = re.compile(go_regex_to_python(pattern), re.ASCII)
        except (GoError, re.error, ValueError) as e:
            _PY_CACHE[pattern] = "regex does not translate to Python: %s" % e
    return _PY_CACHE[pattern]


# ======================================================================
# gitleaks helpers, re-implemented from what their sources say

# utils/generate.go: GenerateSemiGenericRegex / GenerateUniqueTokenRegex pieces
CASE_INSENSITIVE = "(?i)"
IDENT_CI_PREFIX = r"[\w.-]{0,50}?(?i:"
IDENT_CI_SUFFIX = ")"
IDENT_PREFIX = r"[\w.-]{0,50}?(?:"
IDENT_SUFFIX = r""")(?:[ \t\w.-]{0,20})[\s'"]{0,3}"""
OPERATOR = r"(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)"
SECRET_PREFIX_UNIQUE = r"\b("
SECRET_PREFIX = r"""[\x60'"\s=]{0,5}("""
SECRET_SUFFIX = r""")(?:[\x60'"\s;]|\\[nr]|$)"""

# utils/generate.go: GenerateSampleSecrets, in source order
SAMPLE_FORMS = [
    ("ini - quoted1", '{i}Token="{s}"'),
    ("ini - quoted2", '{i}Token = "{s}"'),
    ("ini - unquoted1", "{i}Token={s}"),
    ("ini - unquoted2", "{i}Token = {s}"),
    ("json - string", '{\n    "{i}_token": "{s}"\n}'),
    ("json - escaped newline in string", '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}'),
    ("xml - element multiline", "<{i}Token>\n    {s}\n</{i}Token>"),
    ("yaml - singleline - unquoted", "{i}_token: {s}"),
    ("yaml - singleline - single quote", "{i}_token: '{s}'"),
    ("yaml - singleline - double quote", '{i}_token: "{s}"'),
    ("C#", 'string {i}Token = "{s}";'),
    ("go - normal", 'var {i}Token string = "{s}"'),
    ("go - short", '{i}Token := "{s}"'),
    ("go - backticks", "{i}Token := `{s}`"),
    ("java", 'String {i}Token = "{s}";'),
    ("kotlin - notype", 'var {i}Token = "{s}"'),
    ("php - string concat", '${i}Token .= "{s}"'),
    ("python - single quote", "{i}Token = '{s}'"),
    ("python - double quote", '{i}Token = "{s}"'),
    ("misc - comma operator", 'System.setProperty("{I}_TOKEN", "{s}")'),
    ("logstash", '  "{i}Token" => "{s}"'),
    ("make - recursive assignment", '{i}_TOKEN = "{s}"'),
    ("make - simple assignment", '{i}_TOKEN := "{s}"'),
    ("make - shell assignment", '{i}_TOKEN ::= "{s}"'),
    ("make - evaluated shell assignment", '{i}_TOKEN :::= "{s}"'),
    ("make - conditional assignment", '{i}_TOKEN ?= "{s}"'),
]
_PLACEHOLDER = re.compile(r"\{i\}|\{I\}|\{s\}")


def sample_secrets(ident, secret):
    ks = kinds_of(ident, secret) | {"template"}
    out = []
    for _name, form in SAMPLE_FORMS:
        rep = {"{i}": str(ident), "{I}": str(ident).upper(), "{s}": str(secret)}
        out.append(Txt.of(_PLACEHOLDER.sub(lambda m: rep[m.group(0)], form), ks, str(secret)))
    return out


def sample_secret(ident, secret):
    return Txt.of('%s_api_token = "%s"' % (ident, secret), kinds_of(ident, secret) | {"template"}, str(secret))


def go_sprintf(fmt, args):
    out, ai, i = [], 0, 0
    fmt = str(fmt)
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1] if i + 1 < len(fmt) else ""
        i += 2
        if verb == "%":
            out.append("%")
            continue
        if ai >= len(args):
            raise GoError("Sprintf: missing argument")
        a = args[ai]
        ai += 1
        if verb in "sv":
            out.append(a if isinstance(a, str) else str(a))
        elif verb == "d":
            out.append(str(int(a)))
        elif verb == "c":
            out.append(chr(a) if isinstance(a, int) else str(a))
        elif verb == "q":
            out.append(json.dumps(str(a), ensure_ascii=False))
        else:
            raise GoError("Sprintf: verb %%%s is not supported" % verb)
    if ai != len(args):
        raise GoError("Sprintf: extra arguments")
    return Txt.of("".join(out), kinds_of(fmt, *args))


class B64:
    def __init__(self, urlsafe, pad):
        self.urlsafe, self.pad = urlsafe, pad

    def encode(self, s):
        data = str(s).encode("utf-8", errors="surrogateescape")
        enc = base64.urlsafe_b64encode(data) if self.urlsafe else base64.b64encode(data)
        enc = enc.decode("ascii")
        if not self.pad:
            enc = enc.rstrip("=")
        return Txt.of(enc, kinds_of(s) | {"computed"})


def shannon_entropy(s):
    """gitleaks' formula: counts per character, divided by the byte length."""
    if not s:
        return 0.0
    counts = collections.Counter(s)
    inv = 1.0 / len(s.encode("utf-8", errors="surrogateescape"))
    e = 0.0
    for c in counts.values():
        f = c * inv
        e -= f * math.log2(f)
    return e


# ======================================================================
# interpreter

class Scope:
    def __init__(self, parent=None):
        self.vars = {}
        self.parent = parent

    def lookup(self, name):
        s = self
        while s is not None:
            if name in s.vars:
                return True, s.vars[name]
            s = s.parent
        return False, None

    def set(self, name, val):
        s = self
        while s is not None:
            if name in s.vars:
                s.vars[name] = val
                return
            s = s.parent
        raise GoError("assignment to undeclared %s" % name)


class Flow(Exception):
    def __init__(self, kind, value=None):
        self.kind, self.value = kind, value


class Closure:
    def __init__(self, params, body, scope, name):
        self.params, self.body, self.scope, self.name = params, body, scope, name


class Package:
    """The rules package: package-level vars and funcs of all files."""

    def __init__(self):
        self.vars = {}     # name -> (node, file imports)
        self.funcs = {}    # name -> (funclit node, file imports, path)
        self.values = {}   # evaluated vars
        self.evaluating = set()


class Interp:
    def __init__(self, pkg, imports, rng):
        self.pkg = pkg
        self.imports = imports
        self.rng = rng

    # -- statements
    def run_block(self, stmts, scope):
        for st in stmts:
            self.run(st, scope)

    def run(self, st, scope):
        k = st[0]
        if k == "block":
            self.run_block(st[1], Scope(scope))
        elif k == "vars":
            for name, node in st[1]:
                scope.vars[name] = self.eval_safe(node, scope)
        elif k == "assign":
            _, op, lhs, rhs = st
            if len(rhs) == 1 and len(lhs) > 1:
                val = self.eval(rhs[0], scope)
                if isinstance(val, Unres):
                    vals = [val] * len(lhs)
                elif not isinstance(val, tuple) or len(val) != len(lhs):
                    raise GoError("multi-value assignment mismatch")
                else:
                    vals = list(val)
            elif len(rhs) == len(lhs):
                vals = [self.eval_safe(r, scope) for r in rhs]
            else:
                raise GoError("assignment mismatch")
            for target, val in zip(lhs, vals):
                if op == "+=":
                    val = self.binop("+", self.eval(target, scope), val)
                self.assign(target, val, scope, define=(op == ":="))
        elif k == "incdec":
            cur = self.eval(st[1], scope)
            self.assign(st[1], cur + (1 if st[2] == "++" else -1), scope, False)
        elif k == "expr":
            self.eval(st[1], scope)
        elif k == "return":
            vals = [self.eval_safe(x, scope) for x in st[1]]
            raise Flow("return", vals[0] if len(vals) == 1 else tuple(vals))
        elif k in ("continue", "break"):
            raise Flow(k)
        elif k == "if":
            _, init, cond, body, els = st
            inner = Scope(scope)
            if init is not None:
                self.run(init, inner)
            c = self.eval(cond, inner)
            if isinstance(c, Unres):
                raise GoError("if condition unresolved: " + c.reason)
            if c:
                self.run_block(body[1], Scope(inner))
            elif els is not None:
                self.run(els, inner)
        elif k == "for":
            _, init, cond, post, body = st
            inner = Scope(scope)
            if init is not None:
                self.run(init, inner)
            for _ in range(LOOP_LIMIT):
                if cond is not None:
                    c = self.eval(cond, inner)
                    if isinstance(c, Unres):
                        raise GoError("loop condition unresolved")
                    if not c:
                        return
                try:
                    self.run_block(body[1], Scope(inner))
                except Flow as f:
                    if f.kind == "break":
                        return
                    if f.kind != "continue":
                        raise
                if post is not None:
                    self.run(post, inner)
            raise GoError("loop did not end after %d iterations" % LOOP_LIMIT)
        elif k == "forrange":
            _, lhs, op, xnode, body = st
            x = self.eval(xnode, scope)
            if isinstance(x, Unres):
                raise GoError("range over unresolved value: " + x.reason)
            if isinstance(x, GoMap):
                items = list(x.pairs)
            elif isinstance(x, list):
                items = list(enumerate(x))
            elif isinstance(x, str):
                items = []
                pos = 0
                for ch in str(x):
                    items.append((pos, ord(ch)))
                    pos += len(ch.encode("utf-8", errors="surrogateescape"))
            else:
                raise GoError("range over %s" % type(x).__name__)
            for key, val in items:
                inner = Scope(scope)
                for target, v in zip(lhs, (key, val)):
                    self.assign(target, v, inner, define=(op == ":="))
                try:
                    self.run_block(body[1], inner)
                except Flow as f:
                    if f.kind == "break":
                        return
                    if f.kind != "continue":
                        raise
        else:
            raise GoError("statement %s is not supported" % k)

    def assign(self, target, val, scope, define):
        if target[0] == "ident":
            name = target[1]
            if name == "_":
                return
            if define and name not in scope.vars:
                scope.vars[name] = val
            else:
                scope.set(name, val)
        elif target[0] == "sel":
            obj = self.eval(target[1], scope)
            if not isinstance(obj, Struct):
                raise GoError("field assignment on %s" % type(obj).__name__)
            obj.fields[target[2]] = val
        else:
            raise GoError("assignment target %s is not supported" % target[0])

    # -- expressions
    def eval_safe(self, node, scope):
        """eval, turning a GoError into an Unres marker."""
        try:
            return self.eval(node, scope)
        except GoError as e:
            return Unres(str(e))

    def eval(self, node, scope):
        k = node[0]
        if k == "lit":
            return Txt.of(node[2]) if node[1] == "str" else node[2]
        if k == "paren":
            return self.eval(node[1], scope)
        if k == "ident":
            return self.ident(node[1], scope)
        if k == "bin":
            return self.binop(node[1], self.eval(node[2], scope), self.eval(node[3], scope))
        if k == "unary":
            v = self.eval(node[2], scope)
            if isinstance(v, Unres):
                return v
            if node[1] == "!":
                return not v
            if node[1] == "-":
                return -v
            if node[1] == "+":
                return v
            raise GoError("unary %s is not supported" % node[1])
        if k == "deref":
            return self.eval(node[1], scope)
        if k == "sel":
            return self.select(node, scope)
        if k == "call":
            return self.call(node, scope)
        if k == "index":
            x = self.eval(node[1], scope)
            i = self.eval(node[2], scope)
            if isinstance(x, Unres):
                return x
            if isinstance(i, Unres):
                return i
            if isinstance(x, GoMap):
                return x.get(i)
            return x[i]
        if k == "slice":
            x = self.eval(node[1], scope)
            if isinstance(x, Unres):
                return x
            lo = 0 if node[2] is None else self.eval(node[2], scope)
            hi = None if node[3] is None else self.eval(node[3], scope)
            if isinstance(x, str):
                b = str(x).encode("utf-8", errors="surrogateescape")[lo:hi]
                return Txt.of(b.decode("utf-8", errors="surrogateescape"), kinds_of(x))
            return x[lo:hi]
        if k == "composite":
            return self.composite(node[1], node[2], scope)
        if k == "funclit":
            return Closure(node[1], node[2], scope, "func literal")
        if k == "zero":
            typ = node[1]
            if typ and typ[0] == "named" and typ[1] == "string":
                return Txt.of("")
            if typ and typ[0] == "named" and typ[1] in ("int", "float64"):
                return 0
            if typ and typ[0] == "named" and typ[1] == "bool":
                return False
            return None
        if k == "type":
            return ("typeval", node[1])
        raise GoError("expression %s is not supported" % k)

    def ident(self, name, scope):
        found, v = scope.lookup(name)
        if found:
            return v
        if name in ("nil",):
            return None
        if name == "true":
            return True
        if name == "false":
            return False
        if name in self.pkg.funcs:
            fn, imports, _path = self.pkg.funcs[name]
            return Closure(fn[1], fn[2], None, name), imports
        if name in self.pkg.vars:
            return self.pkg_var(name)
        if name in BUILTIN_FUNCS:
            return ("builtin", name)
        if name in self.imports:
            return ("pkg", self.imports[name])
        raise GoError("unknown identifier %s" % name)

    def pkg_var(self, name):
        if name not in self.pkg.values:
            if name in self.pkg.evaluating:
                raise GoError("initialisation cycle at %s" % name)
            self.pkg.evaluating.add(name)
            node, imports = self.pkg.vars[name]
            sub = Interp(self.pkg, imports, random.Random("%s|var|%s" % (SEED, name)))
            self.pkg.values[name] = sub.eval_safe(node, Scope())
            self.pkg.evaluating.discard(name)
        return self.pkg.values[name]

    def binop(self, op, a, b):
        if isinstance(a, Unres):
            return a
        if isinstance(b, Unres):
            return b
        if op == "+":
            if isinstance(a, str) and isinstance(b, str):
                return Txt.of(str(a) + str(b), kinds_of(a, b))
            return a + b
        if op == "==":
            return a == b
        if op == "!=":
            return a != b
        if op == "&&":
            return a and b
        if op == "||":
            return a or b
        if op in ("<", "<=", ">", ">="):
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        raise GoError("operator %s is not supported" % op)

    def select(self, node, scope):
        _, xnode, name = node
        if xnode[0] == "ident":
            found, _ = scope.lookup(xnode[1])
            if not found and xnode[1] in self.imports and xnode[1] not in self.pkg.vars:
                path = self.imports[xnode[1]]
                return pkg_member(path, name)
        x = self.eval(xnode, scope)
        if isinstance(x, Unres):
            return x
        if isinstance(x, Struct):
            if name in x.fields:
                return x.fields[name]
            return ("method", x, name)
        if isinstance(x, (Rx, B64)):
            return ("method", x, name)
        if isinstance(x, tuple) and x and x[0] == "pkgval":
            return pkg_member(x[1], x[2] + "." + name)
        raise GoError("selector .%s on %s is not supported" % (name, type(x).__name__))

    def composite(self, typ, elems, scope):
        while typ[0] == "ptr":
            typ = typ[1]
        if typ[0] in ("slice", "array"):
            et = typ[-1]
            out = []
            for key, v in elems:
                if key is not None:
                    raise GoError("keyed slice literal")
                out.append(self.elem_value(et, v, scope))
            return out
        if typ[0] == "map":
            pairs = []
            for key, v in elems:
                kv = self.elem_value(typ[1], key, scope)
                pairs.append((kv, self.elem_value(typ[2], v, scope)))
            return GoMap(pairs)
        if typ[0] == "named":
            fields = {}
            for key, v in elems:
                if key is None or key[0] != "ident":
                    raise GoError("struct literal of %s without field names" % typ[1])
                fields[key[1]] = self.elem_value(None, v, scope)
            return Struct(typ[1], fields)
        raise GoError("composite literal of %s" % (typ,))

    def elem_value(self, typ, v, scope):
        if v[0] == "elided":
            if typ is None:
                raise GoError("elided literal without type")
            return self.composite(typ, v[1], scope)
        return self.eval_safe(v, scope)

    def args(self, nodes, scope):
        return [self.eval_safe(a, scope) for a in nodes]

    def call(self, node, scope):
        _, fnode, argnodes, spread = node
        # conversions: []byte(x), string(x)
        if fnode[0] == "type" or (fnode[0] == "paren" and fnode[1][0] == "type"):
            (a,) = self.args(argnodes, scope)
            return a
        f = self.eval(fnode, scope)
        if isinstance(f, Unres):
            return f
        args = self.args(argnodes, scope)
        if isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], Closure):
            return self.call_closure(f[0], args, f[1])
        if isinstance(f, Closure):
            return self.call_closure(f, args, self.imports)
        if isinstance(f, tuple) and f[0] == "builtin":
            return self.builtin(f[1], args, spread)
        if isinstance(f, tuple) and f[0] == "pkgfunc":
            return call_pkg_func(self, f[1], f[2], args, spread)
        if isinstance(f, tuple) and f[0] == "method":
            return call_method(f[1], f[2], args)
        raise GoError("call of %r is not supported" % (f,))

    def call_closure(self, clo, args, imports):
        if len(args) != len(clo.params):
            raise GoError("call of %s with %d arguments" % (clo.name, len(args)))
        sc = Scope(clo.scope)
        for p, a in zip(clo.params, args):
            sc.vars[p] = a
        sub = self if imports is self.imports else Interp(self.pkg, imports, self.rng)
        try:
            sub.run_block(clo.body[1], sc)
        except Flow as f:
            if f.kind == "return":
                return f.value
            raise GoError("%s outside a loop" % f.kind)
        return None

    def builtin(self, name, args, spread):
        if name == "append":
            base = args[0]
            if isinstance(base, Unres):
                base = [base]
            elif base is None:
                base = []
            out = list(base)
            rest = args[1:]
            if spread:
                last = rest[-1]
                rest = rest[:-1]
                out.extend(rest)
                if isinstance(last, Unres):
                    out.append(last)
                elif last is not None:
                    out.extend(last)
            else:
                out.extend(rest)
            return out
        if name == "len":
            (a,) = args
            if isinstance(a, Unres):
                return a
            if isinstance(a, str):
                return len(str(a).encode("utf-8", errors="surrogateescape"))
            if isinstance(a, GoMap):
                return len(a.pairs)
            return len(a)
        if name == "string":
            (a,) = args
            if isinstance(a, int):
                return Txt.of(chr(a))
            return a
        raise GoError("builtin %s is not supported" % name)


BUILTIN_FUNCS = {"append", "len", "string"}


def pkg_member(path, name):
    short = path.rsplit("/", 1)[-1]
    if short == "base64" and name in ("StdEncoding", "RawStdEncoding", "URLEncoding", "RawURLEncoding"):
        return B64(urlsafe="URL" in name, pad=not name.startswith("Raw"))
    if short == "config" and name in ("AllowlistMatchOr", "AllowlistMatchAnd"):
        return 0 if name.endswith("Or") else 1
    return ("pkgfunc", short, name)


def _need(*vals):
    for v in vals:
        if isinstance(v, Unres):
            return v
    return None


def call_pkg_func(interp, pkg, name, args, spread):
    bad = _need(*args)
    qual = pkg + "." + name
    if qual == "utils.GenerateSampleSecrets":
        if bad:
            return [bad] * len(SAMPLE_FORMS)
        return sample_secrets(*args)
    if bad:
        return bad
    if qual == "utils.GenerateSampleSecret":
        return sample_secret(*args)
    if qual == "secrets.NewSecret":
        (pattern,) = args
        gen = RegexGen(str(pattern))
        out = gen.generate(interp.rng)
        check = py_regex(str(pattern))
        if isinstance(check, str) or not check.fullmatch(out):
            raise GoError("generated %r does not match its regex %r" % (out, str(pattern)))
        return Txt.of(out, kinds_of(pattern) | {"random"})
    if qual in ("utils.Numeric", "utils.Hex", "utils.AlphaNumeric", "utils.AlphaNumericExtendedShort",
                "utils.AlphaNumericExtended", "utils.AlphaNumericExtendedLong"):
        (size,) = args
        cls = {"Numeric": "[0-9]", "Hex": "[a-f0-9]", "AlphaNumeric": "[a-z0-9]",
               "AlphaNumericExtendedShort": "[a-z0-9_-]", "AlphaNumericExtended": r"[a-z0-9=_\-]",
               "AlphaNumericExtendedLong": r"[a-z0-9\/=_\+\-]"}[name]
        return Txt.of("%s{%s}" % (cls, size), kinds_of(size))
    if qual == "utils.Hex8_4_4_4_12":
        return Txt.of(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    if qual == "regexp.MustCompile":
        return Rx(args[0])
    if qual == "utils.GenerateSemiGenericRegex":
        identifiers, secret_re, ci = args
        bad = _need(*identifiers)
        if bad:
            return bad
        ids = IDENT_PREFIX + "|".join(identifiers) + IDENT_SUFFIX
        if ci:
            head = CASE_INSENSITIVE + ids
        else:
            head = IDENT_CI_PREFIX + ids + IDENT_CI_SUFFIX
        return Rx(head + OPERATOR + SECRET_PREFIX + secret_re + SECRET_SUFFIX)
    if qual == "utils.GenerateUniqueTokenRegex":
        secret_re, ci = args
        return Rx((CASE_INSENSITIVE if ci else "") + SECRET_PREFIX_UNIQUE + secret_re + SECRET_SUFFIX)
    if qual == "utils.MergeRegexps":
        return Rx("|".join(r.pattern for r in args))
    if qual == "utils.Validate":
        rule, tps, fps = args
        return Result(rule, tps or [], fps or [], False)
    if qual == "utils.ValidateWithPaths":
        rule, tps, fps = args
        return Result(rule, tps or GoMap([]), fps or GoMap([]), True)
    if qual == "fmt.Sprintf":
        return go_sprintf(args[0], args[1:])
    if qual == "strings.Join":
        items, sep = args
        bad = _need(*items)
        if bad:
            return bad
        return Txt.of(str(sep).join(items), kinds_of(sep, *items))
    if qual == "strings.ToUpper":
        return Txt.of(str(args[0]).upper(), kinds_of(args[0]))
    if qual == "strings.ToLower":
        return Txt.of(str(args[0]).lower(), kinds_of(args[0]))
    if qual == "strings.Repeat":
        return Txt.of(str(args[0]) * args[1], kinds_of(args[0]))
    raise GoError("%s is not supported" % qual)


def call_method(obj, name, args):
    bad = _need(*args)
    if bad:
        return bad
    if isinstance(obj, Rx) and name == "MatchString":
        rx = py_regex(obj.pattern)
        if isinstance(rx, str):
            raise GoError(rx)
        return rx.search(str(args[0])) is not None
    if isinstance(obj, Rx) and name == "String":
        return Txt.of(obj.pattern)
    if isinstance(obj, B64) and name == "EncodeToString":
        return obj.encode(args[0])
    if isinstance(obj, Struct) and obj.typ == "config.Allowlist" and name == "ContainsStopWord":
        s = str(args[0]).lower()
        if not s:
            return (False, Txt.of(""))
        for w in obj.fields.get("StopWords") or []:
            if isinstance(w, Unres):
                raise GoError("stop word unresolved")
            if str(w).lower() in s:
                return (True, w)
        return (False, Txt.of(""))
    raise GoError("method %s.%s is not supported" % (type(obj).__name__, name))


# ======================================================================
# detection (gitleaks' semantics, for the secrets of a positive)

class Allow:
    """One evaluated config.Allowlist."""

    def __init__(self, st):
        f = st.fields
        self.cond_and = f.get("MatchCondition", 0) == 1
        self.target = str(f.get("RegexTarget") or "")
        self.regexes, self.paths, self.stopwords, self.problems = [], [], [], []
        for r in f.get("Regexes") or []:
            self._add(self.regexes, r)
        for r in f.get("Paths") or []:
            self._add(self.paths, r)
        for w in f.get("StopWords") or []:
            if isinstance(w, Unres):
                self.problems.append(w.reason)
            else:
                self.stopwords.append(str(w).lower())
        self.commits = list(f.get("Commits") or [])

    def _add(self, lst, r):
        if isinstance(r, Unres):
            self.problems.append(r.reason)
            return
        rx = py_regex(r.pattern)
        if isinstance(rx, str):
            self.problems.append(rx)
        else:
            lst.append(rx)

    def allows(self, secret, match, line, path):
        target = {"match": match, "line": line}.get(self.target, secret)
        regex_ok = bool(target) and any(r.search(target) for r in self.regexes)
        low = secret.lower()
        stop_ok = bool(secret) and any(w in low for w in self.stopwords)
        if self.cond_and:
            checks = []
            if self.commits:
                checks.append(False)  # no commit here
            if self.paths:
                checks.append(bool(path) and any(p.search(path) for p in self.paths))
            if self.regexes:
                checks.append(regex_ok)
            if self.stopwords:
                checks.append(stop_ok)
            return bool(checks) and all(checks)
        return regex_ok or stop_ok


class Detector:
    def __init__(self, rule, global_allows):
        f = rule.fields
        self.rule_id = str(f.get("RuleID"))
        self.problem = None
        rx = f.get("Regex")
        self.rx = None
        if isinstance(rx, Unres):
            self.problem = "rule regex unresolved: " + rx.reason
        elif isinstance(rx, Rx):
            self.rx = py_regex(rx.pattern)
            if isinstance(self.rx, str):
                self.problem = self.rx
                self.rx = None
        self.path_rx = None
        if isinstance(f.get("Path"), Rx):
            p = py_regex(f["Path"].pattern)
            self.path_rx = None if isinstance(p, str) else p
        self.keywords = [str(k).lower() for k in (f.get("Keywords") or []) if isinstance(k, str)]
        self.secret_group = f.get("SecretGroup") or 0
        self.entropy = f.get("Entropy") or 0
        self.allows = []
        for a in f.get("Allowlists") or []:
            if isinstance(a, Struct):
                self.allows.append(Allow(a))
        self.allows.extend(global_allows)

    def secrets(self, text, path=""):
        """-> (secrets, n_matches, n_filtered); n_matches is None when no keyword occurs."""
        out, n_match, n_filtered = [], 0, 0
        if self.keywords:
            low = text.lower()
            if not any(k in low for k in self.keywords):
                return out, None, 0
        for m in self.rx.finditer(text):
            n_match += 1
            start = m.start()
            match = m.group(0).strip("\n")
            start += len(m.group(0)) - len(m.group(0).lstrip("\n"))
            secret = match
            if self.rule_id not in SECRET_WHOLE_MATCH and self.rx.groups >= 1:
                g = self.rx.search(match)
                if g is not None:
                    if self.secret_group:
                        if self.secret_group > self.rx.groups:
                            continue
                        secret = g.group(self.secret_group) or ""
                    else:
                        for s in g.groups():
                            if s:
                                secret = s
                                break
            if self.entropy and shannon_entropy(secret) <= self.entropy:
                n_filtered += 1
                continue
            # the line(s) the match spans
            ls = text.rfind("\n", 0, start) + 1
            le = text.find("\n", start + len(match))
            line = text[ls:] if le < 0 else text[ls:le]
            if any(a.allows(secret, match, line, path) for a in self.allows):
                n_filtered += 1
                continue
            if secret and secret not in out:
                out.append(secret)
        return out, n_match, n_filtered


# ======================================================================
# vendors

VENDORS = {
    "1password": "1Password", "adafruit": "Adafruit", "adobe": "Adobe", "age": "age",
    "airtable": "Airtable", "algolia": "Algolia", "alibaba": "Alibaba Cloud",
    "anthropic": "Anthropic", "artifactory": "JFrog Artifactory", "asana": "Asana",
    "atlassian": "Atlassian", "authress": "Authress", "aws": "AWS", "azure": "Microsoft Azure",
    "beamer": "Beamer", "bitbucket": "Bitbucket", "bittrex": "Bittrex",
    "clickhouse": "ClickHouse", "clojars": "Clojars", "cloudflare": "Cloudflare",
    "codecov": "Codecov", "cohere": "Cohere", "coinbase": "Coinbase", "confluent": "Confluent",
    "contentful": "Contentful", "curl": "curl", "databricks": "Databricks", "datadog": "Datadog",
    "definednetworking": "Defined Networking", "digitalocean": "DigitalOcean",
    "discord": "Discord", "doppler": "Doppler", "droneci": "Drone CI", "dropbox": "Dropbox",
    "duffel": "Duffel", "dynatrace": "Dynatrace", "easypost": "EasyPost", "etsy": "Etsy",
    "facebook": "Facebook", "fastly": "Fastly", "finicity": "Finicity", "finnhub": "Finnhub",
    "flickr": "Flickr", "flutterwave": "Flutterwave", "flyio": "Fly.io", "frameio": "Frame.io",
    "freemius": "Freemius", "freshbooks": "FreshBooks", "gcp": "Google Cloud",
    "generic": "Generic", "github": "GitHub", "gitlab": "GitLab", "gitter": "Gitter",
    "gocardless": "GoCardless", "grafana": "Grafana", "harness": "Harness",
    "hashicorp": "HashiCorp Terraform", "hashicorp_vault": "HashiCorp Vault", "heroku": "Heroku",
    "hubspot": "HubSpot", "huggingface": "Hugging Face", "infracost": "Infracost",
    "intercom": "Intercom", "intra42": "42 Intra", "jfrog": "JFrog", "jwt": "JWT",
    "kraken": "Kraken", "kubernetes": "Kubernetes", "kucoin": "KuCoin",
    "launchdarkly": "LaunchDarkly", "linear": "Linear", "linkedin": "LinkedIn", "lob": "Lob",
    "looker": "Looker", "mailchimp": "Mailchimp", "mailgun": "Mailgun", "mapbox": "Mapbox",
    "mattermost": "Mattermost", "maxmind": "MaxMind", "meraki": "Cisco Meraki",
    "messagebird": "MessageBird", "netlify": "Netlify", "newrelic": "New Relic",
    "notion": "Notion", "npm": "npm", "nuget": "NuGet", "nytimes": "New York Times",
    "octopusdeploy": "Octopus Deploy", "okta": "Okta", "openai": "OpenAI",
    "openshift": "Red Hat OpenShift", "perplexity": "Perplexity", "plaid": "Plaid",
    "planetscale": "PlanetScale", "postman": "Postman", "prefect": "Prefect",
    "privateai": "Private AI", "privatekey": "Private key", "pulumi": "Pulumi", "pypi": "PyPI",
    "rapidapi": "RapidAPI", "readme": "ReadMe", "rubygems": "RubyGems", "scalingo": "Scalingo",
    "sendbird": "Sendbird", "sendgrid": "SendGrid", "sendinblue": "Sendinblue (Brevo)",
    "sentry": "Sentry", "settlemint": "SettleMint", "shippo": "Shippo", "shopify": "Shopify",
    "sidekiq": "Sidekiq", "slack": "Slack", "snyk": "Snyk", "sonar": "SonarQube",
    "sourcegraph": "Sourcegraph", "square": "Square", "squarespace": "Squarespace",
    "stripe": "Stripe", "sumologic": "Sumo Logic", "teams": "Microsoft Teams",
    "telegram": "Telegram", "travisci": "Travis CI", "trello": "Trello", "twilio": "Twilio",
    "twitch": "Twitch", "twitter": "Twitter (X)", "typeform": "Typeform", "yandex": "Yandex",
    "zendesk": "Zendesk",
}
VENDOR_BY_RULE = {
    "aws-amazon-bedrock-api-key-long-lived": "AWS (Amazon Bedrock)",
    "aws-amazon-bedrock-api-key-short-lived": "AWS (Amazon Bedrock)",
    "pkcs12-file": "Private key",
}


# ======================================================================
# driver

def git(repo, *args):
    return subprocess.run(["git", "-C", repo] + list(args), check=True,
                          stdout=subprocess.PIPE).stdout


def load_sources(repo, commit):
    names = git(repo, "ls-tree", "--name-only", commit, RULES_DIR + "/").decode().split("\n")
    files = sorted(n for n in names if n.endswith(".go") and not n.endswith("_test.go"))
    out = {}
    for path in files + [BASE_CONFIG, MAIN_GO]:
        out[path] = git(repo, "show", "%s:%s" % (commit, path)).decode("utf-8")
    return out


MAX_DRAWS = 200  # seeds tried per rule function before keeping the first draw


def load_package(sources, skipped, notes):
    pkg, parsed = Package(), {}
    for path, src in sources.items():
        if path in (BASE_CONFIG, MAIN_GO):
            continue
        try:
            imports, decls = Parser(lex(src)).parse_file()
        except GoError as e:
            skipped["file does not parse"] += 1
            notes[(path, "does not parse: %s" % e)].append("")
            continue
        parsed[path] = (imports, decls)
        for kind, name, node in decls:
            if kind == "var":
                pkg.vars[name] = (node, imports)
            else:
                pkg.funcs[name] = (node, imports, path)
    return pkg, parsed


def load_global_allowlist(src, notes):
    """base.CreateGlobalConfig().Allowlists, evaluated by the interpreter."""
    out = []
    try:
        imports, decls = Parser(lex(src)).parse_file()
        pkg = Package()
        for kind, name, node in decls:
            if kind == "func":
                pkg.funcs[name] = (node, imports, BASE_CONFIG)
        fn = pkg.funcs["CreateGlobalConfig"][0]
        cfg = Interp(pkg, imports, random.Random(SEED + "|base")).call_closure(
            Closure(fn[1], fn[2], None, "CreateGlobalConfig"), [], imports)
        for a in cfg.fields.get("Allowlists") or []:
            al = Allow(a)
            for problem in al.problems:
                notes[("global allowlist", "entry not usable: %s" % problem)].append("")
            out.append(al)
    except (GoError, KeyError, AttributeError, TypeError) as e:
        notes[("global allowlist", "not read: %s" % e)].append("")
    return out


def shipped_rules(src):
    """Names of the rule functions main.go puts in gitleaks' config (comments ignored)."""
    toks = lex(src)
    out = set()
    for i in range(len(toks) - 4):
        a, dot, b, lp, rp = toks[i:i + 5]
        if (a.kind == "ident" and a.val == "rules" and dot.val == "." and b.kind == "ident"
                and lp.val == "(" and rp.val == ")"):
            out.add(b.val)
    return out


class Run:
    """One evaluation of a rule function with one seed."""

    def __init__(self):
        self.kind = None        # "result", "no-validate", "error", "other"
        self.error = None
        self.rule_id = None
        self.records = []       # dicts, see rule_run
        self.rejected = 0       # random samples gitleaks' Validate would reject


def rule_run(pkg, imports, path, name, node, global_allows, draw):
    run = Run()
    seed = "%s|%s|%s" % (SEED, path, name) + ("#%d" % draw if draw else "")
    interp = Interp(pkg, imports, random.Random(seed))
    try:
        res = interp.call_closure(Closure(node[1], node[2], None, name), [], imports)
    except GoError as e:
        run.kind, run.error = "error", str(e)
        return run
    if isinstance(res, Struct) and res.typ == "config.Rule":
        run.kind, run.rule_id = "no-validate", str(res.fields.get("RuleID"))
        return run
    if not isinstance(res, Result) or not isinstance(res.rule, Struct):
        run.kind = "other"
        return run
    run.kind = "result"
    rule = res.rule
    run.rule_id = str(rule.fields.get("RuleID"))
    det = Detector(rule, global_allows)
    det_nokw = Detector(rule, global_allows)
    det_nokw.keywords = []
    if det.rx is None and det.problem is None:
        n = (len(res.tps.pairs) + len(res.fps.pairs)) if res.with_paths else len(res.tps) + len(res.fps)
        run.records.append({"skip": "path-only rule (no regex, no text)", "count": n})
        return run
    for expect, coll, label in (("positive", res.tps, "tps"), ("negative", res.fps, "fps")):
        if isinstance(coll, Unres):
            run.records.append({"skip": "whole %s unresolved: %s" % (label, coll.reason)})
            continue
        if res.with_paths:
            items = [("%s[%s]" % (label, json.dumps(str(k))), v, str(k)) for k, v in coll.pairs]
        else:
            items = [("%s[%d]" % (label, i), v, "") for i, v in enumerate(coll)]
        for case, text, fpath in items:
            rec = {"case": case, "expect": expect}
            run.records.append(rec)
            if isinstance(text, Unres):
                rec["skip"] = "unresolved: %s" % text.reason
                continue
            if not isinstance(text, str):
                rec["skip"] = "not a string"
                continue
            if text == "":
                rec["skip"] = "empty text"
                continue
            rec["text"] = str(text)
            rec["kind"] = ("random" if "random" in text.kinds else
                           "template" if "template" in text.kinds else
                           "computed" if "computed" in text.kinds else "literal")
            rec["secrets"] = []
            random_part = "random" in text.kinds
            if expect == "positive":
                if det.problem:
                    if text.secret:
                        rec["secrets"] = [text.secret]
                        rec["note"] = "secret taken from the generator: %s" % det.problem
                    else:
                        rec["skip"] = "positive: %s" % det.problem
                    continue
                found, n_match, n_filtered = det.secrets(str(text), fpath)
                if found:
                    rec["secrets"] = found
                    if len(found) > 1:
                        rec["several"] = True
                    if text.secret and text.secret not in found:
                        rec["note"] = "found secret %s differs from the one generated, %s" % (
                            short(found[0]), short(text.secret))
                    continue
                why = ("no keyword in the text" if n_match is None else
                       "%d match(es), %d dropped by entropy/allowlists" % (n_match, n_filtered))
                if random_part:
                    run.rejected += 1
                if text.secret:
                    rec["secrets"] = [text.secret]
                    rec["fallback"] = True
                    rec["note"] = "Python finds no secret (%s); used the generated one" % why
                else:
                    rec["skip"] = "positive: regex finds no secret in Python"
                    rec["note"] = "Python finds no secret (%s): %s" % (why, short(str(text), 90))
            else:
                if res.with_paths and det.path_rx is not None and not det.path_rx.search(fpath):
                    rec["skip"] = "negative only by its file path"
                    continue
                if det.rx is None:
                    continue
                found, _, _ = det.secrets(str(text), fpath)
                if found:
                    rec["flagged"] = True
                    rec["note"] = "negative, yet our detection finds %s" % short(found[0])
                    if random_part:
                        run.rejected += 1
                elif det_nokw.secrets(str(text), fpath)[0]:
                    rec["keyword_only"] = True
                    rec["note"] = "negative only because none of the rule's keywords occurs"
    return run


def short(s, n=60):
    s = str(s)
    return json.dumps(s if len(s) <= n else s[:n] + "...", ensure_ascii=False)


def compact_cases(cases):
    cases = [c for c in cases if c]
    if not cases:
        return ""
    if len(cases) > 4:
        return " [%s .. %s, %d cases]" % (cases[0], cases[-1], len(cases))
    return " [%s]" % ", ".join(cases)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--out")
    ap.add_argument("--all-rules", action="store_true",
                    help="also read rule functions main.go does not put in gitleaks' config")
    opts = ap.parse_args()

    sources = load_sources(opts.repo, opts.commit)
    stats = collections.Counter()
    skipped = collections.Counter()
    notes = collections.defaultdict(list)  # (where, message) -> cases
    pkg, parsed = load_package(sources, skipped, notes)
    global_allows = load_global_allowlist(sources[BASE_CONFIG], notes)
    shipped = shipped_rules(sources[MAIN_GO])

    lines = []
    rule_ids = []
    for path in sorted(parsed):
        imports, decls = parsed[path]
        stem = path.rsplit("/", 1)[-1][:-3]
        for kind, name, node in decls:
            if kind != "func" or not name[:1].isupper() or node[1]:
                continue
            if name not in shipped and not opts.all_rules:
                skipped["rule function not in gitleaks' config (main.go), its cases never validated"] += 1
                notes[("%s %s()" % (path, name), "not called from main.go: skipped (--all-rules reads it)")].append("")
                continue
            first = None
            for draw in range(MAX_DRAWS):
                run = rule_run(pkg, imports, path, name, node, global_allows, draw)
                if first is None:
                    first = run
                if run.kind != "result" or run.rejected == 0:
                    break
            else:
                run = first
                notes[(run.rule_id, "every one of %d draws has random samples gitleaks would reject; kept the first"
                       % MAX_DRAWS)].append("")
            if run is not first or draw:
                stats["rules redrawn (a random sample gitleaks' Validate would reject)"] += 1
                notes[(run.rule_id, "draw #%d used: earlier draws had %d random sample(s) gitleaks' Validate "
                       "would reject" % (draw, first.rejected))].append("")
            if run.kind == "error":
                skipped["rule function not evaluated"] += 1
                notes[("%s %s()" % (path, name), "not evaluated: %s" % run.error)].append("")
                continue
            if run.kind == "other":
                continue
            rule_ids.append(run.rule_id)
            if run.kind == "no-validate":
                stats["rules without test cases (no Validate call)"] += 1
                notes[(run.rule_id, "no Validate call, no test cases")].append("")
                continue
            vendor = VENDOR_BY_RULE.get(run.rule_id) or VENDORS.get(stem)
            if vendor is None:
                raise SystemExit("no vendor for %s (%s)" % (run.rule_id, path))
            seen_texts = set()
            for rec in run.records:
                if "text" in rec and "skip" not in rec:
                    if (rec["text"], rec["expect"]) in seen_texts:
                        rec["skip"] = "same text as an earlier case of the rule"
                        rec.pop("note", None)
                    seen_texts.add((rec["text"], rec["expect"]))
                if "note" in rec:
                    notes[(run.rule_id, rec["note"])].append(rec.get("case", ""))
                if "skip" in rec:
                    skipped[rec["skip"]] += rec.get("count", 1)
                    continue
                stats["%s %s" % (rec["kind"], rec["expect"])] += 1
                for flag, label in (("several", "positives with several secrets"),
                                    ("fallback", "positives whose secret is the generated one (Python finds none)"),
                                    ("flagged", "negatives our Python detection flags"),
                                    ("keyword_only", "negatives only because no rule keyword occurs")):
                    if rec.get(flag):
                        stats[label] += 1
                lines.append(json.dumps(collections.OrderedDict([
                    ("peer", PEER), ("commit", opts.commit), ("path", path), ("rule", run.rule_id),
                    ("vendor", vendor), ("case", rec["case"]), ("text", rec["text"]),
                    ("secrets", rec["secrets"]), ("expect", rec["expect"])]), ensure_ascii=False))

    data = "".join(l + "\n" for l in lines)
    if opts.out:
        with open(opts.out, "w", encoding="utf-8") as fh:
            fh.write(data)
    else:
        sys.stdout.write(data)

    err = sys.stderr
    print("rule files: %d, rules read: %d" % (len(parsed), len(rule_ids)), file=err)
    print("samples written: %d" % len(lines), file=err)
    for k in sorted(stats):
        print("  %-72s %d" % (k, stats[k]), file=err)
    print("skipped: %d" % sum(skipped.values()), file=err)
    for k in sorted(skipped):
        print("  %-72s %d" % (k, skipped[k]), file=err)
    if notes:
        print("notes:", file=err)
        for (where, msg), cases in sorted(notes.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            print("  %s: %s%s" % (where, msg, compact_cases(cases)), file=err)


if __name__ == "__main__":
    main()
