#!/usr/bin/env python3
"""Extract trufflehog's detector unit-test cases as redaction fixtures (JSON Lines).

Usage:
    python3 extract_trufflehog.py REPO [--commit SHA] [--out FILE] [--keep-all-pieces]

    REPO      a trufflehog git checkout or bare mirror, e.g.
              /work/.mirror/trufflesecurity+trufflehog/repo
    --commit  the commit to read (default: the pinned COMMIT below); it is also
              the value of every line's "commit" field
    --out     write the fixtures there instead of stdout, e.g.
              --out tests/peers/trufflehog.jsonl
    --keep-all-pieces
              do not filter the pieces of a split want string (see "secrets")

    A summary (files read, files and tables without cases and why, cases kept,
    cases skipped by reason) goes to stderr.  The output is deterministic.

What it reads: every `pkg/detectors/**/*_test.go` at the commit, taken with
`git archive` (nothing is checked out), except `*_integration_test.go` and the
two integration tests whose names misspell it (`*_integ*ation_test.go`).  Files
with a `//go:build detectors` line are read like the others (one of them,
flexport, holds a pattern test).  It never runs Go: a small lexer and
expression evaluator reads the test tables.

Test tables: composite literals `[]struct{...}{...}`, `map[string]struct{...}{...}`,
or `[]T{...}` / `map[string]T{...}` for a struct type T declared in the file,
anywhere inside a Test function.  Elements are read by field name or by
position; a map key is the case name.  The text is the first string field
named input / data / Input / in / text.  The expectation is one of:
  * `want` / `wantRawV2` / `expectedPairs` / `Expected` / `expected` of type
    []string, [][]string (flattened) or map[string]struct{}: non-empty ->
    positive, nil / empty -> negative;
  * `shouldMatch bool` with `match string`: shouldMatch -> positive whose want
    is `match`, or the whole text when match is empty (what those tests
    compare); otherwise negative;
  * `wantMatched bool` / `wantCount int` with `wantRawV2 string`;
  * a table with only name and text fields, in a function that asserts no
    results (`len(results) != 0`, `Empty(results)`, ...) -> negative.
Tables of other shapes (verification tests with mocked HTTP, URL parsers,
host helpers) are counted in the summary and not read.

Table-less Test functions (and testify suite methods) with exactly one
`FromData(ctx, false, []byte(x))` call are read too: x is the text (or, for
`for _, x := range <list>`, each element of the list); `want := []string{...}`,
`Raw:` / `RawV2:` fields of expected results and `Equal(x, string(results[0].Raw))`
give a positive, a no-result assertion a negative.  Functions whose scanner is
built with options (`New(WithIgnorePattern(...))`), that verify, or that have
several FromData calls are skipped.

Values are resolved by the evaluator: "..." strings with Go escapes, `...`
raw strings (carriage returns dropped as Go does), identifiers bound by
const/var declarations of the file (single or grouped) or by `x := ...` /
`var x = ...` in the enclosing function (an identifier bound more than once
in that function is unresolvable), `+`, fmt.Sprintf with %s %d %v %q %x %c %%,
strings.Repeat / Join / ToUpper / ToLower / TrimSpace / ReplaceAll, base64 /
hex encoders, string(...) and []byte(...) conversions, slicing, and
[]string{...} / nil.  Anything else (helper calls, random generators such as
common.GenerateRandomPassword or gofakeit) makes the case unresolvable: it is
skipped and counted by reason, never guessed.

Cases are also skipped when the element sets `skip: true`, or when a negative
sets a non-default detector configuration in the element (`useFoundEndpoint`,
`skipUnverified`, `resolve`, ...): trufflehog's "no result" is then about the
configuration, not the text.  The Azure Entra tenant-id / client-id matcher
tests are skipped as a whole: they match identifiers, not secrets.  Cases
with empty text are dropped.  Tests directly in pkg/detectors are framework
tests and give no cases.

expect: "positive" when the want list is non-empty, else "negative".

secrets (what must be gone from the redacted text): each want string that
occurs verbatim in the text is kept as is.  trufflehog's want is often RawV2,
a concatenation the detector builds (id+secret, user:pass, key;secret, a JSON
object, a normalised URI), so a want not found verbatim is split at ';' '|'
',' and at ':' not followed by "//"; adjacent parts are joined back while the
joined run still occurs in the text, and a part that does not occur at all is
cut into the longest substrings (left to right) that do, which is how id+secret
comes apart.  Pieces lose surrounding quotes, brackets and slashes; pieces
shorter than 8 characters are dropped.  Unless --keep-all-pieces, a piece is
also dropped when it is a host name, a URL to a bare host, an e-mail address,
a bare word or camelCase key, a URL scheme, a PEM armour line or a $VARIABLE
placeholder: those occur in RawV2 beside the secret but need not be redacted.
For a connection URI with user:password, only pieces holding (part of) the
password are kept, or the percent-decoded password when the text has it in
clear.  A want with nothing left drops the case ("want not in text", or "only
identifiers ..."); secrets are deduplicated; a negative's secrets are [].

rule: the detector's directory under pkg/detectors ("aws/access_keys").
vendor: the DetectorType name that the directory's Type() method returns
(e.g. "JiraToken"), else the title-cased top directory.

Standard library only.  Written for boxfleet-redact; no trufflehog code is used.
"""

import argparse
import base64
import collections
import io
import json
import re
import subprocess
import sys
import tarfile
import urllib.parse

PEER = "trufflehog"
COMMIT = "3ab759fef4bb5935d4fe9ac68b503d05346b8364"
MIN_PIECE = 8

TEXT_FIELDS = ("input", "data", "Input", "in", "text")
LIST_WANT_FIELDS = ("want", "wantRawV2", "expectedPairs", "Expected", "expected")
# fields that only describe the case
NEUTRAL_FIELDS = {"name", "description", "noKeywords", "reason"}
# whole tests whose matches are identifiers, not secrets
IDENTIFIER_TESTS = {
    ("azure_entra", "Test_FindTenantIdMatches"),
    ("azure_entra", "Test_FindClientIdMatches"),
}


class Unresolved(Exception):
    """A value the evaluator will not compute; the message is the reason."""


# ---------------------------------------------------------------- lexer

class Tok:
    __slots__ = ("kind", "val", "pos", "line")

    def __init__(self, kind, val, pos, line):
        self.kind = kind  # ident, int, float, str, char, op, ';'
        self.val = val
        self.pos = pos
        self.line = line

    def __repr__(self):
        return "Tok(%s,%r)" % (self.kind, self.val)


OPS = sorted("""
<<= >>= &^= ... && || <- ++ -- == != <= >= := += -= *= /= %= &= |= ^= << >> &^
+ - * / % & | ^ < > = ! ( ) [ ] { } , ; . : ~
""".split(), key=len, reverse=True)

GO_KEYWORDS = set("""break case chan const continue default defer else fallthrough for func go goto
if import interface map package range return select struct switch type var""".split())

SIMPLE_ESC = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
              "t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"'}


def decode_escapes(body, quote):
    """Go interpreted string (or rune) body -> str.  Octal and \\x escapes are bytes."""
    out = bytearray()
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        i += 1
        if i >= n:
            raise Unresolved("bad escape")
        e = body[i]
        if e in SIMPLE_ESC and (e != "'" or quote == "'") and (e != '"' or quote == '"'):
            out += SIMPLE_ESC[e].encode()
            i += 1
        elif e == "x":
            out.append(int(body[i + 1:i + 3], 16))
            i += 3
        elif e in "01234567":
            out.append(int(body[i:i + 3], 8))
            i += 3
        elif e == "u":
            out += chr(int(body[i + 1:i + 5], 16)).encode("utf-8")
            i += 5
        elif e == "U":
            out += chr(int(body[i + 1:i + 9], 16)).encode("utf-8")
            i += 9
        else:
            raise Unresolved("bad escape \\" + e)
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        raise Unresolved("string is not valid UTF-8")


def lex(src):
    toks = []
    i = 0
    n = len(src)
    line = 1

    def need_semi():
        if not toks:
            return False
        t = toks[-1]
        if t.kind == "ident":
            return t.val not in GO_KEYWORDS or t.val in ("break", "continue", "fallthrough", "return")
        if t.kind in ("int", "float", "str", "char"):
            return True
        return t.kind == "op" and t.val in (")", "]", "}", "++", "--")

    while i < n:
        c = src[i]
        if c == "\n":
            if need_semi():
                toks.append(Tok(";", "\n", i, line))
            line += 1
            i += 1
        elif c in " \t\r":
            i += 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            chunk = src[i:j + 2]
            if "\n" in chunk and need_semi():
                toks.append(Tok(";", "\n", i, line))
            line += chunk.count("\n")
            i = j + 2
        elif c == "`":
            j = src.find("`", i + 1)
            raw = src[i + 1:j]
            toks.append(Tok("str", raw.replace("\r", ""), i, line))
            line += raw.count("\n")
            i = j + 1
        elif c == '"' or c == "'":
            j = i + 1
            while src[j] != c:
                j += 2 if src[j] == "\\" else 1
            body = src[i + 1:j]
            try:
                val = decode_escapes(body, c)
            except (Unresolved, ValueError) as e:
                val = Unresolved(str(e))
            if c == "'":
                toks.append(Tok("char", ord(val) if isinstance(val, str) and len(val) == 1 else val, i, line))
            else:
                toks.append(Tok("str", val, i, line))
            i = j + 1
        elif c.isalpha() or c == "_" or ord(c) > 127:
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_" or ord(src[j]) > 127):
                j += 1
            toks.append(Tok("ident", src[i:j], i, line))
            i = j
        elif c.isdigit() or (c == "." and i + 1 < n and src[i + 1].isdigit()):
            m = re.compile(r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|[0-9_]*\.?[0-9_]*(?:[eE][+-]?[0-9]+)?i?").match(src, i)
            text = m.group(0)
            kind = "float" if ("." in text or "e" in text.lower() and not text.lower().startswith("0x")) else "int"
            try:
                val = int(text.replace("_", ""), 0) if kind == "int" else text
            except ValueError:
                val = int(text.replace("_", "").lstrip("0") or "0", 8) if text.startswith("0") else text
            toks.append(Tok(kind, val, i, line))
            i += len(text)
        else:
            for op in OPS:
                if src.startswith(op, i):
                    toks.append(Tok("op" if op != ";" else ";", op, i, line))
                    i += len(op)
                    break
            else:
                raise ValueError("unexpected character %r at line %d" % (c, line))
    if need_semi():
        toks.append(Tok(";", "\n", n, line))
    return toks


def is_op(t, v):
    return t is not None and t.kind == "op" and t.val == v


OPEN = {"(": ")", "[": "]", "{": "}"}


def match_close(toks, i):
    """Index of the bracket closing toks[i]."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j]
        if t.kind == "op":
            if t.val in OPEN:
                depth += 1
            elif t.val in (")", "]", "}"):
                depth -= 1
                if depth == 0:
                    return j
    raise ValueError("unbalanced bracket at line %d" % toks[i].line)


def split_top(toks, a, b, sep):
    """Split toks[a:b] at depth-0 tokens equal to sep (',' or ';'); drop empty parts."""
    parts = []
    depth = 0
    start = a
    for j in range(a, b):
        t = toks[j]
        if t.kind == "op" and t.val in OPEN:
            depth += 1
        elif t.kind == "op" and t.val in (")", "]", "}"):
            depth -= 1
        elif depth == 0 and ((sep == ";" and t.kind == ";") or (sep != ";" and is_op(t, sep))):
            if start < j:
                parts.append((start, j))
            start = j + 1
    if start < b:
        parts.append((start, b))
    return [(x, y) for x, y in parts if not all(toks[k].kind == ";" for k in range(x, y))]


def strip_semis(toks, a, b):
    while a < b and toks[a].kind == ";":
        a += 1
    while b > a and toks[b - 1].kind == ";":
        b -= 1
    return a, b


# ---------------------------------------------------------------- file model

class GoFile:
    def __init__(self, path, src):
        self.path = path
        self.src = src
        self.toks = lex(src)
        self.globals = {}   # name -> list of (a, b) expr spans
        self.types = {}     # struct type name -> fields [(name, typestr)]
        self.funcs = []     # (name, body_open, body_close)
        self._scan_top()

    def _scan_top(self):
        toks = self.toks
        i = 0
        n = len(toks)
        while i < n:
            t = toks[i]
            if t.kind == "ident" and t.val in ("const", "var", "type"):
                if is_op(toks[i + 1], "("):
                    j = match_close(toks, i + 1)
                    for a, b in split_top(toks, i + 2, j, ";"):
                        self._spec(t.val, a, b, self.globals)
                    i = j + 1
                else:
                    j = self._stmt_end(i + 1)
                    self._spec(t.val, i + 1, j, self.globals)
                    i = j
            elif t.kind == "ident" and t.val == "func":
                j = i + 1
                if is_op(toks[j], "("):  # method receiver
                    j = match_close(toks, j) + 1
                name = toks[j].val
                k = j
                while not is_op(toks[k], "{"):
                    if toks[k].kind == "op" and toks[k].val in ("(", "["):
                        k = match_close(toks, k)
                    k += 1
                close = match_close(toks, k)
                self.funcs.append((name, k, close))
                i = close + 1
            else:
                i += 1

    def _stmt_end(self, i):
        toks = self.toks
        depth = 0
        while i < len(toks):
            t = toks[i]
            if t.kind == "op" and t.val in OPEN:
                depth += 1
            elif t.kind == "op" and t.val in (")", "]", "}"):
                depth -= 1
            elif t.kind == ";" and depth == 0:
                return i
            i += 1
        return i

    def _spec(self, kw, a, b, into):
        toks = self.toks
        a, b = strip_semis(toks, a, b)
        if a >= b:
            return
        if kw == "type":
            if toks[a].kind == "ident" and a + 2 < b and toks[a + 1].val == "struct" and is_op(toks[a + 2], "{"):
                self.types[toks[a].val] = self.struct_fields(a + 2)
            return
        # names [type] [= values]
        eq = None
        depth = 0
        for j in range(a, b):
            if toks[j].kind == "op" and toks[j].val in OPEN:
                depth += 1
            elif toks[j].kind == "op" and toks[j].val in (")", "]", "}"):
                depth -= 1
            elif depth == 0 and is_op(toks[j], "="):
                eq = j
                break
        if eq is None:
            return
        names = []
        j = a
        while j < eq and toks[j].kind == "ident":
            names.append(toks[j].val)
            if is_op(toks[j + 1], ","):
                j += 2
            else:
                break
        values = split_top(toks, eq + 1, b, ",")
        if len(values) != len(names):
            for nm in names:
                into.setdefault(nm, []).append(None)
            return
        for nm, span in zip(names, values):
            into.setdefault(nm, []).append(span)

    def struct_fields(self, open_idx):
        """Fields of `struct {` at open_idx: [(name, typestr)]."""
        toks = self.toks
        close = match_close(toks, open_idx)
        fields = []
        for a, b in split_top(toks, open_idx + 1, close, ";"):
            a, b = strip_semis(toks, a, b)
            names = []
            j = a
            while j < b and toks[j].kind == "ident":
                names.append(toks[j].val)
                if j + 1 < b and is_op(toks[j + 1], ","):
                    j += 2
                else:
                    j += 1
                    break
            typ = "".join(str(toks[k].val) for k in range(j, b) if toks[k].kind != "str")
            if not typ:  # embedded field
                typ, names = names[-1], names[-1:]
            for nm in names:
                fields.append((nm, typ))
        return fields, close

    def locals_of(self, body_open, body_close):
        """name -> list of (pos, span) for `x := e`, `x = e`, `var x = e` inside a body."""
        toks = self.toks
        out = collections.defaultdict(list)
        i = body_open + 1
        while i < body_close:
            prev = toks[i - 1]
            t = toks[i]
            at_stmt = prev.kind == ";" or is_op(prev, "{") or is_op(prev, "}")
            if at_stmt and t.kind == "ident" and t.val == "var":
                j = self._stmt_end(i + 1)
                if is_op(toks[i + 1], "("):
                    c = match_close(toks, i + 1)
                    for a, b in split_top(toks, i + 2, c, ";"):
                        tmp = {}
                        self._spec("var", a, b, tmp)
                        for k, v in tmp.items():
                            out[k].extend((i, s) for s in v)
                else:
                    tmp = {}
                    self._spec("var", i + 1, j, tmp)
                    for k, v in tmp.items():
                        out[k].extend((i, s) for s in v)
                i += 1
                continue
            if at_stmt and t.kind == "ident":
                names = []
                j = i
                while toks[j].kind == "ident":
                    names.append(toks[j].val)
                    if is_op(toks[j + 1], ","):
                        j += 2
                    else:
                        j += 1
                        break
                if toks[j].kind == "op" and toks[j].val in (":=", "=", "+="):
                    end = self._stmt_end(j + 1)
                    # stop at an opening '{' of a block for `for x := range ... {`
                    values = split_top(toks, j + 1, end, ",")
                    simple = toks[j].val != "+=" and len(values) == len(names)
                    for k, nm in enumerate(names):
                        out[nm].append((i, values[k] if simple else None))
            i += 1
        return out


# ---------------------------------------------------------------- evaluator

class Env:
    def __init__(self, gofile, local_bindings, pos):
        self.f = gofile
        self.locals = local_bindings
        self.pos = pos
        self.active = set()

    def lookup(self, name):
        binds = self.locals.get(name)
        if binds:
            if len(binds) > 1:
                raise Unresolved("identifier bound more than once in the function")
            pos, span = binds[0]
            if pos > self.pos:
                raise Unresolved("identifier bound after use")
            return self._eval_binding(name, span)
        g = self.f.globals.get(name)
        if g:
            if len(g) > 1:
                raise Unresolved("identifier declared more than once")
            return self._eval_binding(name, g[0])
        raise Unresolved("identifier not bound to a literal in the file")

    def _eval_binding(self, name, span):
        if span is None:
            raise Unresolved("identifier assigned from a multi-value or compound statement")
        if name in self.active:
            raise Unresolved("recursive binding")
        self.active.add(name)
        try:
            return Evaluator(self.f.toks, span[0], span[1], self).expr_all()
        finally:
            self.active.discard(name)


def go_quote(s):
    out = ['"']
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append("\\x%02x" % ord(ch))
        else:
            raise Unresolved("%q of a non-printable character")
    out.append('"')
    return "".join(out)


def go_sprintf(fmt, args):
    out = []
    i = 0
    ai = 0
    verb_re = re.compile(r"%([-+# 0]*)(\d*)(?:\.(\d+))?([a-zA-Z%])")
    while i < len(fmt):
        if fmt[i] != "%":
            out.append(fmt[i])
            i += 1
            continue
        m = verb_re.match(fmt, i)
        if not m:
            raise Unresolved("unsupported Sprintf verb")
        flags, width, prec, verb = m.groups()
        i = m.end()
        if verb == "%":
            out.append("%")
            continue
        if ai >= len(args):
            raise Unresolved("Sprintf with missing argument")
        arg = args[ai]
        ai += 1
        if verb in "sv" and isinstance(arg, str):
            s = arg
        elif verb in "dv" and isinstance(arg, int) and not isinstance(arg, bool):
            s = str(arg)
        elif verb == "v" and isinstance(arg, bool):
            s = "true" if arg else "false"
        elif verb == "q" and isinstance(arg, str):
            s = go_quote(arg)
        elif verb in "xX" and isinstance(arg, str):
            s = arg.encode("utf-8").hex()
        elif verb in "xX" and isinstance(arg, int):
            s = "%x" % arg
        elif verb == "c" and isinstance(arg, int):
            s = chr(arg)
        else:
            raise Unresolved("Sprintf %%%s of a %s" % (verb, type(arg).__name__))
        if verb == "X":
            s = s.upper()
        if prec and verb in "sq":
            s = s[:int(prec)]
        if width and len(s) < int(width):
            pad = int(width) - len(s)
            if "-" in flags:
                s = s + " " * pad
            elif "0" in flags and verb in "dxX":
                s = "0" * pad + s
            else:
                s = " " * pad + s
        out.append(s)
    if ai != len(args):
        raise Unresolved("Sprintf with extra arguments")
    return "".join(out)


PKG_FUNCS = {
    ("strings", "Repeat"): lambda s, n: s * n,
    ("strings", "ToUpper"): lambda s: s.upper(),
    ("strings", "ToLower"): lambda s: s.lower(),
    ("strings", "TrimSpace"): lambda s: s.strip(" \t\r\n\v\f"),
    ("strings", "ReplaceAll"): lambda s, a, b: s.replace(a, b),
    ("strings", "Join"): lambda xs, sep: sep.join(xs),
    ("strconv", "Itoa"): lambda n: str(n),
    ("hex", "EncodeToString"): lambda s: s.encode("utf-8").hex(),
}
B64 = {
    "StdEncoding": lambda s: base64.b64encode(s.encode("utf-8")).decode(),
    "URLEncoding": lambda s: base64.urlsafe_b64encode(s.encode("utf-8")).decode(),
    "RawStdEncoding": lambda s: base64.b64encode(s.encode("utf-8")).decode().rstrip("="),
    "RawURLEncoding": lambda s: base64.urlsafe_b64encode(s.encode("utf-8")).decode().rstrip("="),
}


class Evaluator:
    """Recursive-descent evaluation of one expression in toks[a:b]."""

    def __init__(self, toks, a, b, env):
        self.toks = toks
        self.i = a
        self.b = b
        self.env = env

    def peek(self, k=0):
        j = self.i + k
        return self.toks[j] if j < self.b else None

    def take(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, v):
        t = self.peek()
        if not is_op(t, v):
            raise Unresolved("unexpected syntax")
        self.i += 1

    def expr_all(self):
        v = self.expr()
        while self.peek() is not None and self.peek().kind == ";":
            self.i += 1
        if self.peek() is not None:
            raise Unresolved("unsupported expression (%s)" % self.peek().val)
        return v

    def expr(self):
        v = self.term()
        while is_op(self.peek(), "+") or is_op(self.peek(), "-"):
            op = self.take().val
            w = self.term()
            if op == "+" and isinstance(v, str) and isinstance(w, str):
                v = v + w
            elif isinstance(v, int) and isinstance(w, int) and not isinstance(v, bool):
                v = v + w if op == "+" else v - w
            else:
                raise Unresolved("unsupported operands for " + op)
        return v

    def term(self):
        v = self.unary()
        while self.peek() is not None and self.peek().kind == "op" and self.peek().val in ("*", "/", "%"):
            op = self.take().val
            w = self.unary()
            if not (isinstance(v, int) and isinstance(w, int)):
                raise Unresolved("unsupported operands for " + op)
            v = v * w if op == "*" else (v // w if op == "/" else v % w)
        return v

    def unary(self):
        t = self.peek()
        if is_op(t, "-"):
            self.i += 1
            v = self.unary()
            if not isinstance(v, int):
                raise Unresolved("unary minus on a non-number")
            return -v
        return self.postfix(self.primary())

    def postfix(self, v):
        while is_op(self.peek(), "["):
            close = match_close(self.toks, self.i)
            if close >= self.b:
                raise Unresolved("unexpected syntax")
            parts = []
            depth = 0
            start = self.i + 1
            for j in range(self.i + 1, close):
                t = self.toks[j]
                if t.kind == "op" and t.val in OPEN:
                    depth += 1
                elif t.kind == "op" and t.val in (")", "]", "}"):
                    depth -= 1
                elif depth == 0 and is_op(t, ":"):
                    parts.append((start, j))
                    start = j + 1
            parts.append((start, close))
            vals = [None if x == y else Evaluator(self.toks, x, y, self.env).expr_all() for x, y in parts]
            self.i = close + 1
            if len(vals) == 1:
                if isinstance(v, (str, list)) and isinstance(vals[0], int):
                    if isinstance(v, str):
                        raise Unresolved("indexing a string yields a byte")
                    v = v[vals[0]]
                else:
                    raise Unresolved("unsupported index")
            elif len(vals) == 2 and isinstance(v, str) and all(x is None or isinstance(x, int) for x in vals):
                if not v.isascii():
                    raise Unresolved("byte slicing of a non-ASCII string")
                v = v[vals[0] or 0: len(v) if vals[1] is None else vals[1]]
            else:
                raise Unresolved("unsupported slice")
        return v

    def args(self):
        """Parse '(' args ')' -> list of values."""
        open_idx = self.i
        close = match_close(self.toks, open_idx)
        vals = [Evaluator(self.toks, a, b, self.env).expr_all()
                for a, b in split_top(self.toks, open_idx + 1, close, ",")]
        self.i = close + 1
        return vals

    def composite_elems(self):
        """At '{': evaluate `{e, e, ...}` or `{k: v, ...}` -> list or dict."""
        open_idx = self.i
        close = match_close(self.toks, open_idx)
        items = split_top(self.toks, open_idx + 1, close, ",")
        self.i = close + 1
        lst, dct = [], {}
        for a, b in items:
            a, b = strip_semis(self.toks, a, b)
            colon = None
            depth = 0
            for j in range(a, b):
                t = self.toks[j]
                if t.kind == "op" and t.val in OPEN:
                    depth += 1
                elif t.kind == "op" and t.val in (")", "]", "}"):
                    depth -= 1
                elif depth == 0 and is_op(t, ":"):
                    colon = j
                    break
            if colon is None:
                lst.append(Evaluator(self.toks, a, b, self.env).expr_all())
            else:
                k = Evaluator(self.toks, a, colon, self.env).expr_all()
                if is_op(self.toks[colon + 1], "{") and match_close(self.toks, colon + 1) == b - 1:
                    v = None  # struct{}{} style empty value
                else:
                    v = Evaluator(self.toks, colon + 1, b, self.env).expr_all()
                dct[k] = v
        if lst and dct:
            raise Unresolved("mixed composite literal")
        return dct if dct else lst

    def skip_type(self):
        """Skip a type expression; return its text."""
        start = self.i
        t = self.peek()
        if is_op(t, "["):
            self.i = match_close(self.toks, self.i) + 1
            self.skip_type()
        elif t is not None and t.kind == "ident" and t.val == "map":
            self.i += 1
            self.i = match_close(self.toks, self.i) + 1
            self.skip_type()
        elif t is not None and t.kind == "ident" and t.val == "struct":
            self.i += 1
            self.i = match_close(self.toks, self.i) + 1
        elif is_op(t, "*"):
            self.i += 1
            self.skip_type()
        elif t is not None and t.kind == "ident":
            self.i += 1
            if is_op(self.peek(), ".") and self.peek(1) is not None and self.peek(1).kind == "ident":
                self.i += 2
        else:
            raise Unresolved("unsupported type")
        return "".join(str(self.toks[k].val) for k in range(start, self.i))

    def primary(self):
        t = self.peek()
        if t is None:
            raise Unresolved("empty expression")
        if t.kind in ("str", "char"):
            self.i += 1
            if isinstance(t.val, Unresolved):
                raise t.val
            return t.val
        if t.kind == "int":
            self.i += 1
            return t.val
        if t.kind == "float":
            raise Unresolved("floating-point value")
        if is_op(t, "("):
            close = match_close(self.toks, self.i)
            v = Evaluator(self.toks, self.i + 1, close, self.env).expr_all()
            self.i = close + 1
            return v
        if is_op(t, "[") or (t.kind == "ident" and t.val == "map"):
            typ = self.skip_type()
            if is_op(self.peek(), "{"):
                v = self.composite_elems()
                if typ.startswith("[]"):
                    if isinstance(v, dict):
                        if v:
                            raise Unresolved("keyed slice literal")
                        v = []
                    if typ == "[]string" and not all(isinstance(x, str) for x in v):
                        raise Unresolved("non-string slice element")
                elif isinstance(v, list):
                    if v:
                        raise Unresolved("unkeyed map literal")
                    v = {}
                return v
            if is_op(self.peek(), "(") and typ in ("[]byte", "[]rune"):
                vals = self.args()
                if len(vals) != 1 or not isinstance(vals[0], str):
                    raise Unresolved("unsupported conversion")
                return vals[0]
            raise Unresolved("unsupported type expression")
        if t.kind == "ident":
            name = t.val
            self.i += 1
            if name in ("true", "false"):
                return name == "true"
            if name == "nil":
                return None
            if is_op(self.peek(), "."):
                parts = [name]
                while is_op(self.peek(), ".") and self.peek(1) is not None and self.peek(1).kind == "ident":
                    parts.append(self.peek(1).val)
                    self.i += 2
                if not is_op(self.peek(), "("):
                    raise Unresolved("selector %s" % ".".join(parts))
                vals = self.args()
                return self.call(parts, vals)
            if is_op(self.peek(), "("):
                vals = self.args()
                if name == "string" and len(vals) == 1:
                    if isinstance(vals[0], str):
                        return vals[0]
                    if isinstance(vals[0], int):
                        return chr(vals[0])
                raise Unresolved("call to a helper function")
            if is_op(self.peek(), "{"):
                raise Unresolved("struct literal")
            return self.env.lookup(name)
        if is_op(t, "&"):
            raise Unresolved("address-of expression")
        raise Unresolved("unsupported expression (%s)" % t.val)

    def call(self, parts, vals):
        if parts == ["fmt", "Sprintf"]:
            if not vals or not isinstance(vals[0], str):
                raise Unresolved("Sprintf with a non-literal format")
            return go_sprintf(vals[0], vals[1:])
        if parts == ["fmt", "Sprint"] and all(isinstance(v, str) for v in vals):
            return "".join(vals)
        if len(parts) == 3 and parts[0] == "base64" and parts[2] == "EncodeToString" and parts[1] in B64:
            if len(vals) == 1 and isinstance(vals[0], str):
                return B64[parts[1]](vals[0])
        fn = PKG_FUNCS.get(tuple(parts))
        if fn is not None:
            try:
                types_ok = all(isinstance(v, (str, int, list)) and not isinstance(v, bool) for v in vals)
                if types_ok:
                    return fn(*vals)
            except (TypeError, AttributeError):
                pass
            raise Unresolved("%s with unsupported arguments" % ".".join(parts))
        raise Unresolved("call to %s" % ".".join(parts))


# ---------------------------------------------------------------- tables

def find_tables(gf, body_open, body_close):
    """Yield (fields, elems_open, elems_close, is_map, pos) for test tables in a body."""
    toks = gf.toks
    i = body_open + 1
    while i < body_close:
        t = toks[i]
        fields = None
        is_map = False
        j = None
        if is_op(t, "[") and is_op(toks[i + 1], "]"):
            k = i + 2
            if toks[k].kind == "ident" and toks[k].val == "struct" and is_op(toks[k + 1], "{"):
                fields, close = gf.struct_fields(k + 1)
                j = close + 1
            elif toks[k].kind == "ident" and toks[k].val in gf.types and is_op(toks[k + 1], "{"):
                fields, _ = gf.types[toks[k].val]
                j = k + 1
        elif t.kind == "ident" and t.val == "map" and is_op(toks[i + 1], "["):
            k = match_close(toks, i + 1) + 1
            if toks[k].kind == "ident" and toks[k].val == "struct" and is_op(toks[k + 1], "{"):
                fields, close = gf.struct_fields(k + 1)
                j = close + 1
                is_map = True
            elif toks[k].kind == "ident" and toks[k].val in gf.types and is_op(toks[k + 1], "{"):
                fields, _ = gf.types[toks[k].val]
                j = k + 1
                is_map = True
        if fields and j is not None and is_op(toks[j], "{"):  # struct{} sets are not tables
            close = match_close(toks, j)
            yield fields, j, close, is_map, i
            i = close + 1
        else:
            i += 1


def table_roles(fields):
    names = dict(fields)
    text = next((f for f in TEXT_FIELDS if names.get(f) == "string"), None)
    want = None
    kind = None
    for f in LIST_WANT_FIELDS:
        if f in names and names[f] in ("[]string", "[][]string", "map[string]struct{}"):
            want, kind = f, "list"
            break
    if want is None and names.get("shouldMatch") == "bool":
        want, kind = "shouldMatch", "should"
    if want is None and (names.get("wantMatched") == "bool" or names.get("wantCount") == "int") \
            and names.get("wantRawV2") == "string":
        want, kind = "wantRawV2", "rawv2"
    return text, want, kind


def element_values(gf, a, b):
    """Split an element literal `{...}` at toks[a:b] into {field: span} or [span...]."""
    toks = gf.toks
    a, b = strip_semis(toks, a, b)
    # allow `T{...}` and `&T{...}`
    while a < b and not is_op(toks[a], "{"):
        a += 1
    if a >= b or match_close(toks, a) != b - 1:
        return None
    keyed, positional = {}, []
    for x, y in split_top(toks, a + 1, b - 1, ","):
        x, y = strip_semis(toks, x, y)
        if toks[x].kind == "ident" and x + 1 < y and is_op(toks[x + 1], ":"):
            keyed[toks[x].val] = (x + 2, y)
        else:
            positional.append((x, y))
    if keyed and positional:
        return None
    return keyed if keyed else positional


def function_asserts_no_results(gf, body_open, body_close):
    src = gf.src[gf.toks[body_open].pos:gf.toks[body_close].pos]
    return re.search(r"len\((?:results|got|res)\)\s*(?:!=\s*0|>\s*0)|Empty\((?:t,\s*)?(?:results|got)\)", src) is not None


NO_RESULT_RE = re.compile(
    r"len\((?:results|got|res)\)\s*(?:!=\s*0|>\s*0)|\bEmpty\((?:t,\s*)?(?:results|got)\)|"
    r"\bLen\((?:t,\s*)?(?:results|got),\s*0\)")


def inline_case(gf, fname, bo, bc):
    """A table-less test function that feeds one literal to FromData.

    Returns None when the function has no FromData call, a reason string when
    it cannot be read, else (text, want list)."""
    toks = gf.toks
    calls = [i for i in range(bo, bc) if toks[i].kind == "ident" and toks[i].val == "FromData"
             and is_op(toks[i + 1], "(") and is_op(toks[i - 1], ".")]
    if not calls:
        return None
    if len(calls) > 1:
        return "several FromData calls"
    i = calls[0]
    close = match_close(toks, i + 1)
    args = split_top(toks, i + 2, close, ",")
    if len(args) != 3:
        return "FromData with unexpected arguments"
    if not (args[1][1] - args[1][0] == 1 and toks[args[1][0]].val == "false"):
        return "FromData called with verification on"
    env = Env(gf, gf.locals_of(bo, bc), i)
    texts = None
    a2, b2 = args[2]
    # []byte(x) where x is the variable of `for _, x := range <list>`
    if b2 - a2 == 6 and is_op(toks[a2], "[") and toks[a2 + 2].val == "byte" \
            and is_op(toks[a2 + 3], "(") and toks[a2 + 4].kind == "ident":
        var = toks[a2 + 4].val
        for j in range(bo, i):
            if toks[j].kind == "ident" and toks[j].val == "for" and is_op(toks[j + 2], ",") \
                    and toks[j + 3].val == var and is_op(toks[j + 4], ":=") and toks[j + 5].val == "range":
                k = j + 6
                while k < i and not is_op(toks[k], "{"):
                    k += 1
                try:
                    texts = Evaluator(toks, j + 6, k, env).expr_all()
                except Unresolved as e:
                    return "text: %s" % e
                if not (isinstance(texts, list) and all(isinstance(x, str) for x in texts)):
                    return "range over a non-string list"
                break
    if texts is None:
        try:
            text = Evaluator(toks, a2, b2, env).expr_all()
        except Unresolved as e:
            return "text: %s" % e
        if not isinstance(text, str):
            return "text is not a string"
        texts = [text]
    body = gf.src[toks[bo].pos:toks[bc].pos]
    if re.search(r"\bNew\(\s*With\w*\(", body):
        return "scanner built with options (ignore patterns, account lists)"
    negative = NO_RESULT_RE.search(body) is not None
    want = []
    # want := []string{...}
    binds = env.locals.get("want")
    if binds:
        try:
            w = env.lookup("want")
        except Unresolved as e:
            return "want: %s" % e
        if not (isinstance(w, list) and all(isinstance(x, str) for x in w)):
            return "want is not a list of strings"
        want.extend(w)
    # Raw: / RawV2: fields of expected detectors.Result literals; s.Equal(x, string(results[0].Raw))
    for j in range(bo, bc):
        t = toks[j]
        span = None
        if t.kind == "ident" and t.val in ("Raw", "RawV2") and is_op(toks[j + 1], ":"):
            end = j + 2
            depth = 0
            while end < bc:
                u = toks[end]
                if u.kind == "op" and u.val in OPEN:
                    depth += 1
                elif u.kind == "op" and u.val in (")", "]", "}"):
                    if depth == 0:
                        break
                    depth -= 1
                elif depth == 0 and (is_op(u, ",") or u.kind == ";"):
                    break
                end += 1
            span = (j + 2, end)
        elif t.kind == "ident" and t.val == "Equal" and is_op(toks[j + 1], "("):
            c = match_close(toks, j + 1)
            parts = split_top(toks, j + 2, c, ",")
            if parts and "results" in gf.src[toks[parts[-1][0]].pos:toks[parts[-1][1] - 1].pos + 1]:
                span = parts[-2] if len(parts) >= 2 else None
        if span is not None:
            try:
                w = Evaluator(toks, span[0], span[1], env).expr_all()
            except Unresolved as e:
                return "want: %s" % e
            if not isinstance(w, str):
                return "want is not a string"
            if w not in want:
                want.append(w)
    if want and negative:
        return "both a no-result assertion and expected results"
    if not want and not negative:
        return "expectation not recognised"
    if want and len(texts) > 1:
        return "loop over inputs with expected results"
    return texts, want


def is_zero(v):
    return v is None or v is False or v == 0 or v == "" or v == [] or v == {}


# ---------------------------------------------------------------- secrets

def longest_pieces(s, text):
    """Cut s into the longest left-to-right substrings occurring in text."""
    pieces = []
    i = 0
    n = len(s)
    while i < n:
        # longest j with s[i:j] in text, by binary search on monotone property
        lo, hi = i, n
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if s[i:mid] in text:
                lo = mid
            else:
                hi = mid - 1
        if lo - i >= MIN_PIECE:
            pieces.append(s[i:lo])
            i = lo
        else:
            i += 1
    return pieces


# pieces that name a place or a person rather than hold a secret
IDENTIFIER_RE = re.compile(
    r"^(?:[A-Za-z][A-Za-z0-9+.-]*://)?(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,12}(?::\d{1,5})?/?$"  # host, URL without path
    r"|^[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9.-]+(?::\d{1,5})?/?$"                        # URL to a bare host
    r"|^[\w.+-]+@[\w-]+(?:\.[\w-]+)+$"                                                 # e-mail address
    r"|^[a-z]+$|^[A-Z]+$|^[A-Z]?[a-z]+(?:[A-Z][a-z]+)*$"                                   # a word or camelCase key
    r"|^[A-Za-z][A-Za-z0-9+.-]*:/?/?$"                                                     # a URL scheme
    r"|^-----(?:BEGIN|END) [A-Z0-9 ]+-----$"                                               # PEM armour
    r"|^\$\{?\w+\}?$")                                                                       # $VARIABLE placeholder
SEP_RE = re.compile(r"([;|,]|:(?!//))")
URI_CRED_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/@\s:]*):([^/@\s]*)@")
EDGE = "\"'{}[]()/ \t\n"


def pieces_of(w, text):
    """Pieces (>= MIN_PIECE) of a want string that is not verbatim in the text."""
    items = SEP_RE.split(w)
    parts, seps = items[0::2], items[1::2]
    pieces = []
    i = 0
    while i < len(parts):
        cur = parts[i]
        j = i
        if cur and cur in text:
            # grow across separators while the joined run still occurs in the text
            while j + 1 < len(parts) and cur + seps[j] + parts[j + 1] in text:
                cur = cur + seps[j] + parts[j + 1]
                j += 1
            pieces.append(cur)
        elif cur:
            pieces.extend(longest_pieces(cur, text))
        i = j + 1
    out = []
    for p in pieces:
        p = p.strip(EDGE)
        if len(p) >= MIN_PIECE and p not in out:
            out.append(p)
    return out


def secrets_for(want, text, keep_all):
    """(secrets, None) or (None, reason the case is dropped)."""
    out = []
    for w in want:
        if not w:
            continue
        if w in text:
            pieces = [w]
        else:
            pieces = pieces_of(w, text)
            m = URI_CRED_RE.match(w)
            if m and len(m.group(2)) > 0:
                # a normalised connection URI: what matters is the part holding the password
                pw = m.group(2)
                pieces = [p for p in pieces if pw in p or p in pw]
                plain = urllib.parse.unquote(pw)
                if not pieces and plain != pw and len(plain) >= MIN_PIECE and plain in text:
                    pieces = [plain]  # the URI percent-encodes a password the text has in clear
            if not pieces:
                return None, "want not in text"
            if not keep_all:
                pieces = [p for p in pieces if not IDENTIFIER_RE.match(p)]
                if not pieces:
                    return None, "only identifiers (hosts, e-mails, words) of the want in text"
        for p in pieces:
            if p not in out:
                out.append(p)
    return out, None


# ---------------------------------------------------------------- driver

def vendor_names(sources):
    """dir -> DetectorType name from the non-test files of that dir."""
    out = {}
    type_re = re.compile(r"func\s*\(\s*\w*\s*\*?\w+\s*\)\s*Type\(\)[^{]*\{\s*return\s+detector_typepb\.DetectorType_(\w+)")
    for path, src in sources.items():
        if path.endswith("_test.go"):
            continue
        d = path.rsplit("/", 1)[0]
        m = type_re.search(src)
        if m and d not in out:
            out[d] = m.group(1)
    return out


def is_integration(path):
    base = path.rsplit("/", 1)[-1]
    return base.endswith("_integration_test.go") or re.search(r"_integ\w*ation_test\.go$", base) is not None


def read_tree(repo, commit):
    data = subprocess.run(["git", "-C", repo, "archive", commit, "pkg/detectors"],
                          check=True, capture_output=True).stdout
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for m in tar.getmembers():
            if m.isfile() and m.name.endswith(".go"):
                out[m.name] = tar.extractfile(m).read().decode("utf-8")
    return out


def extract(repo, commit, keep_all=False):
    sources = read_tree(repo, commit)
    vendors = vendor_names(sources)
    stats = collections.Counter()
    skipped = collections.Counter()
    skipped_examples = collections.defaultdict(list)
    empty_files = collections.defaultdict(list)
    notes = collections.defaultdict(list)
    records = []
    tables_ignored = collections.defaultdict(list)

    def skip(reason, path, case):
        skipped[reason] += 1
        if len(skipped_examples[reason]) < 5:
            skipped_examples[reason].append("%s: %s" % (path, case))

    test_files = sorted(p for p in sources if p.endswith("_test.go"))
    for path in test_files:
        src = sources[path]
        if is_integration(path):
            stats["integration files excluded"] += 1
            continue
        if re.search(r"^//go:build", src, re.M):
            stats["build-tagged (//go:build) files read"] += 1
        stats["test files read"] += 1
        d = path.rsplit("/", 1)[0]
        rule = d[len("pkg/detectors/"):] if d.startswith("pkg/detectors/") else ""
        if not rule:
            empty_files["framework test in pkg/detectors itself (no detector)"].append(path)
            continue
        top = rule.split("/")[0]
        vendor = vendors.get(d) or vendors.get("pkg/detectors/" + top) or top.replace("_", " ").title()
        try:
            gf = GoFile(path, src)
        except (ValueError, IndexError) as e:
            empty_files["could not lex/parse the file: %s" % e].append(path)
            continue
        n_before = len(records)
        file_reasons = collections.Counter()
        seen_tables = 0
        for fname, bo, bc in gf.funcs:
            if not fname.startswith("Test"):
                continue
            local = None
            tables = list(find_tables(gf, bo, bc))
            if not tables:
                rec = inline_case(gf, fname, bo, bc)
                if rec is None:
                    continue
                if isinstance(rec, str):
                    skip("inline test: " + rec, path, fname)
                    continue
                texts, w = rec
                for k, text in enumerate(texts):
                    case_name = fname if len(texts) == 1 else "%s#%d" % (fname, k + 1)
                    if text == "":
                        skip("empty text", path, case_name)
                        continue
                    secrets, why = secrets_for(w, text, keep_all) if w else ([], None)
                    if secrets is None:
                        skip(why, path, case_name)
                        continue
                    stats["cases from inline (table-less) test functions"] += 1
                    records.append({
                        "peer": PEER, "commit": commit, "path": path, "rule": rule,
                        "vendor": vendor, "case": case_name, "text": text,
                        "secrets": secrets, "expect": "positive" if w else "negative",
                    })
                continue
            for fields, eo, ec, is_map, tpos in tables:
                text_f, want_f, kind = table_roles(fields)
                fnames = [f for f, _ in fields]
                why = None
                if (top, fname) in IDENTIFIER_TESTS:
                    why = "identifier matcher test (not secrets)"
                elif text_f is None:
                    why = "table without a text field (%s)" % ",".join(fnames)
                elif want_f is None:
                    if len(set(fnames) - NEUTRAL_FIELDS - {text_f}) == 0 and function_asserts_no_results(gf, bo, bc):
                        kind = "none"
                    else:
                        why = "table without a detection expectation (%s)" % ",".join(fnames)
                if why:
                    file_reasons[why] += 1
                    tables_ignored[why].append("%s %s" % (path, fname))
                    continue
                seen_tables += 1
                stats["tables read"] += 1
                if local is None:
                    local = gf.locals_of(bo, bc)
                env = Env(gf, local, tpos)
                role_fields = {"name", text_f, want_f, "match", "wantMatched", "wantCount"}
                config_fields = [f for f in fnames if f not in role_fields and f not in NEUTRAL_FIELDS and f != "skip"]
                elems = split_top(gf.toks, eo + 1, ec, ",")
                for idx, (a, b) in enumerate(elems):
                    a, b = strip_semis(gf.toks, a, b)
                    case_name = None
                    if is_map:
                        colon = next((j for j in range(a, b) if is_op(gf.toks[j], ":")), None)
                        if colon is None:
                            skip("unparsed table element", path, "#%d" % idx)
                            continue
                        try:
                            case_name = Evaluator(gf.toks, a, colon, env).expr_all()
                        except Unresolved:
                            case_name = None
                        a = colon + 1
                    vals = element_values(gf, a, b)
                    if vals is None:
                        skip("unparsed table element", path, "#%d" % idx)
                        continue
                    if isinstance(vals, list):
                        if len(vals) != len(fnames):
                            skip("unparsed table element", path, "#%d" % idx)
                            continue
                        vals = dict(zip(fnames, vals))

                    def ev(field, default=None):
                        span = vals.get(field)
                        if span is None:
                            return default
                        return Evaluator(gf.toks, span[0], span[1], env).expr_all()

                    try:
                        if case_name is None:
                            case_name = ev("name", "")
                    except Unresolved:
                        case_name = ""
                    if not isinstance(case_name, str) or not case_name:
                        case_name = "%s#%d" % (fname, idx + 1)
                    try:
                        if ev("skip", False):
                            skip("case marked skip", path, case_name)
                            continue
                    except Unresolved:
                        pass
                    try:
                        text = ev(text_f, "")
                    except Unresolved as e:
                        skip("text: %s" % e, path, case_name)
                        continue
                    if not isinstance(text, str):
                        skip("text is not a string", path, case_name)
                        continue
                    try:
                        if kind == "list":
                            w = ev(want_f, None)
                            if isinstance(w, dict):
                                w = list(w)
                            if isinstance(w, list) and w and all(isinstance(x, list) for x in w):
                                w = [y for x in w for y in x]
                            if w is None:
                                w = []
                            if not isinstance(w, list) or not all(isinstance(x, str) for x in w):
                                raise Unresolved("want is not a list of strings")
                        elif kind == "should":
                            if ev("shouldMatch", False):
                                m = ev("match", "")
                                w = [m if m else text]
                            else:
                                w = []
                        elif kind == "rawv2":
                            matched = ev("wantMatched", None)
                            count = ev("wantCount", None)
                            raw = ev("wantRawV2", "")
                            positive = (matched if matched is not None else bool(count))
                            w = [raw] if positive and raw else ([] if not positive else [text])
                        else:
                            w = []
                    except Unresolved as e:
                        skip("want: %s" % e, path, case_name)
                        continue
                    if text == "":
                        skip("empty text", path, case_name)
                        continue
                    w = [x for x in w if x != ""] if kind == "list" else w
                    if kind == "list" and ev_len_nonzero_empty_strings(vals, gf, env, want_f):
                        skip("want holds only empty strings", path, case_name)
                        continue
                    configured = []
                    for cf in config_fields:
                        try:
                            cv = ev(cf, None)
                        except Unresolved:
                            cv = "?"
                        if not is_zero(cv):
                            configured.append(cf)
                    if w:
                        secrets, why = secrets_for(w, text, keep_all)
                        if secrets is None:
                            skip(why, path, case_name)
                            continue
                        expect = "positive"
                        if any(x not in text for x in w):
                            stats["positives with a want split into pieces"] += 1
                            if len(notes["split"]) < 400:
                                notes["split"].append((path, case_name, w, secrets))
                    else:
                        if configured:
                            skip("negative under a non-default detector config (%s)" % ",".join(sorted(configured)), path, case_name)
                            continue
                        secrets = []
                        expect = "negative"
                    records.append({
                        "peer": PEER, "commit": commit, "path": path, "rule": rule,
                        "vendor": vendor, "case": case_name, "text": text,
                        "secrets": secrets, "expect": expect,
                    })
        if len(records) == n_before:
            if file_reasons:
                reason = file_reasons.most_common(1)[0][0]
            elif seen_tables:
                reason = "every case skipped"
            elif gf.funcs and re.search(r"FromData\(", src):
                reason = "no test table (inputs set inline in test functions)"
            else:
                reason = "no test table"
            empty_files[reason].append(path)
    notes["tables_ignored"] = tables_ignored
    return records, stats, skipped, skipped_examples, empty_files, notes


def ev_len_nonzero_empty_strings(vals, gf, env, want_f):
    """True when the want list is non-empty but holds only empty strings."""
    span = vals.get(want_f)
    if span is None:
        return False
    try:
        w = Evaluator(gf.toks, span[0], span[1], env).expr_all()
    except Unresolved:
        return False
    if isinstance(w, dict):
        w = list(w)
    return isinstance(w, list) and len(w) > 0 and all(x == "" for x in w)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo")
    ap.add_argument("--commit", default=COMMIT)
    ap.add_argument("--out")
    ap.add_argument("--keep-all-pieces", action="store_true")
    args = ap.parse_args()
    records, stats, skipped, examples, empty_files, notes = extract(args.repo, args.commit, args.keep_all_pieces)
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    for r in records:
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
    if args.out:
        out.close()
    err = sys.stderr
    pos = sum(r["expect"] == "positive" for r in records)
    for k, v in sorted(stats.items()):
        print("%s: %d" % (k, v), file=err)
    print("cases: %d (positives %d, negatives %d)" % (len(records), pos, len(records) - pos), file=err)
    print("files with no cases: %d" % sum(len(v) for v in empty_files.values()), file=err)
    for reason, paths in sorted(empty_files.items(), key=lambda kv: -len(kv[1])):
        print("  %4d  %s" % (len(paths), reason), file=err)
        for p in paths:
            print("          %s" % p, file=err)
    ti = notes["tables_ignored"]
    print("tables not read: %d" % sum(len(v) for v in ti.values()), file=err)
    for reason, where in sorted(ti.items(), key=lambda kv: -len(kv[1])):
        print("  %4d  %s   e.g. %s" % (len(where), reason, "; ".join(where[:2])), file=err)
    print("cases skipped: %d" % sum(skipped.values()), file=err)
    for reason, n in skipped.most_common():
        print("  %4d  %s   e.g. %s" % (n, reason, "; ".join(examples[reason][:3])), file=err)


if __name__ == "__main__":
    main()
