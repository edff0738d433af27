"""The page as one HTML document: head (the Content-Security-Policy, the style), contents, the sections.

Self-contained: no script and nothing fetched, figures inline; it opens from disk or inside ``output.zip``, and
links only to the result files and logs beside it and to its own sections.
"""

from __future__ import annotations

from evaluate.analysis.summary import model_title
from evaluate.report_html.facts import PageFacts
from evaluate.report_html.markup import CSP, Markup, el, esc, join, para
from evaluate.report_html.sections import (
    contents,
    evidence_section,
    fairness_section,
    history_section,
    method_section,
    model_section,
    published_sections,
    verdict,
)
from utils.spec.registry import display_name

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:0 1.5em 3em;color:#222}
h1{margin:.6em 0 .2em}h2{border-bottom:2px solid #ddd;margin-top:1.6em}
nav a{margin-right:1em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
th,td{border:1px solid #ddd;padding:.25em .5em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.absent{color:#666;font-style:italic;margin:.3em 0}
.fair{color:#0a7a2f}.unfair{color:#b00020}
.verdict{background:#fafafa;border:1px solid #ddd;padding:0 1em .6em}
.headline li{margin:.3em 0;font-size:15px}
.key{font-size:15px}
.figure svg,img.figure{max-width:100%;height:auto}
pre{background:#f6f6f6;padding:.5em;overflow-x:auto}
"""


def render(facts: PageFacts) -> str:
    """The whole page as text."""
    c = facts.comparison
    models = ", ".join(model_title(m, c.by_model[m]) for m in sorted(c.by_model))
    runs = len(c.runs)
    head = el("head", Markup('<meta charset="utf-8">'),
              Markup(f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'),
              Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
              el("title", f"tprimat report: {models}"), el("style", Markup(STYLE)))
    body = el("body", el("h1", "tprimat report"),
              para(f"{runs:,} result file(s); models: {models}; platforms: "
                   + ", ".join(display_name("platform", p) for p in c.platforms) + "."),
              contents(c.by_model, c.published), verdict(facts), *(model_section(facts, m) for m in sorted(c.by_model)),
              fairness_section(facts), history_section(facts), evidence_section(facts), method_section(c),
              *published_sections(c))
    return "<!DOCTYPE html>\n" + join([el("html", head, body, lang="en")]) + "\n"
