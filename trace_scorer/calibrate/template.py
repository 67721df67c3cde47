"""The calibration report's page (a jinja2 template, autoescaped; the SVG plots inserted as they are), with
the compare report's stylesheet (taken from its page, so the two reports look alike)."""

# ruff: noqa: E501  (HTML markup: a table row reads better on one line than split for the line limit)

from trace_scorer.compare.template import PAGE as COMPARE_PAGE

STYLE = COMPARE_PAGE[COMPARE_PAGE.index("<style>") : COMPARE_PAGE.index("</style>") + len("</style>")]

PAGE = (
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trace-scorer calibration · {{ c.metric }} against {{ c.label }}</title>
"""
    + STYLE
    + """
<style>
.confusions { display: flex; flex-wrap: wrap; gap: 1rem; }
.confusions figure.plot { flex: 0 1 260px; }
.chosen { color: #2f855a; font-weight: 600; }
</style>
</head>
<body>
<h1>Can this judge be trusted?</h1>
<p class="source">{{ c.metric }} against the label {{ c.label }}: {{ c.items }} labelled items ({{ c.kind }} labels){% for reason, count in c.left_out.items() %} · {{ count }} left out: {{ reason }}{% endfor %}</p>
{% if c.kind == "binary" %}<p class="note">The metric's verdict: correct when {{ c.metric }} ≥ {{ c.options.threshold }} ({{ c.options.threshold_source }}); each model's: its value ≥ 0.5. A label is the annotators' majority.</p>{% endif %}
<section id="agreement">
<h2>Agreement with the labels</h2>
<table class="agreement">
<thead><tr><th>rater</th><th>items</th>{% for f in figures %}<th>{{ titles[f] }}</th>{% endfor %}<th>cost / 100 items</th></tr></thead>
<tbody>
{% for r in c.raters %}
<tr data-rater="{{ r.rater }}">
<td>{{ r.rater }}</td><td>{{ r.items }}</td>
{% for f in figures %}<td data-figure="{{ f }}">{{ r.figures[f].text() }}</td>{% endfor %}
<td>{{ "$%.4f" | format(r.cost_per_100) if r.cost_per_100 is not none else "–" }}</td>
</tr>
{% endfor %}
</tbody>
</table>
<figure class="plot" data-plot="agreement">
{{ plots.agreement | safe }}
<figcaption>{{ plots.headline }} of each rater with the labels (dot) and its 95 % bootstrap interval (bar); the
dashed line is chance agreement.</figcaption>
</figure>
{% if c.alpha %}<p class="alpha">Krippendorff's α across the annotators and the models: <strong>{{ c.alpha.text() }}</strong>.</p>{% endif %}
{% for model, votes in c.strictness.items() %}<p class="note strictness">Strictness votes of {{ model }}: α {{ votes.alpha.text() }}; unanimous on {{ "%.1f" | format(votes.unanimous * 100) }} % of {{ votes["items"] }} items.</p>{% endfor %}
</section>
{% if plots.confusions %}
<section id="confusion">
<h2>Confusion matrices</h2>
<div class="confusions">
{% for rater, svg in plots.confusions %}<figure class="plot" data-plot="confusion" data-rater="{{ rater.rater }}">
{{ svg | safe }}
<figcaption>{{ rater.rater }}: rows the labels, columns its verdicts.</figcaption>
</figure>{% endfor %}
</div>
</section>
{% endif %}
{% if c.tuning %}{% set t = c.tuning %}
<section id="threshold">
<h2>Threshold tuned on the labels</h2>
<p class="headline">Correct when {{ c.metric }} ≥ <span class="chosen" data-threshold="{{ t.threshold }}">{{ "%.4g" | format(t.threshold) }}</span>{% if t.low is not none %} [{{ "%.3f" | format(t.low) }}, {{ "%.3f" | format(t.high) }}]{% endif %}:
{{ "F1" if t.objective == "f1" else "Youden's J" }} {{ "%.3f" | format(t.objective_value) }}, against {{ "%.3f" | format(t.default_value) }} at the default {{ t.default }}.</p>
{% if t.cv_value is not none %}<p class="note">Cross-validated ({{ t.folds }} stratified folds, the threshold tuned on the others and scored on the held-out one): {{ "%.3f" | format(t.cv_value) }}; the default on the same folds: {{ "%.3f" | format(t.cv_default_value) }}.</p>{% endif %}
<figure class="plot" data-plot="threshold">
{{ plots.threshold | safe }}
<figcaption>F1 (solid) and Youden's J (dashed) at each threshold; green: the tuned threshold with its 95 % bootstrap
interval (band); red: the default.</figcaption>
</figure>
</section>
{% endif %}
{% if c.panels and c.panels.chosen %}{% set p = c.panels %}
<section id="panels">
<h2>Judge panels</h2>
<p class="headline">Cheapest panel within {{ p.margin }} of the best by {{ plots.panel_title }}: <span class="chosen" data-panel="{{ p.chosen.name }}">{{ p.chosen.name }}</span>
(best: {{ p.best.name }}){% if p.low is not none %}; best − chosen {{ "%.3f" | format(p.difference) }} [{{ "%.3f" | format(p.low) }}, {{ "%.3f" | format(p.high) }}]{% if p.low > 0 %}, a real gap{% else %}, within chance{% endif %}{% endif %}.</p>
<figure class="plot" data-plot="cost">
{{ plots.cost | safe }}
<figcaption>Each panel (subset of models and voting rule) on the {{ p["items"] }} items every model judged: its cost per
100 items against its {{ plots.panel_title }} with the labels.</figcaption>
</figure>
<table class="panels">
<thead><tr><th>panel</th><th>{{ plots.panel_title }}</th><th>cost / 100 items</th></tr></thead>
<tbody>
{% for panel in p.panels %}<tr data-panel="{{ panel.name }}"><td>{{ panel.name }}</td><td>{{ "%.3f" | format(panel.agreement) if panel.agreement is not none else "–" }}</td><td>{{ "$%.4f" | format(panel.cost_per_100) if panel.cost_per_100 is not none else "–" }}</td></tr>
{% endfor %}
</tbody>
</table>
</section>
{% endif %}
{% for note in c.notes %}<p class="note">Note: {{ note }}</p>{% endfor %}
<p class="method">Intervals: percentile bootstrap over the items ({{ c.options.n_resamples }} resamples, seed {{ c.options.seed }};
the threshold's and α's at most 500), 95 %. Figures by scikit-learn, scipy and krippendorff. See docs/calibrate.md.</p>
</body>
</html>
"""
)
