#!/usr/bin/python3
"""Tests of the deployment files that need no running hub:

- check_names.py itself: it must find a metric, label or label value the
  exposition does not have, and must not mistake functions, aggregations,
  keywords, durations or Grafana variables for names (the live check in
  tests/integration/test_monitor.c runs it against a real scrape);
- the alert rules: every alert has a severity, a summary and a description
  that points at a section of the operators' docs (docs/FILE.md: Section,
  a heading there), and txhub-alerts.test.yml shows each one both
  firing and quiet;
- the Grafana dashboard: what an import needs (schema version, a data
  source variable, job and instance variables, unique panel ids, panels on
  the grid), every query filtered by job, and the series docs/monitoring.md
  promises on it.

Run by meson (suite deploy) with /usr/bin/python3; needs python3-yaml.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RULES = os.path.join(ROOT, "deploy", "prometheus", "txhub-alerts.yml")
RULE_TESTS = os.path.join(ROOT, "deploy", "prometheus", "txhub-alerts.test.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "txhub-dashboard.json")
CHECKER = os.path.join(HERE, "check_names.py")
sys.path.insert(0, HERE)

import check_names  # noqa: E402
import yaml  # noqa: E402

# A small exposition in the hub's format (hub/base/metrics.c).
EXPOSITION = """\
# HELP txhub_forwards_total Forward delivery attempts by outcome and tenant.
# TYPE txhub_forwards_total counter
txhub_forwards_total{outcome="sent",tenant=""} 3
txhub_forwards_total{outcome="retried",tenant=""} 0
txhub_forwards_total{outcome="failed",tenant=""} 0
txhub_forwards_total{outcome="sent",tenant="team-a"} 1
# TYPE txhub_commit_to_forward_seconds histogram
txhub_commit_to_forward_seconds_bucket{le="0.001"} 0
txhub_commit_to_forward_seconds_bucket{le="+Inf"} 3
txhub_commit_to_forward_seconds_sum 0.2
txhub_commit_to_forward_seconds_count 3
# TYPE txhub_consumer_lag gauge
txhub_consumer_lag{topic="txhub.control",partition="0"} 5
# TYPE txhub_parked gauge
txhub_parked 1
# TYPE txhub_build_info gauge
txhub_build_info{version="1.2.3"} 1
"""


def headings(page):
    """The headings of docs/PAGE, as written (code blocks left out)."""
    with open(os.path.join(ROOT, "docs", page), encoding="utf-8") as f:
        text = re.sub(r"^```.*?^```", "", f.read(), flags=re.M | re.S)
    return re.findall(r"^#+ +(.*?) *$", text, re.M)


def problems(expr, legend_or_labels=()):
    series = check_names.parse_exposition(EXPOSITION)
    return check_names.check_expr(series, "t", expr, legend_or_labels)


class Exposition(unittest.TestCase):
    def test_series_and_labels(self):
        s = check_names.parse_exposition(EXPOSITION)
        self.assertEqual(s["txhub_forwards_total"]["outcome"], {"sent", "retried", "failed"})
        self.assertEqual(s["txhub_forwards_total"]["tenant"], {"", "team-a"})
        self.assertIn("txhub_commit_to_forward_seconds_bucket", s)
        self.assertEqual(s["txhub_commit_to_forward_seconds_bucket"]["le"], {"0.001", "+Inf"})
        self.assertEqual(s["txhub_parked"], {})
        self.assertNotIn("txhub_commit_to_forward_seconds", s)

    def test_escaped_label_value(self):
        s = check_names.parse_exposition('m{a="x\\"y",b="z"} 1\n')
        self.assertEqual(s["m"], {"a": {'x"y'}, "b": {"z"}})

    def test_garbage_is_refused(self):
        with self.assertRaises(ValueError):
            check_names.parse_exposition("this is not { an exposition\n")


class Reading(unittest.TestCase):
    def test_names_not_taken_for_metrics(self):
        use = check_names.analyse(
            'histogram_quantile(0.99, sum by (le) (rate(a_bucket{job=~"$job"}[$__rate_interval])))'
            ' / on (instance) group_left (version) b offset 5m > bool 0.5e3'
            ' and deriv((sum without (x) (c))[15m:1m]) or max(d) by (k) unless e @ start()')
        self.assertEqual(use.metrics, ["a_bucket", "b", "c", "d", "e"])
        self.assertEqual(use.labels, ["le", "instance", "version", "x", "k"])
        self.assertEqual(use.matchers, [("a_bucket", "job", "=~", "$job")])

    def test_selector_without_name_and_strings(self):
        use = check_names.analyse('count_values("v", {__name__="m", a!~"x|y"}) + ${var} * m2')
        self.assertEqual(use.metrics, ["m2"])
        self.assertEqual(use.matchers, [(None, "__name__", "=", "m"), (None, "a", "!~", "x|y")])

    def test_unreadable(self):
        self.assertTrue(problems("sum(a{b})")[0].startswith("t: cannot read"))


class Checking(unittest.TestCase):
    def test_known_names_pass(self):
        self.assertEqual(problems(
            'sum by (outcome) (rate(txhub_forwards_total{outcome=~"sent|failed",job="x"}[5m]))'), [])
        self.assertEqual(problems(
            'histogram_quantile(0.5, sum by (le) (rate(txhub_commit_to_forward_seconds_bucket[5m])))'),
            [])
        self.assertEqual(problems('max by (job) (txhub_parked) > 0 or up{job="txhub"} == 0'), [])
        self.assertEqual(problems("txhub_consumer_lag", ["topic", "partition", "instance"]), [])

    def test_unknown_metric(self):
        self.assertEqual(problems("max(txhub_parkd) > 0"), ["t: unknown metric txhub_parkd"])

    def test_bare_histogram_name(self):
        self.assertEqual(problems("rate(txhub_commit_to_forward_seconds[5m])"),
                         ["t: unknown metric txhub_commit_to_forward_seconds"])

    def test_unknown_label_in_matcher(self):
        self.assertEqual(problems('txhub_forwards_total{outcom="sent"}'),
                         ["t: txhub_forwards_total has no label outcom"])

    def test_unknown_label_in_grouping_and_legend(self):
        self.assertEqual(problems("sum by (outcom) (txhub_forwards_total)"),
                         ["t: label outcom is not on any series the expression uses"])
        self.assertEqual(problems("txhub_consumer_lag", ["partiton"]),
                         ["t: label partiton is not on any series the expression uses"])
        # a label of another series does not count
        self.assertEqual(problems("sum by (partition) (txhub_parked)"),
                         ["t: label partition is not on any series the expression uses"])

    def test_unknown_label_value(self):
        self.assertEqual(len(problems('txhub_forwards_total{outcome="error"}')), 1)
        self.assertEqual(len(problems('txhub_forwards_total{outcome!="errors"}')), 1)
        self.assertEqual(len(problems('txhub_forwards_total{outcome=~"sent|faild"}')), 1)
        self.assertEqual(len(problems('txhub_forwards_total{outcome=~"x.*"}')), 1)
        self.assertEqual(problems('txhub_forwards_total{outcome=~"s.*"}'), [])
        self.assertEqual(problems('txhub_forwards_total{outcome=~"$outcome"}'), [])

    def test_grafana_variable_queries(self):
        self.assertEqual(check_names.grafana_query("label_values(txhub_build_info, job)"),
                         ("txhub_build_info", ["job"]))
        self.assertEqual(check_names.grafana_query('label_values(m{job=~"$job"}, instance)'),
                         ('m{job=~"$job"}', ["instance"]))
        self.assertEqual(check_names.grafana_query("label_values(version)"), ("", ["version"]))


class CommandLine(unittest.TestCase):
    def run_checker(self, *files):
        with tempfile.TemporaryDirectory() as d:
            exposition = os.path.join(d, "metrics.txt")
            with open(exposition, "w") as f:
                f.write(EXPOSITION)
            paths = []
            for name, text in files:
                paths.append(os.path.join(d, name))
                with open(paths[-1], "w") as f:
                    f.write(text)
            r = subprocess.run([sys.executable, CHECKER, exposition] + paths,
                               capture_output=True, text=True)
            return r.returncode, r.stdout + r.stderr

    def test_good_and_bad_files(self):
        rules = ("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: max(txhub_parked) > 0\n"
                 "    annotations:\n      summary: '{{ $labels.job }}'\n")
        dashboard = {"panels": [{"title": "p", "targets": [
            {"refId": "A", "expr": "sum by (outcome) (txhub_forwards_total)",
             "legendFormat": "{{outcome}}"}]}],
            "templating": {"list": [{"type": "query", "name": "job",
                                     "query": "label_values(txhub_build_info, job)"}]}}
        rc, out = self.run_checker(("r.yml", rules), ("d.json", json.dumps(dashboard)))
        self.assertEqual(rc, 0, out)
        rc, out = self.run_checker(("r.yml", rules.replace("txhub_parked", "txhub_parkd")))
        self.assertEqual(rc, 1, out)
        self.assertIn("A: unknown metric txhub_parkd", out)
        rc, out = self.run_checker(("r.yml", rules.replace("$labels.job", "$labels.jbo")))
        self.assertEqual(rc, 1, out)
        self.assertIn("label jbo", out)
        bad = json.dumps(dashboard).replace("{{outcome}}", "{{outcomes}}")
        rc, out = self.run_checker(("d.json", bad))
        self.assertEqual(rc, 1, out)
        self.assertIn("panel 'p', query A: label outcomes", out)

    def test_nothing_to_check_is_an_error(self):
        rc, out = self.run_checker(("r.yml", "groups: []\n"))
        self.assertEqual(rc, 2, out)
        rc, out = self.run_checker(("d.json", "{not json"))
        self.assertEqual(rc, 2, out)


class Rules(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(RULES) as f:
            cls.rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
        with open(RULE_TESTS) as f:
            cls.tests = yaml.safe_load(f)["tests"]

    def test_the_alerts_issue_9_asks_for(self):
        names = {r["alert"] for r in self.rules}
        for name in ("TxhubParkedRows", "TxhubPreparedTooOld", "TxhubConsumerLagGrowing",
                     "TxhubCheckbackErrors", "TxhubNotReady", "TxhubTargetDown"):
            self.assertIn(name, names)

    def test_severity_and_annotations(self):
        for r in self.rules:
            self.assertIn(r["labels"]["severity"], ("critical", "warning", "info"), r["alert"])
            self.assertTrue(r["annotations"]["summary"], r["alert"])
            description = " ".join(r["annotations"]["description"].split())
            cited = re.findall(r"docs/([a-z]+\.md): ([A-Z][\w' -]*)", description)
            self.assertTrue(cited, r["alert"])
            for page, section in cited:
                self.assertIn(section.strip(), headings(page), (r["alert"], page))
            self.assertIn("txhub ", r["annotations"]["description"] + r["annotations"]["summary"])

    def test_database_wide_gauges_are_not_summed(self):
        for r in self.rules:
            for gauge in ("txhub_parked", "txhub_messages", "txhub_oldest_prepared_age_seconds",
                          "txhub_oldest_pending_send_age_seconds"):
                if gauge in r["expr"]:
                    self.assertIn("max by (job) (" + gauge, r["expr"], r["alert"])

    def test_every_alert_is_tested_firing_and_quiet(self):
        fired, quiet = set(), set()
        for group in self.tests:
            for t in group.get("alert_rule_test", []):
                (fired if t.get("exp_alerts") else quiet).add(t["alertname"])
        for r in self.rules:
            self.assertIn(r["alert"], fired, "no test shows %s firing" % r["alert"])
            self.assertIn(r["alert"], quiet, "no test shows %s quiet" % r["alert"])


class Dashboard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DASHBOARD) as f:
            cls.d = json.load(f)
        cls.panels = []

        def walk(ps):
            for p in ps:
                cls.panels.append(p)
                walk(p.get("panels", []))
        walk(cls.d["panels"])

    def test_importable(self):
        d = self.d
        self.assertTrue(36 <= d["schemaVersion"] <= 39, "schemaVersion of Grafana 9 or 10")
        self.assertEqual(d["uid"], "txhub-overview")
        self.assertIsNone(d.get("id"))
        variables = {v["name"]: v for v in d["templating"]["list"]}
        self.assertEqual(variables["datasource"]["type"], "datasource")
        self.assertEqual(variables["datasource"]["query"], "prometheus")
        for name in ("job", "instance"):
            self.assertEqual(variables[name]["type"], "query")
            self.assertEqual(variables[name]["datasource"]["uid"], "${datasource}")
        self.assertIn('job=~"$job"', variables["instance"]["query"])

    def test_panels(self):
        ids = [p["id"] for p in self.panels]
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")
        for p in self.panels:
            g = p["gridPos"]
            self.assertTrue(0 <= g["x"] and g["x"] + g["w"] <= 24, p["title"])
            if p["type"] == "row":
                continue
            self.assertEqual(p["datasource"], {"type": "prometheus", "uid": "${datasource}"})
            self.assertTrue(p["targets"], p["title"])
            refs = [t["refId"] for t in p["targets"]]
            self.assertEqual(len(refs), len(set(refs)), p["title"])
            for t in p["targets"]:
                self.assertEqual(t["datasource"]["uid"], "${datasource}")
                self.assertIn('job=~"$job"', t["expr"], p["title"])

    def test_panels_overlap_nowhere(self):
        cells = {}
        for p in self.panels:
            g = p["gridPos"]
            for x in range(g["x"], g["x"] + g["w"]):
                for y in range(g["y"], g["y"] + g["h"]):
                    self.assertNotIn((x, y), cells, "%s overlaps %s" % (p["title"], cells.get((x, y))))
                    cells[(x, y)] = p["title"]

    def test_the_series_it_shows(self):
        used = set()
        for p in self.panels:
            for t in p.get("targets", []):
                used.update(check_names.analyse(t["expr"]).metrics)
        for m in ("txhub_envelopes_total", "txhub_forwards_total", "txhub_checkbacks_total",
                  "txhub_commit_to_forward_seconds_bucket", "txhub_forward_duration_seconds_bucket",
                  "txhub_checkback_duration_seconds_bucket", "txhub_batch_records_bucket",
                  "txhub_consumer_lag", "txhub_messages", "txhub_parked",
                  "txhub_oldest_prepared_age_seconds", "txhub_oldest_pending_send_age_seconds",
                  "txhub_owned_partitions", "txhub_ready", "txhub_database_errors_total",
                  "txhub_kafka_errors_total", "txhub_alerts_total",
                  "txhub_control_records_lost_total",
                  "process_resident_memory_bytes", "process_cpu_seconds_total"):
            self.assertIn(m, used)


if __name__ == "__main__":
    unittest.main(verbosity=2)
