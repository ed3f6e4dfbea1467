#!/usr/bin/env python3
"""Extract detect-secrets' plugin test cases as redaction fixtures (JSON Lines).

What it reads
    A git repository of Yelp/detect-secrets (a bare mirror is fine), at one commit
    (default HEAD): every ``tests/plugins/*_test.py``, and ``detect_secrets/plugins/*.py``
    only to learn the plugin class names.  Files are read with ``git show``; nothing is
    imported or executed.

How cases are found
    Each test file is parsed with ``ast``.  For every test function, the
    ``@pytest.mark.parametrize`` decorators on it and on its enclosing classes are
    combined (cartesian product, as pytest does).  Argument lists are evaluated with a
    small evaluator that only understands literal-safe expressions: constants, names
    bound at module or class level to such expressions, tuple/list literals, ``+``,
    ``%``, ``*`` (str/list by int), slicing by constants, ``str.format`` (plain fields
    only), ``str.join``, f-strings, conditional expressions, list comprehensions, and
    calls of module-level helper generators whose bodies are only ``for``/``if``/
    assignment/``yield`` over such values.  Anything else (``base64.b64encode(...)``,
    ``textwrap.dedent``, random numbers...) leaves that element unresolved: the case is
    skipped and counted with the reason.

    Only tests that run a detector on the parametrized value count: the function must
    call ``analyze_line``, ``scan_line``, ``analyze_string`` or ``scan_file`` (whose
    text is what the test writes into the temporary file).  The text of a case is that
    call's line argument evaluated with the case's parameters; tests of helper
    functions (``find_account``, ``get_secret_access_keys``...) are skipped and counted.
    When the test passes a filename built from a parameter (the keyword tests pass one
    file extension per group of cases), that value goes into ``case`` as
    ``<value>#<n>`` (``none`` when the test scans without a filename); otherwise
    ``case`` is ``<test function>#<n>``, n counting from 0 in pytest's order.

How positives and negatives are decided
    The parameter that the test's assertions depend on (``should_flag``,
    ``should_be_caught``, ``num_results``, ``expected_secret``...) decides: true,
    a count above 0 or a non-empty expected secret means positive; false, 0, None or ''
    means negative.  A test without such a parameter is judged by the shape of its
    assertion (``assert output``, ``assert len(output) == 1`` mean positive; ``assert
    not ...`` negative).  ``rule`` is the plugin class the test instantiates (or the
    class passed as a parameter, or named in the test file's settings).

How secrets are decided
    If the test states the expected secret value -- an ``expected_secret``-style
    parameter, or an assertion comparing ``.secret_value`` with something evaluable --
    that value is the secret.  Otherwise the secret is taken by the plugin's format,
    with our own regular expressions written from reading the plugin (the value after
    the key for assignment-style plugins, the quoted high-entropy string for the
    entropy plugins, the token for vendor plugins, the key body for private keys).
    Where the test expects a number of findings, the format must find that many.
    A positive whose secret cannot be determined, or whose secret is not a substring of
    its text, is skipped and counted.

Output
    One JSON object per line, keys peer, commit, path, rule, vendor, case, text,
    secrets, expect; files in path order, cases in source order; a summary goes to
    standard error.

Run
    python3 extract_detect_secrets.py /work/.mirror/Yelp+detect-secrets/repo > detect_secrets.jsonl
    python3 extract_detect_secrets.py REPO --commit 5e141933554a0b74e7341841f318be21e895339c
"""

import argparse
import ast
import collections
import itertools
import json
import math
import re
import string
import subprocess
import sys

PEER = 'detect-secrets'
MAX_VALUE_LEN = 1 << 20
MAX_STEPS = 200000

VENDORS = {
    'KeywordDetector': 'Generic keyword',
    'Base64HighEntropyString': 'Generic high entropy',
    'HexHighEntropyString': 'Generic high entropy',
    'ArtifactoryDetector': 'Artifactory',
    'AWSKeyDetector': 'AWS',
    'AzureStorageKeyDetector': 'Azure Storage',
    'BasicAuthDetector': 'Basic auth',
    'CloudantDetector': 'IBM Cloudant',
    'DiscordBotTokenDetector': 'Discord',
    'GitHubTokenDetector': 'GitHub',
    'GitLabTokenDetector': 'GitLab',
    'IbmCloudIamDetector': 'IBM Cloud IAM',
    'IbmCosHmacDetector': 'IBM Cloud Object Storage',
    'IPPublicDetector': 'Public IP address',
    'JwtTokenDetector': 'JWT',
    'MailchimpDetector': 'Mailchimp',
    'NpmDetector': 'npm',
    'OpenAIDetector': 'OpenAI',
    'PrivateKeyDetector': 'Private key',
    'PypiTokenDetector': 'PyPI',
    'SendGridDetector': 'SendGrid',
    'SlackDetector': 'Slack',
    'SoftlayerDetector': 'IBM SoftLayer',
    'SquareOAuthDetector': 'Square',
    'StripeDetector': 'Stripe',
    'TelegramBotTokenDetector': 'Telegram',
    'TwilioKeyDetector': 'Twilio',
}

DETECTION_CALLS = ('analyze_line', 'scan_line', 'analyze_string', 'scan_file')


# ---------------------------------------------------------------------------
# git access


def git(repo, *args):
    return subprocess.run(
        ['git', '-C', repo, *args], check=True, capture_output=True,
    ).stdout


def list_files(repo, commit, folder):
    out = git(repo, 'ls-tree', '--name-only', f'{commit}:{folder}').decode()
    return sorted(f'{folder}/{name}' for name in out.splitlines() if name)


def read_file(repo, commit, path):
    return git(repo, 'show', f'{commit}:{path}').decode('utf-8')


# ---------------------------------------------------------------------------
# literal-safe evaluation


class Unsafe(Exception):
    """An expression we refuse (or are unable) to evaluate."""


class Unresolved:
    """Stands for an element of a container that could not be evaluated."""

    __slots__ = ('reason',)

    def __init__(self, reason):
        self.reason = reason

    def __repr__(self):
        return f'<unresolved: {self.reason}>'


class PluginRef:
    """A detect-secrets plugin class, referred to by name."""

    __slots__ = ('name',)

    def __init__(self, name):
        self.name = name

    def __eq__(self, other):
        return isinstance(other, PluginRef) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return self.name


class Param:
    """``pytest.param(*values, id=...)``."""

    def __init__(self, values, ident):
        self.values = values
        self.ident = ident


PLAIN = (str, int, float, bool, type(None), bytes)


def dotted(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f'{inner}.{node.attr}' if inner else None
    return None


def describe_call(node):
    name = dotted(node.func)
    return f'call to {name}()' if name else 'call'


def find_unresolved(value):
    if isinstance(value, Unresolved):
        return value
    if isinstance(value, (tuple, list)):
        for item in value:
            found = find_unresolved(item)
            if found:
                return found
    if isinstance(value, Param):
        return find_unresolved(value.values)
    return None


def check_size(value):
    if isinstance(value, (str, bytes, tuple, list)) and len(value) > MAX_VALUE_LEN:
        raise Unsafe('value too large')
    return value


class Evaluator:
    def __init__(self, scopes, helpers):
        self.scopes = scopes      # innermost first
        self.helpers = helpers    # name -> ast.FunctionDef of module-level helpers
        self.steps = 0

    def child(self, scope):
        ev = Evaluator([scope, *self.scopes], self.helpers)
        ev.steps = self.steps
        return ev

    def tick(self):
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise Unsafe('evaluation too long')

    def eval(self, node):
        self.tick()
        method = getattr(self, 'e_' + type(node).__name__, None)
        if method is None:
            raise Unsafe(f'{type(node).__name__} expression')
        return check_size(method(node))

    def items(self, nodes):
        out = []
        for node in nodes:
            if isinstance(node, ast.Starred):
                value = self.eval(node.value)
                if not isinstance(value, (tuple, list)):
                    raise Unsafe('starred non-sequence')
                out.extend(value)
                continue
            try:
                out.append(self.eval(node))
            except Unsafe as e:
                out.append(Unresolved(str(e)))
        return out

    # leaves
    def e_Constant(self, node):
        if not isinstance(node.value, PLAIN):
            raise Unsafe(f'constant {node.value!r}')
        return node.value

    def e_Name(self, node):
        for scope in self.scopes:
            if node.id in scope:
                value = scope[node.id]
                if isinstance(value, Unresolved):
                    raise Unsafe(value.reason)
                return value
        raise Unsafe(f'name {node.id} is not bound to a literal')

    # containers
    def e_Tuple(self, node):
        return tuple(self.items(node.elts))

    def e_List(self, node):
        return self.items(node.elts)

    # operators
    def e_BinOp(self, node):
        left = self.eval(node.left)
        right = self.eval(node.right)
        for side in (left, right):
            if isinstance(side, (PluginRef, Param)):
                raise Unsafe('operator on a non-literal')
        op = type(node.op)
        if op is ast.Add:
            if type(left) is type(right) and isinstance(left, (str, bytes, tuple, list)):
                return left + right
            if self._num(left) and self._num(right):
                return left + right
        elif op is ast.Sub and self._num(left) and self._num(right):
            return left - right
        elif op is ast.Mult:
            if isinstance(left, int) and isinstance(right, (str, tuple, list)):
                left, right = right, left
            if isinstance(left, (str, tuple, list)) and isinstance(right, int) \
                    and not isinstance(right, bool):
                if len(left) * max(right, 0) > MAX_VALUE_LEN:
                    raise Unsafe('value too large')
                return left * right
            if self._num(left) and self._num(right):
                return left * right
        elif op is ast.Mod and isinstance(left, str):
            args = right if isinstance(right, tuple) else (right,)
            if not all(isinstance(a, (str, int, float)) for a in args):
                raise Unsafe('% with non-plain arguments')
            try:
                return left % right
            except (TypeError, ValueError) as e:
                raise Unsafe(f'% formatting: {e}')
        raise Unsafe(f'operator {op.__name__} on {type(left).__name__}, {type(right).__name__}')

    @staticmethod
    def _num(value):
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def e_UnaryOp(self, node):
        value = self.eval(node.operand)
        op = type(node.op)
        if op is ast.Not:
            return not self._truth(value)
        if op is ast.USub and self._num(value):
            return -value
        if op is ast.UAdd and self._num(value):
            return value
        raise Unsafe(f'unary {op.__name__}')

    def _truth(self, value):
        if isinstance(value, (Unresolved, Param)):
            raise Unsafe('truth of a non-literal')
        return bool(value)

    def e_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        value = None
        for sub in node.values:
            value = self.eval(sub)
            if self._truth(value) != is_and:
                return value
        return value

    def e_Compare(self, node):
        left = self.eval(node.left)
        for op, comp in zip(node.ops, node.comparators):
            right = self.eval(comp)
            for side in (left, right):
                if not isinstance(side, (*PLAIN, tuple, list, PluginRef)):
                    raise Unsafe('comparison of a non-literal')
            kind = type(op)
            try:
                ok = {
                    ast.Eq: lambda a, b: a == b,
                    ast.NotEq: lambda a, b: a != b,
                    ast.Lt: lambda a, b: a < b,
                    ast.LtE: lambda a, b: a <= b,
                    ast.Gt: lambda a, b: a > b,
                    ast.GtE: lambda a, b: a >= b,
                    ast.In: lambda a, b: a in b,
                    ast.NotIn: lambda a, b: a not in b,
                    ast.Is: lambda a, b: a is b if b is None or a is None else a == b,
                    ast.IsNot: lambda a, b: (a is not b) if b is None or a is None else a != b,
                }[kind](left, right)
            except (KeyError, TypeError):
                raise Unsafe(f'comparison {kind.__name__}')
            if not ok:
                return False
            left = right
        return True

    def e_IfExp(self, node):
        return self.eval(node.body if self._truth(self.eval(node.test)) else node.orelse)

    def e_Subscript(self, node):
        value = self.eval(node.value)
        if not isinstance(value, (str, bytes, tuple, list)):
            raise Unsafe('subscript of a non-sequence')
        index = node.slice
        if isinstance(index, ast.Slice):
            bounds = [None if part is None else self.eval(part)
                      for part in (index.lower, index.upper, index.step)]
            if not all(b is None or (isinstance(b, int) and not isinstance(b, bool))
                       for b in bounds):
                raise Unsafe('slice bounds')
            return value[slice(*bounds)]
        key = self.eval(index)
        if not isinstance(key, int) or isinstance(key, bool):
            raise Unsafe('subscript key')
        try:
            return value[key]
        except IndexError:
            raise Unsafe('index out of range')

    # strings
    def e_JoinedStr(self, node):
        parts = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                parts.append(part.value)
                continue
            value = self.eval(part.value)
            if not isinstance(value, (str, int, float)):
                raise Unsafe('f-string field of a non-plain value')
            if part.conversion == ord('r'):
                value = repr(value)
            elif part.conversion == ord('a'):
                value = ascii(value)
            elif part.conversion == ord('s'):
                value = str(value)
            spec = self.eval(part.format_spec) if part.format_spec else ''
            try:
                parts.append(format(value, spec))
            except (TypeError, ValueError) as e:
                raise Unsafe(f'f-string format: {e}')
        return ''.join(parts)

    def e_Call(self, node):
        func = node.func
        name = dotted(func)
        if name in ('pytest.param', 'param'):
            values = tuple(self.items(node.args))
            ident = None
            for kw in node.keywords:
                if kw.arg == 'id':
                    ident = self.eval(kw.value)
            return Param(values, ident)
        if isinstance(func, ast.Attribute) and func.attr in ('format', 'join'):
            target = self.eval(func.value)
            if not isinstance(target, str):
                raise Unsafe(f'.{func.attr} on a non-string')
            args = self.items(node.args)
            kwargs = {}
            for kw in node.keywords:
                if kw.arg is None:
                    raise Unsafe('** arguments')
                kwargs[kw.arg] = self.eval(kw.value)
            for value in [*args, *kwargs.values()]:
                if isinstance(value, Unresolved):
                    raise Unsafe(value.reason)
            if func.attr == 'join':
                if len(args) != 1 or kwargs or not isinstance(args[0], (list, tuple)) \
                        or not all(isinstance(a, str) for a in args[0]):
                    raise Unsafe('.join arguments')
                return target.join(args[0])
            return self._format(target, args, kwargs)
        if isinstance(func, ast.Name) and func.id in self.helpers:
            return self._call_helper(self.helpers[func.id], node)
        raise Unsafe(describe_call(node))

    def _format(self, template, args, kwargs):
        try:
            fields = list(string.Formatter().parse(template))
        except ValueError as e:
            raise Unsafe(f'format string: {e}')
        for _, field, spec, _ in fields:
            if field and ('.' in field or '[' in field):
                raise Unsafe('format field with attribute or index access')
            if spec and '{' in spec:
                raise Unsafe('nested format spec')
        for value in [*args, *kwargs.values()]:
            if not isinstance(value, (str, int, float, bool, type(None))):
                raise Unsafe('.format with a non-plain argument')
        try:
            return template.format(*args, **kwargs)
        except (IndexError, KeyError, ValueError) as e:
            raise Unsafe(f'.format: {e!r}')

    # comprehensions
    def _comprehend(self, generators, emit, scope):
        if not generators:
            emit(self.child(scope))
            return
        gen, rest = generators[0], generators[1:]
        if gen.is_async:
            raise Unsafe('async comprehension')
        iterable = self.child(scope).eval(gen.iter)
        if not isinstance(iterable, (str, tuple, list)):
            raise Unsafe('comprehension over a non-sequence')
        for item in iterable:
            inner = dict(scope)
            bind(gen.target, item, inner)
            ev = self.child(inner)
            if all(ev._truth(ev.eval(cond)) for cond in gen.ifs):
                self._comprehend(rest, emit, inner)

    def e_ListComp(self, node):
        out = []
        self._comprehend(node.generators, lambda ev: out.append(ev.eval(node.elt)), {})
        return out

    e_GeneratorExp = e_ListComp

    # module-level helper generators / functions
    def _call_helper(self, fdef, call):
        params = fdef.args
        if params.vararg or params.kwarg or params.kwonlyargs or params.posonlyargs:
            raise Unsafe(f'helper {fdef.name}: unsupported signature')
        names = [a.arg for a in params.args]
        args = self.items(call.args)
        if len(args) > len(names):
            raise Unsafe(f'helper {fdef.name}: too many arguments')
        local = dict(zip(names, args))
        for kw in call.keywords:
            if kw.arg not in names:
                raise Unsafe(f'helper {fdef.name}: keyword {kw.arg}')
            local[kw.arg] = self.eval(kw.value)
        defaults = dict(zip(names[len(names) - len(params.defaults):], params.defaults))
        for pname in names:
            if pname not in local:
                if pname not in defaults:
                    raise Unsafe(f'helper {fdef.name}: missing {pname}')
                local[pname] = self.eval(defaults[pname])
        is_generator = any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fdef))
        out = []
        # helpers see their locals and the module scope only
        ev = Evaluator([local, self.scopes[-1]], self.helpers)
        ev.steps = self.steps
        result = ev._run(fdef.body, local, out, fdef.name)
        self.steps = ev.steps
        if is_generator:
            return out
        if result is _NO_RETURN:
            return None
        return result

    def _run(self, body, local, out, fname):
        for stmt in body:
            self.tick()
            if isinstance(stmt, ast.Expr):
                value = stmt.value
                if isinstance(value, ast.Yield):
                    out.append(self.eval(value.value) if value.value else None)
                elif isinstance(value, ast.YieldFrom):
                    seq = self.eval(value.value)
                    if not isinstance(seq, (tuple, list)):
                        raise Unsafe(f'helper {fname}: yield from a non-sequence')
                    out.extend(seq)
                elif isinstance(value, ast.Constant) and isinstance(value.value, str):
                    pass  # docstring
                else:
                    raise Unsafe(f'helper {fname}: expression statement')
            elif isinstance(stmt, ast.Assign):
                value = self.eval(stmt.value)
                for target in stmt.targets:
                    bind(target, value, local)
            elif isinstance(stmt, ast.For) and not stmt.orelse:
                iterable = self.eval(stmt.iter)
                if not isinstance(iterable, (str, tuple, list)):
                    raise Unsafe(f'helper {fname}: for over a non-sequence')
                for item in iterable:
                    bind(stmt.target, item, local)
                    result = self._run(stmt.body, local, out, fname)
                    if result is not _NO_RETURN:
                        return result
            elif isinstance(stmt, ast.If):
                branch = stmt.body if self._truth(self.eval(stmt.test)) else stmt.orelse
                result = self._run(branch, local, out, fname)
                if result is not _NO_RETURN:
                    return result
            elif isinstance(stmt, ast.Return):
                return self.eval(stmt.value) if stmt.value else None
            elif isinstance(stmt, ast.Pass):
                pass
            else:
                raise Unsafe(f'helper {fname}: {type(stmt).__name__} statement')
        return _NO_RETURN


_NO_RETURN = object()


def bind(target, value, scope):
    if isinstance(target, ast.Name):
        scope[target.id] = value
    elif isinstance(target, (ast.Tuple, ast.List)):
        names = target.elts
        if isinstance(value, Unresolved):
            for sub in names:
                bind(sub, value, scope)
            return
        if not isinstance(value, (tuple, list)) or len(value) != len(names):
            raise Unsafe('unpacking mismatch')
        for sub, item in zip(names, value):
            bind(sub, item, scope)
    else:
        raise Unsafe(f'assignment to {type(target).__name__}')


def build_scope(body, outer_scopes, helpers, plugin_names, scope=None):
    """Bind the literal-safe assignments (and plugin imports) of a module or class body."""
    scope = {} if scope is None else scope
    ev = Evaluator([scope, *outer_scopes], helpers)
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if alias.name in plugin_names:
                    scope[alias.asname or alias.name] = PluginRef(alias.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            if stmt.value is None:
                continue
            try:
                value = ev.eval(stmt.value)
            except Unsafe as e:
                value = Unresolved(str(e))
            for target in targets:
                try:
                    bind(target, value, scope)
                except Unsafe:
                    for node in ast.walk(target):
                        if isinstance(node, ast.Name):
                            scope[node.id] = Unresolved('unpacking mismatch')
    return scope


# ---------------------------------------------------------------------------
# secrets by the plugins' formats (our own expressions, written from the plugin docs/code)

HEX = string.hexdigits
B64 = string.ascii_letters + string.digits + '+/\\-_='


def shannon(data, charset):
    if not data:
        return 0.0
    counts = collections.Counter(c for c in data if c in charset)
    n = len(data)
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def high_entropy_strings(text, charset, limit, hex_numbers=False):
    out = []
    for m in re.finditer(r'([\'"])([%s]+)\1' % re.escape(charset), text):
        value = m.group(2)
        entropy = shannon(value, charset)
        if hex_numbers and len(value) > 1 and value.isdigit():
            entropy -= 1.2 / math.log2(len(value))
        if entropy > limit:
            out.append(value)
    return out


def groups(pattern, flags=0, group=1):
    rx = re.compile(pattern, flags)

    def find(text):
        return [m.group(group) for m in rx.finditer(text)]
    return find


def first_nonempty(*finders):
    def find(text):
        for f in finders:
            got = f(text)
            if got:
                return got
        return []
    return find


def private_key_bodies(text):
    """The lines after a BEGIN ... PRIVATE KEY header, up to an END line or the end."""
    out = []
    lines = text.split('\n')
    header = re.compile(r'-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----')
    for i, line in enumerate(lines):
        if header.search(line):
            body = []
            for following in lines[i + 1:]:
                if re.match(r'\s*-----END ', following):
                    break
                body.append(following)
            out.extend(b for b in body if b.strip())
    return out


ASSIGN = r'[\'"]?\]?\s*(?:=>|:=|::|=|:|\s)\s*[\'"]?'

FORMATS = {
    'Base64HighEntropyString': lambda t: high_entropy_strings(t, B64, 4.5),
    'HexHighEntropyString': lambda t: high_entropy_strings(t, HEX, 3.0, hex_numbers=True),
    # API key AKC..., password AP<digit or A-F>..., between delimiters
    'ArtifactoryDetector': groups(
        r'(?:^|(?<=[\s=:"]))((?:AKC[A-Za-z0-9]{10,}|AP[0-9A-F][A-Za-z0-9]{8,}))(?=[\s"]|$)'),
    # key id, or a 40-character secret quoted after an aws...key/password-ish name
    'AWSKeyDetector': first_nonempty(
        groups(r'((?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16})'),
        groups(r'aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?[\'"]([0-9A-Za-z/+]{40})[\'"]',
               re.I)),
    'AzureStorageKeyDetector': groups(r'AccountKey=([A-Za-z0-9+/=]{88})'),
    # the password of scheme://user:password@host
    'BasicAuthDetector': groups(r'://[^\s:/?#\[\]@!$&\'()*+,;=]+:([^\s:/?#\[\]@!$&\'()*+,;=]+)@'),
    'CloudantDetector': first_nonempty(
        groups(r'https?://[\w-]+:([0-9a-f]{64}|[a-z]{24})@[\w-]+\.cloudant\.com', re.I),
        groups(r'(?:cloudant|clou|cl)[-_]?(?:api)?(?:key|pwd|pw|password|pass|token)' + ASSIGN
               + r'([0-9a-f]{64}|[a-z]{24})(?![0-9a-z])', re.I)),
    # three base64url segments; the first begins with M, N or O
    'DiscordBotTokenDetector': groups(r'([MNO][\w-]{23,25}\.[\w-]{6}\.[\w-]{27,})'),
    'GitHubTokenDetector': groups(r'((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36,255})'),
    'GitLabTokenDetector': groups(
        r'((?:glpat|gldt|glft|glsoat|glrt|glcbt|glimt|glptt|glagent|gloas)-[\w-]{20,1024}'
        r'|GR1348941[\w-]{20,50})(?![\w-])'),
    'IbmCloudIamDetector': groups(
        r'(?:key|pwd|password|pass|token)' + ASSIGN + r'([\w-]{44})(?![\w-])', re.I),
    'IbmCosHmacDetector': groups(
        r'secret[-_]?(?:access)?[-_]?key' + ASSIGN + r'([a-f0-9]{48})(?![a-f0-9])', re.I),
    # the address (without a port)
    'IPPublicDetector': groups(r'(?<![\w.])((?:\d{1,3}\.){3}\d{1,3})(?::\d{1,5})?(?![\w.])'),
    # header.payload[.signature]
    'JwtTokenDetector': groups(r'(eyJ[\w=-]+\.[\w=-]+(?:\.[\w.+/=-]*)?)'),
    'MailchimpDetector': groups(r'([0-9a-z]{32}-us[0-9]{1,2})'),
    'NpmDetector': groups(r'//\S+/:_authToken=\s*(npm_\S+|[A-Fa-f0-9-]{36})'),
    'OpenAIDetector': groups(r'(sk-[\w-]*T3BlbkFJ[A-Za-z0-9]{20,})'),
    'PrivateKeyDetector': private_key_bodies,
    'PypiTokenDetector': groups(r'(pypi-[\w-]{70,})'),
    'SendGridDetector': groups(r'(SG\.[\w-]{22}\.[\w-]{43})'),
    # a token, or the secret last path segment of an incoming-webhook URL
    'SlackDetector': first_nonempty(
        groups(r'(xox[abposr]-(?:\d+-)+[a-z0-9]+)', re.I),
        groups(r'hooks\.slack\.com/services/T\w+/B\w+/(\w+)', re.I)),
    'SoftlayerDetector': first_nonempty(
        groups(r'api\.softlayer\.com/soap/v3(?:\.1)?/([a-z0-9]{64})', re.I),
        groups(r'(?:softlayer|sl)[-_]?(?:api)?[-_]?(?:key|pwd|password|pass|token)' + ASSIGN
               + r'([a-z0-9]{64})', re.I)),
    'SquareOAuthDetector': groups(r'(sq0csp-[0-9A-Za-z\\_-]{43})'),
    'StripeDetector': groups(r'([rs]k_live_[0-9A-Za-z]{24,})'),
    # the whole line is the token: <bot id>:<35 characters>
    'TelegramBotTokenDetector': groups(r'^(\d{8,10}:[\w-]{35})$'),
    'TwilioKeyDetector': groups(r'((?:AC|SK)[a-z0-9]{32})'),
}


# ---------------------------------------------------------------------------
# reading one test file


def is_parametrize(node):
    return isinstance(node, ast.Call) and (dotted(node.func) or '').endswith('mark.parametrize')


def argnames(node):
    value = ast.literal_eval(node)
    if isinstance(value, str):
        return [n.strip() for n in value.split(',') if n.strip()]
    return list(value)


def names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


class FileResult:
    def __init__(self):
        self.samples = []
        self.skipped = collections.Counter()
        self.skip_examples = {}

    def skip(self, reason, count=1, example=None):
        self.skipped[reason] += count
        if example and reason not in self.skip_examples:
            self.skip_examples[reason] = example


def count_cases(decorators, ev):
    """How many cases the decorators produce (1 per decorator that can't be evaluated)."""
    total = 1
    for dec in decorators:
        try:
            values = ev.eval(dec.args[1])
            total *= len(values)
        except (Unsafe, TypeError, IndexError):
            pass
    return total


def detection_call(body_nodes):
    calls = [n for stmt in body_nodes for n in ast.walk(stmt) if isinstance(n, ast.Call)]
    calls.sort(key=lambda n: (n.lineno, n.col_offset))
    found = [c for c in calls
             if isinstance(c.func, (ast.Attribute, ast.Name))
             and (c.func.attr if isinstance(c.func, ast.Attribute) else c.func.id)
             in DETECTION_CALLS]
    return found, calls


def call_name(call):
    return call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id


def text_expression(call, all_calls):
    name = call_name(call)
    kw = {k.arg: k.value for k in call.keywords}
    if name == 'analyze_line':
        return kw.get('line', call.args[1] if len(call.args) > 1 else None)
    if name == 'scan_line':
        return kw.get('line', call.args[0] if call.args else None)
    if name == 'analyze_string':
        return kw.get('string', call.args[0] if call.args else None)
    if name == 'scan_file':
        for c in all_calls:
            if isinstance(c.func, ast.Attribute) and c.func.attr == 'write' and c.args:
                arg = c.args[0]
                if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) \
                        and arg.func.attr == 'encode' and not arg.args:
                    return arg.func.value
                return arg
    return None


def assertion_info(fdef):
    """Names the assertions depend on, the .secret_value comparisons, and the shape."""
    names = set()
    secret_sides = []
    shapes = []

    def visit(stmts, under_if_tests):
        for stmt in stmts:
            if isinstance(stmt, ast.Assert):
                names.update(names_in(stmt.test))
                for tests in under_if_tests:
                    names.update(names_in(tests))
                for node in ast.walk(stmt.test):
                    if isinstance(node, ast.Compare) and len(node.ops) == 1 \
                            and isinstance(node.ops[0], ast.Eq):
                        sides = [node.left, node.comparators[0]]
                        for a, b in (sides, sides[::-1]):
                            if any(isinstance(x, ast.Attribute) and x.attr == 'secret_value'
                                   for x in ast.walk(a)):
                                secret_sides.append(b)
                if not under_if_tests:
                    shapes.append(assert_shape(stmt.test))
            elif isinstance(stmt, ast.If):
                visit(stmt.body, under_if_tests + [stmt.test])
                visit(stmt.orelse, under_if_tests + [stmt.test])
            elif isinstance(stmt, (ast.With, ast.For, ast.Try)):
                visit(stmt.body, under_if_tests)
    visit(fdef.body, [])
    return names, secret_sides, shapes


def assert_shape(test):
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return 'negative'
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        left, right = test.left, test.comparators[0]
        if isinstance(left, ast.Call) and dotted(left.func) == 'len' \
                and isinstance(right, ast.Constant) and isinstance(right.value, int):
            return 'positive' if right.value > 0 else 'negative'
        return None
    if isinstance(test, (ast.Name, ast.Call, ast.Attribute, ast.Subscript)):
        return 'positive'
    return None


def expectation(value):
    if isinstance(value, Unresolved):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value > 0
    if value is None:
        return False
    if isinstance(value, (str, list, tuple)):
        return len(value) > 0
    return None


def walk_tests(body, class_chain):
    """Yield (function, enclosing classes outermost first) for each test function."""
    for stmt in body:
        if isinstance(stmt, ast.ClassDef):
            yield from walk_tests(stmt.body, class_chain + [stmt])
        elif isinstance(stmt, ast.FunctionDef) and stmt.name.startswith('test'):
            yield stmt, class_chain


def extract_file(path, source, commit, plugin_names):
    result = FileResult()
    tree = ast.parse(source, filename=path)
    helpers = {s.name: s for s in tree.body
               if isinstance(s, ast.FunctionDef) and not s.name.startswith('test')
               and not s.decorator_list}
    module_scope = build_scope(tree.body, [], helpers, plugin_names)
    class_scopes = {}

    def scope_of(cls, outer):
        if id(cls) not in class_scopes:
            class_scopes[id(cls)] = build_scope(cls.body, [outer, module_scope], helpers,
                                                plugin_names)
        return class_scopes[id(cls)]

    # plugin named only in the file's settings (e.g. {'name': 'PrivateKeyDetector'})
    named_in_file = {n.value for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and n.value in plugin_names}

    for fdef, classes in walk_tests(tree.body, []):
        # parametrize decorators, outermost class first; each evaluated in its own scope
        decorated = []
        outer = {}
        for cls in classes:
            cls_outer_scope = outer
            for dec in cls.decorator_list:
                if is_parametrize(dec):
                    decorated.append((dec, [cls_outer_scope, module_scope]))
            outer = scope_of(cls, outer)
        for dec in fdef.decorator_list:
            if is_parametrize(dec):
                decorated.append((dec, [outer, module_scope]))
        if not decorated:
            continue
        where = f'{path}::{".".join([c.name for c in classes] + [fdef.name])}'

        dets, all_calls = detection_call(fdef.body)
        if not dets:
            helper_calls = sorted({call_name(c) for c in all_calls
                                   if isinstance(c.func, (ast.Name, ast.Attribute))
                                   and call_name(c).startswith(('find_', 'get_', 'verify'))})
            n = count_cases([d for d, _ in decorated],
                            Evaluator([module_scope], helpers))
            what = ', '.join(helper_calls) or 'no detector call'
            result.skip(f'not a detection test ({what})', n, where)
            continue

        # enumerate the cases
        axes = []
        failed = False
        for dec, scopes in decorated:
            ev = Evaluator(scopes, helpers)
            try:
                names = argnames(dec.args[0])
                values = ev.eval(dec.args[1])
            except (Unsafe, ValueError, IndexError) as e:
                result.skip(f'parametrize list not literal-safe ({e})', 1, where)
                failed = True
                break
            if not isinstance(values, (list, tuple)):
                result.skip('parametrize values not a sequence', 1, where)
                failed = True
                break
            rows = []
            for entry in values:
                ident = None
                if isinstance(entry, Param):
                    ident, entry = entry.ident, entry.values
                    if len(names) == 1:
                        entry = entry[0] if entry else Unresolved('empty pytest.param')
                if len(names) == 1:
                    rows.append(({names[0]: entry}, ident))
                elif isinstance(entry, Unresolved):
                    rows.append(({n: entry for n in names}, ident))
                elif isinstance(entry, (tuple, list)) and len(entry) == len(names):
                    rows.append((dict(zip(names, entry)), ident))
                else:
                    rows.append(({n: Unresolved('row does not match argnames')
                                  for n in names}, ident))
            axes.append(rows)
        if failed:
            continue
        param_names = [n for rows in axes for n in (rows[0][0] if rows else {})]

        text_node = None
        for det in dets:
            text_node = text_expression(det, all_calls)
            if text_node is not None:
                break
        if text_node is None:
            n = 1
            for rows in axes:
                n *= len(rows)
            result.skip('detector call without a line argument', n, where)
            continue
        filename_nodes = [k.value for det in dets for k in det.keywords if k.arg == 'filename']
        file_params = sorted({n for node in filename_nodes for n in names_in(node)
                              if n in param_names},
                             key=param_names.index)
        text_params = names_in(text_node) & set(param_names)

        assert_names, secret_sides, shapes = assertion_info(fdef)
        expect_params = [n for n in param_names
                         if n in assert_names and n not in text_params and n not in file_params]
        plugin_params = set()
        called = {dotted(c.func) for c in all_calls}
        for n in param_names:
            if n in called:
                plugin_params.add(n)
        expect_params = [n for n in expect_params if n not in plugin_params]
        if len(expect_params) > 1:
            n = 1
            for rows in axes:
                n *= len(rows)
            result.skip(f'several expectation parameters {expect_params}', n, where)
            continue
        shape = None
        if not expect_params:
            distinct = {s for s in shapes if s}
            if len(distinct) != 1:
                n = 1
                for rows in axes:
                    n *= len(rows)
                result.skip('expectation undetermined', n, where)
                continue
            shape = distinct.pop()

        body_plugins = sorted({module_scope[c].name for c in called
                               if c in module_scope and isinstance(module_scope[c], PluginRef)})

        per_prefix = collections.Counter()
        for index, combo in enumerate(itertools.product(*axes)):
            params = {}
            ident_parts = []
            for binding, ident in combo:
                params.update(binding)
                if ident is not None:
                    ident_parts.append(str(ident))
            # the rule
            rule = None
            for n in plugin_params:
                if isinstance(params.get(n), PluginRef):
                    rule = params[n].name
            if rule is None:
                if len(body_plugins) == 1:
                    rule = body_plugins[0]
                elif not body_plugins and len(named_in_file) == 1:
                    rule = next(iter(named_in_file))
            # the case id
            if file_params:
                prefix = '-'.join('none' if params.get(n) is None else str(params.get(n))
                                  for n in file_params)
                case = f'{prefix}#{per_prefix[prefix]}'
                per_prefix[prefix] += 1
            else:
                case = f'{fdef.name}#{index}'
            if ident_parts:
                case += '[' + '-'.join(ident_parts) + ']'
            if rule is None:
                result.skip('plugin undetermined', 1, f'{where} {case}')
                continue
            bad = find_unresolved(tuple(params.values()))
            if bad:
                result.skip(f'case not literal-safe ({bad.reason})', 1, f'{where} {case}')
                continue
            ev = Evaluator([params, module_scope], helpers)
            try:
                text = ev.eval(text_node)
            except Unsafe as e:
                result.skip(f'text not literal-safe ({e})', 1, f'{where} {case}')
                continue
            if not isinstance(text, str):
                result.skip('text is not a string', 1, f'{where} {case}')
                continue
            if text == '':
                result.skip('empty text', 1, f'{where} {case}')
                continue
            expected_value = params[expect_params[0]] if expect_params else None
            positive = expectation(expected_value) if expect_params else shape == 'positive'
            if positive is None:
                result.skip('expectation value not understood', 1, f'{where} {case}')
                continue
            secrets = []
            if positive:
                given = []
                if isinstance(expected_value, str):
                    given.append(expected_value)
                for side in secret_sides:
                    try:
                        value = ev.eval(side)
                    except Unsafe:
                        continue
                    if isinstance(value, str) and value:
                        given.append(value)
                if given:
                    secrets = given
                else:
                    finder = FORMATS.get(rule)
                    secrets = finder(text) if finder else []
                    if isinstance(expected_value, int) and not isinstance(expected_value, bool) \
                            and len(secrets) != expected_value:
                        result.skip('format finds a different number of secrets than expected',
                                    1, f'{where} {case}')
                        continue
                secrets = list(dict.fromkeys(secrets))
                if not secrets:
                    result.skip('no secret determinable', 1, f'{where} {case}')
                    continue
                missing = [s for s in secrets if s not in text]
                if missing:
                    result.skip('secret not in text', 1, f'{where} {case}')
                    continue
            result.samples.append({
                'peer': PEER,
                'commit': commit,
                'path': path,
                'rule': rule,
                'vendor': VENDORS.get(rule, rule.replace('Detector', '')),
                'case': case,
                'text': text,
                'secrets': secrets,
                'expect': 'positive' if positive else 'negative',
            })
    return result


def plugin_class_names(repo, commit):
    names = set()
    for path in list_files(repo, commit, 'detect_secrets/plugins'):
        if not path.endswith('.py'):
            continue
        tree = ast.parse(read_file(repo, commit, path))
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                names.add(node.name)
    return names


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('repo', help='git repository (bare is fine) of Yelp/detect-secrets')
    parser.add_argument('--commit', default='HEAD')
    args = parser.parse_args(argv)
    commit = git(args.repo, 'rev-parse', f'{args.commit}^{{commit}}').decode().strip()
    plugins = plugin_class_names(args.repo, commit)
    seen = set()
    skipped = collections.Counter()
    per_rule = collections.defaultdict(collections.Counter)
    out = sys.stdout
    for path in list_files(args.repo, commit, 'tests/plugins'):
        if not path.endswith('_test.py'):
            continue
        res = extract_file(path, read_file(args.repo, commit, path), commit, plugins)
        for sample in res.samples:
            key = (sample['path'], sample['rule'], sample['case'])
            if key in seen:
                raise SystemExit(f'duplicate case id {key}')
            seen.add(key)
            per_rule[sample['rule']][sample['expect']] += 1
            out.write(json.dumps(sample, ensure_ascii=False) + '\n')
        for reason, n in sorted(res.skipped.items()):
            skipped[reason] += n
            print(f'skip {path}: {n} x {reason}  (e.g. {res.skip_examples.get(reason)})',
                  file=sys.stderr)
    for rule in sorted(per_rule):
        c = per_rule[rule]
        print(f'{rule}: {c["positive"]} positive, {c["negative"]} negative', file=sys.stderr)
    for reason, n in sorted(skipped.items()):
        print(f'skipped {n}: {reason}', file=sys.stderr)


if __name__ == '__main__':
    main()
