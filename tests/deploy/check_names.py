#!/usr/bin/python3
"""check_names.py: do the alert rules and the dashboard name only what the hub exports?

    check_names.py EXPOSITION FILE...

EXPOSITION is a scrape of a running hub's /metrics. Each FILE is a
Prometheus rule file (.yml, .yaml) or a Grafana dashboard (.json). Every
PromQL expression in them (rule `expr`, panel target `expr`, template
variable queries) is read for:

- metric names: each must be a series name in the exposition (a histogram's
  `_bucket`, `_sum` and `_count` count as its series; the bare histogram
  name does not, since Prometheus stores no series under it). `up` is
  Prometheus' own;
- label names in matchers, in `by`/`without`/`on`/`ignoring`/`group_*`,
  in `label_values()`, in Grafana legends (`{{partition}}`) and in rule
  annotations (`$labels.instance`): each must be a label of a series the
  expression uses, or one Prometheus adds (`job`, `instance`);
- label values matched with `=` or `!=` (or a regular expression with
  `=~`/`!~`) on an exported label: at least one exported value must match,
  so `outcome="errors"` is caught too.

Exit status: 0 all known; 1 something unknown (each named on standard
output); 2 bad usage or a file that cannot be read. Standard library plus
PyYAML (Debian: python3-yaml), run by /usr/bin/python3.
"""
import json
import re
import sys

# Labels Prometheus attaches to every scraped series, and series of its own.
TARGET_LABELS = {"job", "instance"}
OWN_SERIES = {"up": set(TARGET_LABELS)}

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "atan2", "inf", "nan"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# A regular expression that is only literals joined by "|".
LITERALS = re.compile(r"[A-Za-z0-9_:-]+(?:\|[A-Za-z0-9_:-]+)*")


# ---- the exposition ----

def parse_exposition(text):
    """{series name: {label: set of values}} from Prometheus text format."""
    series = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+"
                         r"([-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|Inf|NaN))(\s+-?[0-9]+)?", line)
        if not m:
            raise ValueError("not an exposition line: %r" % line)
        labels = series.setdefault(m.group(1), {})
        if m.group(3):
            for name, value in re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"',
                                          m.group(3)):
                labels.setdefault(name, set()).add(value.encode().decode("unicode_escape"))
    return series


# ---- PromQL, as far as names go ----

TOKEN = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$[a-zA-Z_][a-zA-Z0-9_]*|\[\[[^\]]*\]\])
  | (?P<number>(?:0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)(?:[a-zA-Z][0-9a-zA-Z]*)*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){}\[\],:@])
""", re.VERBOSE)


def tokens(expr):
    out, pos = [], 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError("cannot read %r at %r" % (expr, expr[pos:pos + 20]))
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    return out


def unquote(s):
    if s[0] == "`":
        return s[1:-1]
    return s[1:-1].encode().decode("unicode_escape")


class Use:
    """What one expression names."""

    def __init__(self):
        self.metrics = []   # metric names
        self.matchers = []  # (metric or None, label, op, value)
        self.labels = []    # label names used outside selectors


def read_matchers(toks, i, metric, use):
    """toks[i] is '{': read `label op "value"` up to '}'; returns the index after it."""
    i += 1
    while toks[i][1] != "}":
        if toks[i][1] == ",":
            i += 1
            continue
        kind, label = toks[i]
        op, (vkind, value) = toks[i + 1][1], toks[i + 2]
        if kind != "ident" or op not in ("=", "!=", "=~", "!~") or vkind != "string":
            raise ValueError("unreadable label matcher near %r" % label)
        use.matchers.append((metric, label, op, unquote(value)))
        i += 3
    return i + 1


def read_label_list(toks, i, use):
    """toks[i] is '(': read `label, label` up to ')'; returns the index after it."""
    i += 1
    while toks[i][1] != ")":
        if toks[i][0] == "ident":
            use.labels.append(toks[i][1])
        elif toks[i][1] != ",":
            raise ValueError("unreadable label list near %r" % toks[i][1])
        i += 1
    return i + 1


def analyse(expr):
    """The metric names, matchers and grouping labels of a PromQL expression
    (Grafana variables allowed: `$job`, `$__rate_interval`, `${x}`)."""
    toks, use, i = tokens(expr), Use(), 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else None
        if text == "[":  # a range or subquery: durations and variables only
            while toks[i][1] != "]":
                i += 1
            i += 1
        elif text == "{":  # a selector without a metric name
            i = read_matchers(toks, i, None, use)
        elif kind == "ident" and text.lower() in GROUPING:
            i = read_label_list(toks, i + 1, use) if nxt == "(" else i + 1
        elif kind == "ident" and text.lower() in KEYWORDS:
            i += 1
        elif kind == "ident" and (nxt == "(" or (nxt or "").lower() in ("by", "without")):
            i += 1  # a function, or an aggregation (`sum by (job) (...)`)
        elif kind == "ident":
            use.metrics.append(text)
            i = read_matchers(toks, i + 1, text, use) if nxt == "{" else i + 1
        else:
            i += 1
    return use


def grafana_query(query):
    """A template variable query as (PromQL, extra label names)."""
    m = re.fullmatch(r"\s*label_values\((.*)\)\s*", query, re.S)
    if m:
        args = m.group(1).rsplit(",", 1)
        if len(args) == 1:
            return "", [args[0].strip()]
        return args[0], [args[1].strip()]
    m = re.fullmatch(r"\s*query_result\((.*)\)\s*", query, re.S)
    if m:
        return m.group(1), []
    return query, []


# ---- checking ----

def check_expr(series, where, expr, extra_labels=()):
    """Problems with one expression: a list of strings."""
    problems = []
    try:
        use = analyse(expr)
    except (ValueError, IndexError) as e:
        return ["%s: cannot read the expression (%s): %s" % (where, e, expr)]
    known = dict(OWN_SERIES)
    known.update(series)
    available = set(TARGET_LABELS)
    for name in use.metrics:
        if name not in known:
            problems.append("%s: unknown metric %s" % (where, name))
        else:
            available |= set(known[name])
    for metric, label, op, value in use.matchers:
        if label == "__name__" or label in TARGET_LABELS:
            continue
        values = set()
        if metric is None:
            for labels in known.values():
                values |= labels.get(label, set())
            present = any(label in labels for labels in known.values())
        else:
            if metric not in known:
                continue  # reported above
            values = known[metric].get(label, set())
            present = label in known[metric]
        if not present:
            problems.append("%s: %s has no label %s" % (where, metric or "no series", label))
        elif "$" in value:
            continue  # a Grafana variable
        elif op in ("=", "!=") and value not in values:
            problems.append('%s: %s{%s} has no value "%s" (it has %s)'
                            % (where, metric, label, value, ", ".join(sorted(values))))
        elif op in ("=~", "!~") and LITERALS.fullmatch(value):
            for alternative in value.split("|"):  # each one must exist
                if alternative not in values:
                    problems.append('%s: %s{%s} has no value "%s" (it has %s)'
                                    % (where, metric, label, alternative,
                                       ", ".join(sorted(values))))
        elif op in ("=~", "!~") and not any(re.fullmatch(value, v) for v in values):
            problems.append('%s: %s{%s} has no value matching "%s" (it has %s)'
                            % (where, metric, label, value, ", ".join(sorted(values))))
    for label in list(use.labels) + list(extra_labels):
        if label not in available:
            problems.append("%s: label %s is not on any series the expression uses" % (where, label))
    return problems


def legend_labels(legend):
    return re.findall(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}", legend or "")


def annotation_labels(text):
    return re.findall(r"\$labels\.([a-zA-Z_][a-zA-Z0-9_]*)", text or "")


def check_rules(series, path, doc):
    problems, n = [], 0
    for group in (doc or {}).get("groups") or []:
        for rule in group.get("rules") or []:
            name = rule.get("alert") or rule.get("record")
            where = "%s: %s" % (path, name)
            texts = list((rule.get("annotations") or {}).values())
            texts += list((rule.get("labels") or {}).values())
            extra = [l for t in texts for l in annotation_labels(str(t))]
            if "expr" not in rule:
                raise ValueError("%s: no expr" % where)
            problems += check_expr(series, where, str(rule["expr"]), extra)
            n += 1
    return problems, n


def check_dashboard(series, path, doc):
    problems, n = [], 0

    def walk(node, title):
        nonlocal problems, n
        if isinstance(node, dict):
            title = node.get("title", title)
            if isinstance(node.get("expr"), str):
                where = "%s: panel %r, query %s" % (path, title, node.get("refId", "?"))
                problems += check_expr(series, where, node["expr"],
                                       legend_labels(node.get("legendFormat")))
                n += 1
            for value in node.values():
                walk(value, title)
        elif isinstance(node, list):
            for value in node:
                walk(value, title)

    walk(doc.get("panels", []), None)
    for var in (doc.get("templating") or {}).get("list") or []:
        if var.get("type") != "query":
            continue
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        promql, labels = grafana_query(query or "")
        problems += check_expr(series, "%s: variable %s" % (path, var.get("name")), promql, labels)
        n += 1
    return problems, n


def check_file(series, path):
    """(problems, number of expressions checked) for one rule file or dashboard."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if path.endswith(".json"):
        return check_dashboard(series, path, json.loads(text))
    try:
        import yaml  # only rule files need it
    except ImportError:
        raise ValueError("PyYAML is missing (Debian: apt-get install python3-yaml)")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ValueError("%s: %s" % (path, e))
    return check_rules(series, path, doc)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            series = parse_exposition(f.read())
        if not any(name.startswith("txhub_") for name in series):
            print("%s: no txhub_ series in the exposition" % argv[1], file=sys.stderr)
            return 2
        problems = []
        for path in argv[2:]:
            found, n = check_file(series, path)
            if n == 0:
                print("%s: no expressions found" % path, file=sys.stderr)
                return 2
            problems += found
            print("%s: %d expressions checked" % (path, n))
    except (OSError, ValueError) as e:
        print("check_names: %s" % e, file=sys.stderr)
        return 2
    for p in dict.fromkeys(problems):  # each once, in order
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
