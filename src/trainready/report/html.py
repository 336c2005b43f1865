"""`trainready report RECORD... --html OUT.html`: one self-contained page a person reads.

Order: the verdict first, then every failed check with its remedy, then each record's charts
(inline SVG, report/charts.py) and details.  The page loads nothing: CSS and SVG are inline,
there is no script, no font, no image URL, and a Content-Security-Policy of `default-src 'none'`
makes the browser refuse any request a future edit might add.
"""

from __future__ import annotations

import datetime as dt
import json
from html import escape
from typing import Callable, Mapping, Sequence

from trainready import __version__
from trainready.records import SEVERITY, Status
from trainready.report.charts import charts_for
from trainready.report.fabrichtml import fabric_tables
from trainready.report.kinds import PURPOSE, Record

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1f2328;margin:24px auto;max-width:1100px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:16px 0 6px}.sub{color:#57606a}
.verdict{font-size:20px;font-weight:700;padding:14px 18px;border-radius:8px;margin:14px 0;color:#fff}
.v-pass{background:#1a7f37}.v-warn{background:#9a6700}.v-fail{background:#cf222e}.v-error{background:#8250df}
.v-skip{background:#6e7781}.planted{background:#fff8c5;border:2px solid #9a6700;padding:8px 12px;border-radius:6px;font-weight:600}
.pill{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600}
table{border-collapse:collapse;width:100%;margin:6px 0 12px}th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}
td.w{overflow-wrap:anywhere}.pill{white-space:nowrap}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.remedy{color:#0550ae}code{font-family:ui-monospace,monospace;font-size:12px;background:#f6f8fa;padding:1px 4px;border-radius:4px}
svg.chart{display:block;max-width:100%;height:auto;margin:8px 0;background:#fff}
svg .plot{fill:#fff;stroke:#8c959f}svg .grid{stroke:#eaeef2}svg .tl{font:11px sans-serif;fill:#24292f}
svg .al{font:12px sans-serif;fill:#57606a}svg .ct{font:bold 13px sans-serif;fill:#1f2328}svg .bad{font:bold 13px sans-serif;fill:#cf222e}
ul.state{font-size:14px;font-weight:400;margin:6px 0 0;padding-left:20px}
figure{margin:10px 0 18px}figcaption{color:#57606a;font-size:12px}details{margin:6px 0}
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'"
PLAN_STATUS = {"fits": "pass", "tight": "warn", "does not fit": "fail"}
MAX_FINDINGS = 30  # rows of the failed-checks table; the rest are in each record's section
PLAN_REMEDY = ("Shard more (higher tp/pp, ZeRO-2/3 or the distributed optimizer), recompute activations, or lower "
               "the micro-batch; `trainready plan --search` lists layouts that fit (Megatron, ZeRO).")


def status_of(rec: Record) -> str:
    """A record's verdict on the pass/warn/fail/error scale (a plan's fit mapped onto it)."""
    s = rec.status.lower()
    if rec.kind == "plan":
        return PLAN_STATUS.get(s, "warn")
    if s in ("accept", "accepted"):
        return "pass"
    if s in ("reject", "rejected"):
        return "fail"
    return s if s in {x.value for x in Status} else ("" if rec.kind == "env" else "warn")


def _pill(status: str) -> str:
    return f'<span class="pill v-{escape(status or "skip")}">{escape((status or "info").upper())}</span>'


Finding = tuple[str, str, str, str]  # (what, status, message, remedy)


def _report_findings(rec: Record) -> list[Finding]:
    return [(str(r.get("name")), str(r.get("status")), str(r.get("message", "")), str(r.get("remedy", "")))
            for r in rec.doc.get("results", []) or [] if r.get("status") in ("fail", "error", "warn")]


def _compare_findings(rec: Record) -> list[Finding]:
    return [("compare", "fail", str(x), "Do not roll the new image out; see the metric and version rows below.")
            for x in rec.doc.get("reasons", []) or []]


def _selftest_findings(rec: Record) -> list[Finding]:
    return [(str(c.get("name")), "fail" if c.get("outcome") == "missed" else "error",
             f"planted fault {c.get('outcome')}: {c.get('message', '')}",
             "A detector that misses its own planted fault cannot be trusted here: report it as a bug."
             if c.get("outcome") == "missed" else "The self-test run itself broke (see the message): run "
             f"`trainready selftest --only {c.get('name')}` again; if it persists, report it as a bug.")
            for c in rec.doc.get("cases", []) or [] if c.get("outcome") in ("missed", "broke", "error")]


def _plan_findings(rec: Record) -> list[Finding]:
    verdict = (rec.doc.get("memory") or {}).get("verdict", "")
    if verdict in ("does not fit", "tight"):
        return [("plan.memory", PLAN_STATUS[verdict], f"memory per GPU: {verdict}", PLAN_REMEDY)]
    return []


def _fleet_findings(rec: Record) -> list[Finding]:
    from trainready.report.fleet import fleet_nodes, worst_first

    out: list[Finding] = []
    for n in worst_first(fleet_nodes(rec)):
        if n.verdict == "reject":
            out.append((f"node {n.node}", "fail", "rejected: " + "; ".join(n.reasons),
                        "drained with a 'trainready:' reason until repaired and re-validated (trainready cluster resume)"))
        elif n.verdict == "not tested":
            out.append((f"node {n.node}", "warn", f"not tested: {n.not_tested}",
                        "not drained by trainready; test it once Slurm can run it (trainready cluster run -w NODE)"))
    return out + [(str(c.get("name")), str(c.get("status")), str(c.get("message", "")), str(c.get("remedy", "")))
                  for c in rec.doc.get("cross", []) or [] if isinstance(c, Mapping) and c.get("status") in ("fail", "error", "warn")]


FOLD_ACCEPTED = 50  # above this many nodes the accepted ones fold away under the rejected and not-tested ones


def _fleet_details(rec: Record) -> str:
    from trainready.report.fleet import fleet_nodes, worst_first

    nodes = worst_first(fleet_nodes(rec))
    pill = {"reject": _pill("fail"), "not tested": '<span class="pill v-skip">NOT TESTED</span>', "accept": _pill("pass")}

    def rows(part: list) -> list[list[str]]:  # type: ignore[type-arg]
        return [[escape(n.node), pill[n.verdict], escape("; ".join(n.reasons) or n.not_tested or "—")] for n in part]

    head = ("node", "verdict", "reasons")
    accepted = [n for n in nodes if n.verdict == "accept"]
    if len(nodes) <= FOLD_ACCEPTED or not accepted:
        table = _table(head, rows(nodes))
    else:
        first = [n for n in nodes if n.verdict != "accept"]
        table = ((_table(head, rows(first)) if first else "<p class='sub'>no node rejected or untested</p>") +
                 f"<details><summary>{len(accepted)} accepted node(s)</summary>{_table(head, rows(accepted))}</details>")
    return table + _fleet_history(rec) + _json_details(rec, ("summary", "drain_list", "stats"))


def _fleet_history(rec: Record) -> str:
    from trainready.report.fleet import fleet_history

    earlier = [[escape(h.run), escape(h.kind + (" (planted: a test)" if h.planted else "")),
                _pill({"accept": "pass", "reject": "fail"}.get(h.verdict, "skip")),
                escape(", ".join(h.rejected) or "—"), escape(h.record or h.verdict)] for h in fleet_history(rec)]
    if not earlier:
        return ""
    return "<h4>earlier runs under this --results (newest first)</h4>" + _table(
        ("run", "command", "verdict", "rejected", "its verdict file"), earlier)


def _sweeptrend_findings(rec: Record) -> list[Finding]:
    from trainready.report.node_state import findings, node_state

    return list(findings(node_state(rec.doc, rec.path), rec.path))


def _node_states(records: Sequence[Record]) -> str:
    """Each node history's state, first on the page: drained and why, strikes, trend WARNs, last pass."""
    from trainready.report.node_state import node_state

    out = []
    for rec in records:
        if rec.kind == "sweeptrend":
            st = node_state(rec.doc, rec.path)
            out.append(f'<div class="verdict v-{st.status} node-state">{escape(st.headline)}<ul class="state">'
                       + "".join(f"<li>{escape(ln)}</li>" for ln in st.lines) + "</ul></div>")
    return "".join(out)


FINDINGS: dict[str, Callable[[Record], list[Finding]]] = {
    "node": _report_findings, "comm": _report_findings, "resume": _report_findings, "report": _report_findings,
    "compare": _compare_findings, "selftest": _selftest_findings, "plan": _plan_findings, "fleet": _fleet_findings,
    "sweeptrend": _sweeptrend_findings,
}


def _overall(records: Sequence[Record]) -> str:
    worst = "pass"
    for rec in records:
        s = status_of(rec)
        if s and SEVERITY[Status(s)] > SEVERITY[Status(worst)]:
            worst = s
    if worst == "pass" and any(r.planted for r in records):
        worst = "warn"
    return worst


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], num: Sequence[int] = ()) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    def cell(i: int, c: str) -> str:  # long text may break anywhere (metric names with labels have no spaces)
        return f'<td class="num">{c}</td>' if i in num else (f'<td class="w">{c}</td>' if len(c) > 60 else f"<td>{c}</td>")

    body = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _checks_details(rec: Record) -> str:
    rows = [[escape(str(r.get("name"))), _pill(str(r.get("status"))), f"{float(r.get('duration_s') or 0):.1f} s",
             escape(str(r.get("message", ""))) + (f'<div class="remedy">→ {escape(str(r["remedy"]))}</div>'
                                                  if r.get("remedy") and r.get("status") != "pass" else "")]
            for r in rec.doc.get("results", []) or []]
    metrics = [[escape(str(r.get("name"))), escape(str(m.get("name"))),
                escape(", ".join(f"{k}={v}" for k, v in (m.get("labels") or {}).items())),
                escape(f"{m.get('value')}"), escape(str(m.get("unit", ""))),
                escape(f"{m['threshold']['op']} {m['threshold']['bound']} ({m['threshold']['source']})")
                if m.get("threshold") else ""]
               for r in rec.doc.get("results", []) or [] for m in r.get("metrics", []) or []]
    out = _table(("check", "status", "time", "result and remedy"), rows) + fabric_tables(rec.doc, _table)
    if metrics:
        shown = metrics[:400]
        out += (f"<details><summary>{len(metrics)} metrics" + (" (first 400)" if len(metrics) > 400 else "") +
                "</summary>" + _table(("check", "metric", "labels", "value", "unit", "judged against"), shown, (3,)) +
                "</details>")
    return out


def _json_details(rec: Record, keys: Sequence[str] = ()) -> str:
    doc = {k: rec.doc[k] for k in keys if k in rec.doc} if keys else rec.doc
    text = json.dumps(doc, indent=1, default=str)
    return f"<details><summary>record fields</summary><pre>{escape(text[:60000])}</pre></details>"


def _selftest_details(rec: Record) -> str:
    rows = [[escape(str(c.get("name"))), _pill({"detected": "pass", "missed": "fail", "skipped": "skip"}.get(
        str(c.get("outcome")), "error")), escape(str(c.get("outcome"))), escape(str(c.get("verdict", ""))),
        f"{float(c.get('seconds') or 0):.1f} s", escape(str(c.get("message", "")))]
        for c in rec.doc.get("cases", []) or []]
    return _table(("planted fault", "", "outcome", "verdict", "time", "message"), rows)


DETAILS: dict[str, Callable[[Record], str]] = {
    "node": _checks_details, "comm": _checks_details, "resume": _checks_details, "report": _checks_details,
    "selftest": _selftest_details, "fleet": _fleet_details,
}


def _context_line(rec: Record) -> str:
    d, bits = rec.doc, []
    for key, label in (("started_at", "started"), ("collected_at", "collected"), ("tool_version", "trainready")):
        if d.get(key):
            bits.append(f"{label} {escape(str(d[key]))}")
    argv = (d.get("context") or {}).get("argv") if isinstance(d.get("context"), Mapping) else None
    if argv:
        bits.append("command <code>" + escape(" ".join(map(str, argv))) + "</code>")
    spec = d.get("spec")
    if isinstance(spec, Mapping) and spec.get("name"):
        bits.append(f"spec {escape(str(spec['name']))}")
    return '<p class="sub">' + " · ".join(bits) + "</p>" if bits else ""


def _section(rec: Record, i: int) -> str:
    parts = [f'<section id="r{i}"><h2>{_pill(status_of(rec))} {escape(rec.title)}</h2>',
             f'<p class="sub">{escape(PURPOSE.get(rec.kind, rec.kind))} — <code>{escape(rec.path)}</code></p>',
             _context_line(rec)]
    if rec.planted:
        parts.append('<p class="planted">PLANTED FAULTS / REPLAYED FACTS: ' + escape(", ".join(
            f"{k}={v}" for k, v in rec.planted.items())) + " — this record is a test, not evidence</p>")
    for caption, svg in charts_for(rec):
        parts.append(f"<figure>{svg}<figcaption>{escape(caption)}</figcaption></figure>")
    parts.append(DETAILS.get(rec.kind, _json_details)(rec))
    return "".join(parts) + "</section>"


def render_html(records: Sequence[Record], now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(dt.timezone.utc)
    overall = _overall(records)
    findings = [(rec, f) for rec in records for f in FINDINGS.get(rec.kind, lambda _r: [])(rec)]
    bad = [(rec, f) for rec, f in findings if f[1] in ("fail", "error")]
    warn = [(rec, f) for rec, f in findings if f[1] == "warn"]
    kinds = ", ".join(f"{r.kind}" for r in records)
    head = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" '
            f'content="{CSP}"><meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>trainready report: {escape(overall.upper())}</title><style>{CSS}</style></head><body>")
    body = [f"<h1>trainready report</h1><p class='sub'>{len(records)} record(s): {escape(kinds)} · generated "
            f"{now.isoformat(timespec='seconds')} by trainready {__version__}</p>", _node_states(records),
            f'<div class="verdict v-{overall}">Verdict: {overall.upper()} — {len(bad)} failed, {len(warn)} warning(s)'
            f"{' — includes planted (test) records' if any(r.planted for r in records) else ''}</div>"]
    if bad:
        shown = bad[:MAX_FINDINGS]
        body.append("<h2>Failed checks and what to do</h2>" + _table(
            ("record", "check", "status", "message", "remedy"),
            [[escape(rec.title), escape(f[0]), _pill(f[1]), escape(f[2]), f'<span class="remedy">{escape(f[3])}</span>']
             for rec, f in shown]) + (f"<p class='sub'>… and {len(bad) - len(shown)} more in the records below</p>"
                                      if len(bad) > len(shown) else ""))
    if warn:
        body.append("<h3>Warnings</h3>" + _table(("record", "check", "message", "remedy"), [
            [escape(rec.title), escape(f[0]), escape(f[2]), escape(f[3])] for rec, f in warn]))
    body.append("<h2>Records</h2><ul>" + "".join(
        f'<li>{_pill(status_of(r))} {escape(r.title)} — <code>{escape(r.path)}</code></li>' for r in records) + "</ul>")
    body += [_section(rec, i) for i, rec in enumerate(records)]
    return head + "".join(body) + "</body></html>\n"

