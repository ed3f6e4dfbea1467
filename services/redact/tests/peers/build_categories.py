#!/usr/bin/env python3
"""Writes categories.tsv: each peer rule's category, and the boxfleet rules that claim it.

A category is a vendor (the peers' vendor names folded onto one spelling, ALIASES) or a generic
family (FAMILIES). A vendor category is claimed by the kinds of rules/vendors.tsv's rows for that
vendor; a family by the boxfleet rule that reads it. UNCLAIMED lists the peer rules whose token
boxfleet's rows for that vendor do not read (an identifier that is not a secret, a format with no
documented shape): they are counted under a category of their own, unclaimed, so a claim is
never wider than the rows behind it.

Run from services/redact: python3 tests/peers/build_categories.py > tests/peers/categories.tsv
"""
import collections, glob, json, re, sys

ALIASES = {
    "azure storage": "Azure", "microsoft azure": "Azure", "azure": "Azure",
    "ibm cloud iam": "IBM Cloud", "ibm softlayer": "SoftLayer", "gcp": "Google",
    "google cloud": "Google", "twitter (x)": "X (Twitter)", "jfrog artifactory": "JFrog",
    "artifactory": "JFrog", "red hat openshift": "OpenShift", "flyio": "Fly.io",
    "x": "X (Twitter)", "twitter": "X (Twitter)",
}
# generic families: category name, boxfleet rule
FAMILIES = {
    "generic keyword": ("Keyword-style secrets", "generic_secret"),
    "private key": ("Private keys", "private_key"),
    "jwt": ("JWT", "jwt"),
    "basic auth": ("URL credentials", "url_credentials"),
    "password": ("Passwords", "password"),
}
# (peer, rule) -> reason: boxfleet's rows for the vendor do not read this token
UNCLAIMED = {}
for line in open("tests/peers/unclaimed.tsv"):
    if line.startswith("#") or not line.strip():
        continue
    peer, rule, reason = line.rstrip("\n").split("\t")
    UNCLAIMED[(peer, rule)] = reason


def fold(name):
    return re.sub(r"[^a-z0-9]", "", name.lower())


kinds = collections.defaultdict(list)
for line in open("rules/vendors.tsv"):
    if line.startswith("#") or not line.strip():
        continue
    vendor, kind = line.split("\t")[:2]
    if kind not in kinds[fold(vendor)]:
        kinds[fold(vendor)].append(kind)
# boxfleet's own rules (src/tokens.rs), by the vendor whose tokens they read
for vendor, own in {
    "AWS": "aws_access_key_id,aws_secret_access_key",
    "Discord": "discord_bot_token",
    "Anthropic": "anthropic_api_key",
    "GitHub": "github_token,github_fine_grained_token",
    "GitLab": "gitlab_token,gitlab_runner_registration_token",
    "Google": "google_api_key",
    "npm": "npm_token",
    "OpenAI": "openai_api_key",
    "PyPI": "pypi_token",
    "Slack": "slack_token,slack_webhook",
    "Stripe": "stripe_key",
}.items():
    kinds[fold(vendor)] = own.split(",") + kinds[fold(vendor)]
# a peer's vendor written as one word with a product after it (trufflehog's AzureStorage,
# GitLabOauth2, OpenAIAdmin) is the table's vendor it starts with, the longest one
by_prefix = sorted(kinds, key=len, reverse=True)


# one-word names that start with a table vendor's name and are another vendor
OTHER_VENDORS = {"squarespace", "metabase"}


def vendor_of(name):
    folded = fold(name)
    if folded in kinds:
        return folded
    if folded in OTHER_VENDORS:
        return None
    for vendor in by_prefix:
        if len(vendor) >= 4 and folded.startswith(vendor):
            return vendor
    return None


spelled = {}
for line in open("rules/vendors.tsv"):
    if not line.startswith("#") and line.strip():
        spelled.setdefault(fold(line.split("\t")[0]), line.split("\t")[0])
for vendor in ["AWS", "Anthropic", "GitHub", "GitLab", "Google", "npm", "OpenAI", "PyPI", "Slack", "Stripe"]:
    spelled.setdefault(fold(vendor), vendor)

rules = {}
for path in sorted(glob.glob("tests/peers/*.jsonl")):
    for line in open(path):
        s = json.loads(line)
        rules[(s["peer"], s["rule"])] = s["vendor"]

print("# peer\trule\tcategory\tclaimed_by (written by build_categories.py; `-`: unclaimed)")
for (peer, rule), vendor in sorted(rules.items()):
    low = vendor.lower()
    if low in FAMILIES:
        name, claimed = FAMILIES[low]
    else:
        name = ALIASES.get(low, vendor)
        table = vendor_of(name)
        if table is None:
            claimed = "-"
        else:
            name = spelled[table]
            claimed = ",".join(kinds[table])
    if (peer, rule) in UNCLAIMED and claimed != "-":
        name, claimed = f"{name} (unclaimed tokens)", "-"
    print(f"{peer}\t{rule}\t{name}\t{claimed}")
