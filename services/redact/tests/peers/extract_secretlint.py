#!/usr/bin/env python3
"""Extract secretlint's rule snapshot fixtures as redaction fixtures (JSON Lines).

What it reads
    A git repository of secretlint/secretlint (a bare mirror is fine), at one commit
    (default HEAD): for every rule package ``packages/@secretlint/secretlint-rule-*/``,
    each case directory ``test/snapshots/<case>/`` -- its input file, its expected
    ``output.json``, and, when present, ``.secretlintrc.json`` and ``options.{js,json,ts}``.
    Files are read with ``git ls-tree``/``git cat-file``; nothing is executed.

    The input file is found as secretlint's tester finds it: ``inputFilePath`` from the
    case's options file (a plain string literal), otherwise the first entry of the case
    directory, in byte order, whose name starts with ``input``.  The rules' inline
    ``test/index.test.ts`` files only run the snapshot harness (there are no literal
    cases in them at the pinned commit), so they are not read for samples.

How positives and negatives are decided
    A case whose ``output.json`` has no messages is a negative; its text is the whole
    input.  A case with messages is a positive.  Cases are skipped (and counted) when:
    the input is not UTF-8 text (PKCS#12 files) or is empty; the case is named ``ng.*``
    but expects no messages (or ``ok.*`` but expects some); a negative whose
    ``.secretlintrc.json`` gives the rule options (``allows`` lists, a disabled sub-rule):
    its text holds a secret that the options, not the rule, let through.

How secrets are decided
    For each message, the slice of the input given by ``range`` [start, end).  Ranges
    are checked: the slice is taken in code points and in UTF-16 code units (JavaScript's
    string offsets), and compared with the string values of the message's ``data`` (the
    matched value secretlint reports) and with ``loc``.  When a slice equals a data value
    it is used.  When neither slice matches but a data value occurs in the input, the
    range is taken to be off (some rules report the match's start with the captured
    value's length) and the data value's occurrence nearest the range start is used
    instead; this is counted and reported.  With no usable data value, the slice whose
    offsets agree with ``loc`` is used.  Duplicate secrets are merged.

Skipped rules
    Rules that are not about secrets in text (no-homedir, no-dotenv, no-k8s-kind-secret,
    pattern, filter-comments, example) and the presets (whose snapshots repeat the bundled
    rules' own) are skipped; the summary on standard error lists them.

Output
    One JSON object per line, keys peer, commit, path, rule, vendor, case, text,
    secrets, expect; rules and cases in byte order of their paths.  ``path`` is the
    input file, ``rule`` the package name without its scope, ``case`` the snapshot
    directory name.

Run
    python3 extract_secretlint.py /work/.mirror/secretlint+secretlint/repo > secretlint.jsonl
    python3 extract_secretlint.py REPO --commit 18346ba31b8173d52060b971221ab38c1943def0
"""

import argparse
import collections
import json
import re
import subprocess
import sys

PEER = 'secretlint'
PACKAGES = 'packages/@secretlint'

SKIP_RULES = {
    'secretlint-rule-no-homedir': 'flags home-directory paths, not secrets',
    'secretlint-rule-no-dotenv': 'flags .env files by their name, not secrets in text',
    'secretlint-rule-no-k8s-kind-secret':
        'flags Kubernetes Secret manifests as files; its ng snapshots record no messages',
    'secretlint-rule-pattern': 'user-configured patterns: each case brings its own pattern',
    'secretlint-rule-filter-comments':
        'filter rule (secretlint-disable comments) exercised with a test pattern',
    'secretlint-rule-example': 'example rule that flags the word SECRET',
    'secretlint-rule-preset-recommend': "preset: its snapshots repeat the bundled rules' own",
    'secretlint-rule-preset-canary': "preset: its snapshots repeat the bundled rules' own",
}

VENDORS = {
    'secretlint-rule-1password': '1Password',
    'secretlint-rule-anthropic': 'Anthropic',
    'secretlint-rule-aws': 'AWS',
    'secretlint-rule-azure': 'Azure',
    'secretlint-rule-basicauth': 'Basic auth',
    'secretlint-rule-cloudflare': 'Cloudflare',
    'secretlint-rule-database-connection-string': 'Database connection string',
    'secretlint-rule-databricks': 'Databricks',
    'secretlint-rule-docker': 'Docker',
    'secretlint-rule-figma': 'Figma',
    'secretlint-rule-gcp': 'Google Cloud',
    'secretlint-rule-github': 'GitHub',
    'secretlint-rule-gitlab': 'GitLab',
    'secretlint-rule-grafana': 'Grafana',
    'secretlint-rule-groq': 'Groq',
    'secretlint-rule-hashicorp-vault': 'HashiCorp Vault',
    'secretlint-rule-huggingface': 'Hugging Face',
    'secretlint-rule-linear': 'Linear',
    'secretlint-rule-notion': 'Notion',
    'secretlint-rule-npm': 'npm',
    'secretlint-rule-openai': 'OpenAI',
    'secretlint-rule-privatekey': 'Private key',
    'secretlint-rule-secp256k1-privatekey': 'secp256k1 private key',
    'secretlint-rule-sendgrid': 'SendGrid',
    'secretlint-rule-shopify': 'Shopify',
    'secretlint-rule-slack': 'Slack',
    'secretlint-rule-stripe': 'Stripe',
    'secretlint-rule-tailscale': 'Tailscale',
    'secretlint-rule-vercel': 'Vercel',
}


# ---------------------------------------------------------------------------
# git access


class Repo:
    def __init__(self, path, commit):
        self.path = path
        self.commit = self._git('rev-parse', f'{commit}^{{commit}}').decode().strip()
        self._cat = None

    def _git(self, *args):
        return subprocess.run(['git', '-C', self.path, *args],
                              check=True, capture_output=True).stdout

    def files(self, folder):
        out = self._git('ls-tree', '-r', '-z', '--name-only', self.commit, '--', folder)
        return sorted(p.decode('utf-8', 'surrogateescape')
                      for p in out.split(b'\0') if p)

    def read(self, path):
        if self._cat is None:
            self._cat = subprocess.Popen(
                ['git', '-C', self.path, 'cat-file', '--batch'],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        spec = f'{self.commit}:{path}'.encode('utf-8', 'surrogateescape')
        self._cat.stdin.write(spec + b'\n')
        self._cat.stdin.flush()
        header = self._cat.stdout.readline()
        if header.endswith(b' missing\n'):
            raise FileNotFoundError(path)
        size = int(header.split()[2])
        data = self._cat.stdout.read(size)
        self._cat.stdout.read(1)  # the newline after the object
        return data

    def close(self):
        if self._cat is not None:
            self._cat.stdin.close()
            self._cat.wait()


# ---------------------------------------------------------------------------
# offsets


def utf16_to_index(text, offset):
    """The code-point index at UTF-16 offset ``offset``, or None if it splits a pair."""
    units = 0
    for i, ch in enumerate(text):
        if units == offset:
            return i
        units += 2 if ord(ch) > 0xFFFF else 1
        if units > offset:
            return None
    return len(text) if units == offset else None


def line_col(text, index, utf16=False):
    """1-based line and 0-based column of code-point index ``index``."""
    line = text.count('\n', 0, index) + 1
    start = text.rfind('\n', 0, index) + 1
    segment = text[start:index]
    column = sum(2 if ord(c) > 0xFFFF else 1 for c in segment) if utf16 else len(segment)
    return line, column


def data_strings(value):
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in data_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in data_strings(v)]
    return []


def resolve_message(text, message, notes):
    """The secret that one lint message points at, or None."""
    start, end = message['range']
    loc = message.get('loc') or {}
    want_start = (loc.get('start', {}).get('line'), loc.get('start', {}).get('column'))
    candidates = []  # (slice, method, loc agrees)
    if 0 <= start <= end <= len(text):
        candidates.append((text[start:end], 'code points',
                           line_col(text, start) == want_start))
    i, j = utf16_to_index(text, start), utf16_to_index(text, end)
    if i is not None and j is not None and i <= j:
        candidates.append((text[i:j], 'UTF-16', line_col(text, i, utf16=True) == want_start))
    values = [v for v in data_strings(message.get('data')) if v in text]
    for value in values:
        for sl, method, _ in candidates:
            if sl == value:
                notes[f'range matches data value ({method})'] += 1
                return sl
    if values:
        # the range is off: use the data value occurring nearest the range start
        best = None
        for value in values:
            for m in re.finditer(re.escape(value), text):
                key = (m.start() < start, abs(m.start() - start))
                if best is None or key < best[0]:
                    best = (key, value)
        notes['range off; used data value nearest the range start'] += 1
        notes.setdefault('_examples', []).append(
            f'range {message["range"]} gives {candidates[0][0][:40]!r}, data {best[1][:40]!r}'
            if candidates else f'range {message["range"]} out of text')
        return best[1]
    for sl, method, agrees in candidates:
        if agrees and sl:
            notes[f'range without data value, loc agrees ({method})'] += 1
            return sl
    if candidates and candidates[0][0]:
        notes['range without data value, loc disagrees'] += 1
        return candidates[0][0]
    return None


# ---------------------------------------------------------------------------


def input_name(entries, options_text):
    if options_text is not None:
        m = re.search(r'inputFilePath\s*:\s*(["\'])([^"\'\\]+)\1', options_text)
        if m:
            return m.group(2)
    names = sorted({e.split('/', 1)[0] for e in entries}, key=lambda s: s.encode())
    for name in names:
        if name.startswith('input'):
            return name
    return None


def rule_options(config, rule):
    """Whether .secretlintrc.json sets anything beyond the rule's id for ``rule``."""
    for entry in config.get('rules', []):
        if entry.get('id', '').endswith('/' + rule) or entry.get('id') == rule:
            extra = {k: v for k, v in entry.items() if k not in ('id',)}
            if extra.get('options') == {}:
                extra.pop('options')
            if extra:
                return extra
    return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('repo', help='git repository (bare is fine) of secretlint/secretlint')
    parser.add_argument('--commit', default='HEAD')
    args = parser.parse_args(argv)
    repo = Repo(args.repo, args.commit)

    by_case = collections.defaultdict(list)   # (rule, case) -> entries below the case dir
    rules = set()
    for path in repo.files(PACKAGES):
        parts = path.split('/')
        if len(parts) < 3 or not parts[2].startswith('secretlint-rule-'):
            continue
        rules.add(parts[2])
        if len(parts) >= 7 and parts[3] == 'test' and parts[4] == 'snapshots':
            by_case[(parts[2], parts[5])].append('/'.join(parts[6:]))

    skipped = collections.Counter()
    skip_examples = collections.defaultdict(list)
    notes = collections.Counter()
    notes_examples = []
    per_rule = collections.defaultdict(collections.Counter)
    skipped_rules = {}
    out = sys.stdout

    def skip(reason, where):
        skipped[reason] += 1
        if len(skip_examples[reason]) < 3:
            skip_examples[reason].append(where)

    for rule in sorted(rules):
        cases = sorted(c for (r, c) in by_case if r == rule)
        if rule in SKIP_RULES:
            skipped_rules[rule] = f'{SKIP_RULES[rule]} ({len(cases)} cases)'
            continue
        if not cases:
            skipped_rules[rule] = 'no snapshot cases'
            continue
        for case in sorted(cases, key=lambda s: s.encode()):
            entries = by_case[(rule, case)]
            base = f'{PACKAGES}/{rule}/test/snapshots/{case}'
            where = f'{rule}/{case}'
            if case.startswith('.'):
                continue  # the tester ignores dot directories
            options_text = None
            for name in ('options.js', 'options.json', 'options.ts'):
                if name in entries:
                    options_text = repo.read(f'{base}/{name}').decode('utf-8')
                    break
            name = input_name(entries, options_text)
            if name is None or name not in entries:
                skip('no input file', where)
                continue
            if 'output.json' not in entries:
                skip('no output.json', where)
                continue
            raw = repo.read(f'{base}/{name}')
            expected = json.loads(repo.read(f'{base}/output.json').decode('utf-8'))
            try:
                text = raw.decode('utf-8')
            except UnicodeDecodeError:
                skip('input is not UTF-8 text (binary)', where)
                continue
            if text.startswith('\ufeff'):
                text = text[1:]
            if not text:
                skip('empty input', where)
                continue
            source = expected.get('sourceContent')
            if source is not None and source != text:
                skip('input differs from output.json sourceContent', where)
                continue
            messages = expected.get('messages', [])
            config = None
            if '.secretlintrc.json' in entries:
                config = json.loads(repo.read(f'{base}/.secretlintrc.json').decode('utf-8'))
            opts = rule_options(config, rule) if config else None
            if case.startswith('ng.') and not messages:
                skip('named ng.* but the snapshot expects no messages', where)
                continue
            if case.startswith('ok.') and messages:
                skip('named ok.* but the snapshot expects messages', where)
                continue
            if not messages:
                if opts:
                    skip('negative only under .secretlintrc.json options (allows/disabled)',
                         where)
                    continue
                secrets, expect = [], 'negative'
            else:
                case_notes = collections.Counter()
                secrets = []
                failed = False
                for message in messages:
                    secret = resolve_message(text, message, case_notes)
                    if not secret:
                        failed = True
                        break
                    secrets.append(secret)
                for ex in case_notes.pop('_examples', []):
                    notes_examples.append(f'{where}: {ex}')
                if failed:
                    skip('a message whose secret cannot be resolved', where)
                    continue
                notes.update(case_notes)
                if opts:
                    notes['positive under .secretlintrc.json options'] += 1
                    notes_examples.append(f'{where}: positive with options {json.dumps(opts)}')
                secrets = list(dict.fromkeys(secrets))
                expect = 'positive'
            per_rule[rule][expect] += 1
            out.write(json.dumps({
                'peer': PEER,
                'commit': repo.commit,
                'path': f'{base}/{name}',
                'rule': rule,
                'vendor': VENDORS.get(rule, rule[len('secretlint-rule-'):]),
                'case': case,
                'text': text,
                'secrets': secrets,
                'expect': expect,
            }, ensure_ascii=False) + '\n')
    repo.close()

    for rule in sorted(per_rule):
        c = per_rule[rule]
        print(f'{rule}: {c["positive"]} positive, {c["negative"]} negative', file=sys.stderr)
    for rule, why in sorted(skipped_rules.items()):
        print(f'skipped rule {rule}: {why}', file=sys.stderr)
    for reason, n in sorted(skipped.items()):
        print(f'skipped {n} case(s): {reason}: {", ".join(skip_examples[reason])}',
              file=sys.stderr)
    for note, n in sorted(notes.items()):
        print(f'messages: {n} x {note}', file=sys.stderr)
    for ex in notes_examples:
        print(f'  {ex}', file=sys.stderr)


if __name__ == '__main__':
    main()
