"""`trainready report`: records → one self-contained HTML page, JUnit XML or a Prometheus textfile."""

from __future__ import annotations

import typer


def report(
    records: list[str] = typer.Argument(..., help="Record files (--json of node, comm, resume, plan, env, cluster, compare, selftest)."),
    html: str = typer.Option(None, "--html", help="Write one self-contained HTML page (inline CSS and SVG; it loads nothing)."),
    junit: str = typer.Option(None, "--junit", help="Write the checks as JUnit XML (one testcase per check)."),
    prometheus: str = typer.Option(None, "--prometheus", help="Write node_exporter textfile-collector metrics."),
) -> None:
    """Turn records into evidence people and systems read: an HTML page with the verdict first,
    failed checks with remedies, charts (busbw vs size, per-GPU throughput, resume loss curves,
    memory per GPU, before/after), then details; or JUnit XML / Prometheus text.

    Exit 0 when written, 2 on a missing or unreadable record or output path.

    Examples:

    \b
      trainready report node.json comm.json resume.json --html report.html
      trainready report plan.json compare.json --html upgrade.html
      trainready report node.json --junit node.xml \\
        --prometheus /var/lib/node_exporter/textfile_collector/trainready.prom
    """
    from rich.console import Console

    from trainready.commands.common import check_out_path
    from trainready.errors import UsageError
    from trainready.report.kinds import read_record
    from trainready.util.atomic import atomic_write_text

    outs = [(f, p) for f, p in (("--html", html), ("--junit", junit), ("--prometheus", prometheus)) if p]
    if not outs:
        raise UsageError("trainready report: nothing to write; give --html OUT.html, --junit OUT.xml or --prometheus OUT.prom")
    for flag, path in outs:
        check_out_path(path, flag)
    recs = [read_record(p) for p in records]
    console = Console(stderr=True)
    for flag, path in outs:
        if flag == "--html":
            from trainready.report.html import render_html

            text = render_html(recs)
        elif flag == "--junit":
            from trainready.report.junit import junit_xml

            text = junit_xml(recs)
        else:
            from trainready.report.prometheus import exposition

            text = exposition(recs)
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            raise UsageError(f"{flag} {path}: cannot write ({exc.strerror})") from None
        console.print(f"{flag[2:]} written to {path}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
