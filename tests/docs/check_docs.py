#!/usr/bin/env python3
"""Every configuration key and every command is documented (issue 24).

    check_docs.py TXHUB_BINARY TXHUB_1 TXHUB_CONF_5 SOURCE_ROOT

The keys come from the configuration table, as `txhub config` prints it
(hub/base/config.c); each must be in txhub.conf(5), in the key table of
docs/configuration.md and in deploy/txhub.conf.example, and each of those
must name no key the table lacks. The commands come from the sources that
dispatch them (main.c's table of commands, the admin commands' and the
tenant subcommands' tables, the admin and tenant options); each must be in
txhub(1), and each top-level and admin command in the operators' docs
(docs/operators.md and the pages it links) as `txhub NAME`.

The docs hold together (issue 35): every relative markdown link in
README.md and docs/*.md names a file that exists and, with a #anchor, a
heading there (GitHub's anchors: lowercase, punctuation dropped, spaces to
'-', a repeated heading -1, -2, ...); no page of docs/ is over 500 lines
(the long ones of LONG_PAGES excepted); neither a source nor a page
cites "CONTRACT", a document the repository does not have (comments point
at docs/); each "docs/PAGE.md: Section" a source cites names a page that
exists and one of its headings (or the start of one); and the keys
"Reloading the configuration (SIGHUP)" in docs/running.md says SIGHUP
applies are the keys `txhub config` marks so (the table's live flag), and
those it says keep their running value are not.

The generated tables (issue 35): the blocks of docs/ between the markers
of tools/regen_docs.py (the configuration keys, the metrics, the alert
kinds, the exit statuses) are what `txhub reference KIND` prints from the
binary's tables, and every KIND has one; else the first line that
differs is named with the command that rewrites the pages; and every
alert kind the sources raise is in the table of alert kinds.
Prints what is missing and exits 1."""
import glob
import os
import re
import subprocess
import sys

binary, man1_path, man5_path, root = sys.argv[1:5]
failures = []


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def unroff(text):
    """Roff text as the reader sees it: escapes and font changes out."""
    text = text.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
    return re.sub(r"\\f[BIRP]", "", text)


def need(found, what, where):
    if not found:
        failures.append(f"{what} is not in {where}")


# ---- configuration keys ----
table = subprocess.run([binary, "config"], check=True, capture_output=True, text=True).stdout
# (its header shows a kafka.* line: those go to librdkafka, not in the table)
keys = [k for k in re.findall(r"^# ([a-z][a-z0-9_.]*) =", table, re.M)
        if not k.startswith("kafka.")]
if len(keys) < 10:
    failures.append(f"`{binary} config` names only {len(keys)} keys")

man5 = read(man5_path)
man5_keys = re.findall(r"^\.TP\n\\fB([^\\]+)\\fR = ", man5, re.M)
conf_md = read(os.path.join(root, "docs/configuration.md"))
md_keys = re.findall(r"^\| `([a-z][a-z0-9_.]*)` \|", conf_md, re.M)
example = read(os.path.join(root, "deploy/txhub.conf.example"))
example_keys = [k for k in re.findall(r"^# ([a-z][a-z0-9_.]*) =", example, re.M)
                if not k.startswith("kafka.")]
for key in keys:
    need(key in man5_keys, f"key {key}", man5_path)
    need(key in md_keys, f"key {key}", "docs/configuration.md (a row of its key table)")
    need(key in example_keys, f"key {key}", "deploy/txhub.conf.example")
for name, documented in (("txhub.conf(5)", man5_keys), ("docs/configuration.md", md_keys),
                         ("deploy/txhub.conf.example", example_keys)):
    for key in documented:
        if key not in keys:
            failures.append(f"{name} documents {key}, which the configuration table lacks")

# ---- commands ----
sources = "\n".join(read(p) for p in sorted(glob.glob(os.path.join(root, "hub/**/*.c"),
                                                        recursive=True)))
top = sorted(set(re.findall(r'\{"([a-z]+)", (?:CMD_[A-Z_ |]+|0), cmd_[a-z]+\}', sources)))
admin = re.findall(r'\{"([a-z]+)", ADMIN_[A-Z_]+\}', sources)
tenant = re.findall(r'\{"([a-z]+)", TENANT_[A-Z_]+, \d\}', sources)
options = sorted(set(re.findall(r'\[O_[A-Z_]+\] = \{"(--[a-z-]+)"', sources)))
for what, found in (("top-level commands", top), ("admin commands", admin),
                    ("tenant subcommands", tenant), ("options", options)):
    if len(found) < 3:
        failures.append(f"found only {found} as {what} in hub/: did the sources move?")

man1 = read(man1_path)
# each entry's synopsis: the tag line after .TP, and the bold lines that go on below it
tags = [unroff(t) for t in re.findall(r"^\.TP\n(.*)$", man1, re.M)]
tags += [unroff(t) for t in re.findall(r"^(\\fB.*\\fR)\n\.br$", man1, re.M)]
words = set()
for tag in tags:
    for alternative in tag.split("|"):
        w = alternative.split()
        if w:
            words.add(w[0])
            if len(w) > 1:
                words.add(" ".join(w[:2]))
text1 = unroff(man1)
for c in top + admin:
    need(c in words, f"command {c}", f"{man1_path} (an entry of its own)")
for s in tenant:
    need(f"tenant {s}" in words, f"command tenant {s}", f"{man1_path} (an entry of its own)")
for o in options:
    need(re.search(re.escape(o) + r"\b", text1), f"option {o}", man1_path)

# the operators' docs: the index page and every page of docs/ it links
index = read(os.path.join(root, "docs/operators.md"))
pages = sorted(set(re.findall(r"\]\(([a-z_-]+\.md)(?:#[^)]*)?\)", index)) - {"configuration.md"})
if len(pages) < 5:
    failures.append(f"docs/operators.md links only {pages}: is it still the index?")
operators = "\n".join([index] + [read(os.path.join(root, "docs", p)) for p in pages
                                  if os.path.exists(os.path.join(root, "docs", p))])
for c in top + admin + ["tenant " + s for s in tenant]:
    need(f"txhub {c}" in operators, f"`txhub {c}`", "the operators' docs (docs/operators.md and "
         + ", ".join(pages) + ")")

# ---- SIGHUP: the keys the docs say a reload applies, against the table ----
live = set(re.findall(r"\(SIGHUP applies it to a running hub\)\n# ([a-z][a-z0-9_.]*) =", table))
if len(live) < 5:
    failures.append(f"`{binary} config` marks only {sorted(live)} as applied by SIGHUP")
running = read(os.path.join(root, "docs/running.md"))
m = re.search(r"^## Reloading the configuration \(SIGHUP\)\n(.*?)(?=^#)", running + "\n#",
              re.M | re.S)
if not m or "take effect at once:" not in m.group(1) or "keeps its running" not in m.group(1):
    failures.append("docs/running.md: no section \"Reloading the configuration (SIGHUP)\" "
                    "with \"take effect at once:\" and \"keeps its running value\"")
else:
    section = m.group(1)
    applied_text = section.split("take effect at once:", 1)[1].split("A check-back request", 1)[0]
    kept_text = section.split("Any other key", 1)[1]

    def named(text):
        """The keys `a.b`, `c` names: a bare `c` takes the prefix of the key before it."""
        keys, prefix = set(), None
        for word in re.findall(r"`([a-z][a-z0-9_.*]*)`", text):
            if "." in word:
                prefix = word.split(".", 1)[0]
                keys.add(word)
            elif prefix:
                keys.add(f"{prefix}.{word}")
        return keys

    said = named(applied_text)
    for key in sorted(live - said):
        failures.append(f"SIGHUP applies {key} (the table marks it live), but docs/running.md's "
                        "\"Reloading the configuration (SIGHUP)\" does not say so")
    for key in sorted(said - live):
        failures.append(f"docs/running.md says SIGHUP applies {key}, which the table does not "
                        "mark live")
    for key in sorted(named(kept_text) & live):
        failures.append(f"docs/running.md says {key} keeps its running value on SIGHUP, but the "
                        "table marks it live")


# ---- the generated tables: docs/ against `txhub reference KIND` ----
regen = subprocess.run([sys.executable, os.path.join(root, "tools/regen_docs.py"), "--check",
                        binary, root], capture_output=True, text=True)
if regen.returncode != 0:
    failures.append("the generated tables of docs/ are not the binary's (rewrite them with "
                    f"`tools/regen_docs.py {binary}`):\n" + regen.stderr.rstrip())
# ...and every alert kind the sources raise is a row of that table (alert.c's alert_kinds)
kinds = set(re.findall(r"^\| `([a-z_]+)` \|", subprocess.run(
    [binary, "reference", "alerts"], capture_output=True, text=True).stdout, re.M))
raised = set(re.findall(r'alert_raise(?:_traced|_offsets)?\([^,;]+, "([a-z_]+)"', sources))
if len(raised) < 10:
    failures.append(f"found only {sorted(raised)} as alert kinds raised in hub/: did they move?")
for kind in sorted(raised - kinds):
    failures.append(f"hub/ raises the alert {kind}, which alert_kinds (hub/base/alert.c) lacks")


# ---- links, lengths, citations ----
def slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text):
    seen = {}
    for heading in re.findall(r"^#{1,6} +(.*?) *$", strip_fences(text), re.M):
        s = slug(heading)
        n = seen.get(s, 0)
        seen[s] = n + 1
        yield s if n == 0 else f"{s}-{n}"


def strip_fences(text):
    return re.sub(r"^```.*?^```[^\n]*$", "", text, flags=re.M | re.S)


def strip_code(text):
    """Markdown without its fenced blocks and inline code (no links there)."""
    return re.sub(r"`[^`\n]*`", "", strip_fences(text))


# over 500 lines before the rule, to split by task next (issue 35): only these
LONG_PAGES = {"docs/architecture.md", "docs/benchmark.md", "docs/consumers.md", "docs/producers.md"}
docs = ["README.md"] + sorted(os.path.relpath(p, root)
                              for p in glob.glob(os.path.join(root, "docs/*.md")))
anchor_cache = {}
for doc in docs:
    text = read(os.path.join(root, doc))
    lines = text.count("\n")
    for line in text.split("\n"):
        if re.search(r"\bCONTRACT\b", line):
            failures.append(f"{doc}: {line.strip()[:80]}: cites CONTRACT, which is not in the "
                            "repository: link the page that says it")
    if lines > 500 and doc not in LONG_PAGES:
        failures.append(f"{doc} has {lines} lines, more than 500: split it by task")
    for target in re.findall(r"\]\(([^)\s]+)\)", strip_code(text)):
        if re.match(r"[a-z][a-z+.-]*:", target):
            continue  # https:, mailto: ...
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(root, os.path.dirname(doc), path)) if path \
            else os.path.join(root, doc)
        if not os.path.exists(full):
            failures.append(f"{doc}: the link ({target}) names {path}, which does not exist")
            continue
        if anchor and full.endswith(".md"):
            if full not in anchor_cache:
                anchor_cache[full] = set(anchors(read(full)))
            if anchor not in anchor_cache[full]:
                failures.append(f"{doc}: the link ({target}) names #{anchor}, which is not "
                                f"a heading of {os.path.relpath(full, root)}")


# what a migration already wrote into databases stays as it was (a fresh and a
# migrated database must not differ): the text of 0012's COMMENT ON VIEW
APPLIED = {("migrations/0012_delivery_marks.sql",
            "'CONTRACT §6: one row per message; send_status sent for rows at or below their '")}


def ignored_by_git(paths):
    """The paths git ignores (build output: build*/, clients/java's target/);
    none when this is not a git checkout."""
    if not paths:
        return set()
    try:
        out = subprocess.run(["git", "-C", root, "check-ignore", "--stdin"],
                             input="\n".join(paths), capture_output=True, text=True)
    except OSError:
        return set()
    return set(out.stdout.split("\n")) if out.returncode in (0, 1) else set()


cited = []
sources_named = []
for pattern in ("hub/**/*", "include/**/*", "client/**/*", "clients/**/*", "tests/**/*",
                "migrations/**/*", "schema/**/*", "tools/**/*", "deploy/**/*", "examples/**/*",
                ".ci/*", "meson.build"):
    found = [os.path.relpath(p, root) for p in glob.glob(os.path.join(root, pattern),
                                                           recursive=True)]
    ignored = ignored_by_git(found)
    for rel in found:
        p = os.path.join(root, rel)
        if not os.path.isfile(p) or rel == "tests/docs/check_docs.py" or rel in ignored:
            continue
        try:
            source = read(p)
        except UnicodeDecodeError:
            continue
        sources_named.append(rel)
        for line in source.split("\n"):
            if re.search(r"\bCONTRACT\b", line) and (rel, line.strip()) not in APPLIED:
                cited.append(f"{rel}: {line.strip()}")
for c in cited:
    failures.append(f"{c}: cites CONTRACT, which is not in the repository: point at docs/")

# ---- what the sources cite of docs/: "docs/PAGE.md: Section" ----
headings = {}
for p in glob.glob(os.path.join(root, "docs/*.md")):
    headings["docs/" + os.path.basename(p)] = [
        h.strip() for h in re.findall(r"^#{1,6} +(.*?) *$", strip_fences(read(p)), re.M)]
for rel in sources_named:
    try:
        text = read(os.path.join(root, rel))
    except UnicodeDecodeError:
        continue
    # one line of prose: comment markers at line starts and C string joins out
    flat = re.sub(r"\n\s*(?:\*(?!/)|--|#:?|//)?\s*", " ", text)
    flat = re.sub(r'"\s+"', "", flat)
    for m in re.finditer(r"\b(docs/[a-z_]+\.md)(: ?(?:\\?\")?((?:(?!docs/)[^\n]){0,120}))?", flat):
        page, rest = m.group(1), m.group(3)
        if page not in headings:
            failures.append(f"{rel} cites {page}, which does not exist")
        elif rest is not None:
            name = re.match(r"[^).;,\"\\]*", rest).group(0).strip()
            if not any(rest.startswith(h) or (name and h.startswith(name))
                       for h in headings[page]):
                failures.append(f"{rel} cites {page}: {rest[:60]}..., which names no heading "
                                f"of {page}")

# ---- the folders' layering: docs/architecture.md lists hub/'s folders from the top down,
# meson.build's hub_layers builds them from the bottom up, each seeing only those below it ----
arch = read(os.path.join(root, "docs/architecture.md"))
doc_layers = [f for f in re.findall(r"^\*\*`hub/([a-z]+)/`\*\*", arch, re.M)]
meson_layers = re.findall(r"^  \['([a-z]+)', files\(", read(os.path.join(root, "meson.build")), re.M)
if doc_layers != meson_layers[::-1]:
    failures.append(f"docs/architecture.md lists hub/'s folders as {doc_layers} (top down), "
                    f"meson.build's hub_layers builds {meson_layers[::-1]} (top down)")
disk_layers = sorted(d for d in os.listdir(os.path.join(root, "hub"))
                     if os.path.isdir(os.path.join(root, "hub", d)))
need(sorted(doc_layers) == disk_layers, f"every folder of hub/ ({disk_layers})",
     "docs/architecture.md's Architecture and meson.build's hub_layers")

if failures:
    for f in failures:
        print("check_docs:", f, file=sys.stderr)
    sys.exit(1)
print(f"check_docs: {len(keys)} keys in txhub.conf(5), docs/configuration.md and the example "
      f"file; {len(top) + len(admin) + len(tenant)} commands and {len(options)} options in txhub(1)")
