"""The HTML report's page (a jinja2 template, autoescaped; the SVG plots are inserted as they are)."""

# ruff: noqa: E501  (HTML markup: a table row reads better on one line than split for the line limit)

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trace-scorer comparison{% for c in comparisons %} · {{ c.comparison.candidate.name }} vs \
{{ c.comparison.baseline.name }}{% endfor %}</title>
<style>
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1a202c; margin: 0 auto;
       max-width: 1100px; padding: 1.5rem; }
h1 { font-size: 1.5rem; margin-bottom: .2rem; }
h2 { font-size: 1.25rem; border-bottom: 1px solid #e2e8f0; padding-bottom: .3rem; margin-top: 2.5rem; }
h3 { font-size: 1.05rem; margin: 1.8rem 0 .4rem; }
.source, .method, figcaption, .note { color: #4a5568; font-size: .9rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-variant-numeric: tabular-nums; }
th, td { padding: .3rem .6rem; border-bottom: 1px solid #e2e8f0; text-align: right; }
th:first-child, td:first-child { text-align: left; }
td.verdict { text-align: left; font-weight: 600; }
.better { color: #2f855a; } .worse { color: #c53030; } .same, .not-compared { color: #4a5568; }
.headline { font-size: 1.05rem; }
figure.plot { margin: .4rem 0 1rem; }
figure.plot svg { width: 100%; height: auto; }  /* the page's width (or its half in a pair), not the SVG's own */
.pair { display: flex; flex-wrap: wrap; gap: 1rem; }
.pair figure.plot { flex: 1 1 420px; }
ul.ids { columns: 3; font-family: ui-monospace, monospace; font-size: .85rem; }
a { color: #2b6cb0; }
code { font-size: .9em; }
</style>
</head>
<body>
<h1>Run comparison</h1>
<p class="source">{{ report.source }}</p>
{% for c in comparisons %}{% set cmp = c.comparison %}
<section class="comparison" id="{{ c.key }}">
<h2>{{ cmp.candidate.name }} <span class="source">vs baseline</span> {{ cmp.baseline.name }}</h2>
<p class="headline">
{% if cmp.better %}<span class="better">Better on {{ cmp.better | join(", ") }}.</span> {% endif %}
{% if cmp.worse %}<span class="worse">Worse on {{ cmp.worse | join(", ") }}.</span> {% endif %}
{% if c.same %}<span class="same">No detectable difference on {{ c.same | join(", ") }}.</span>{% endif %}
</p>
<p class="source">baseline: {{ cmp.baseline.items }} items, {{ cmp.baseline.samples }} samples ·
candidate: {{ cmp.candidate.items }} items, {{ cmp.candidate.samples }} samples ·
{{ cmp.only_in_baseline | length }} items only in the baseline, {{ cmp.only_in_candidate | length }} only in the
candidate</p>
<table class="summary">
<thead><tr><th>score</th><th>baseline mean (items)</th><th>candidate mean (items)</th><th>paired items</th>
<th>Δ mean</th><th>interval (Holm-adjusted level)</th><th>p (Holm)</th>
<th>detectable Δ</th><th>verdict</th></tr></thead>
<tbody>
{% for m in cmp.metrics %}
<tr data-metric="{{ m.name }}" data-verdict="{{ m.verdict }}">
<td><a href="#{{ c.key }}-m{{ loop.index0 }}">{{ m.name }}</a></td>
<td>{{ "%.3f" | format(m.baseline.mean) if m.baseline.mean is not none else "–" }} ({{ m.baseline.items }})</td>
<td>{{ "%.3f" | format(m.candidate.mean) if m.candidate.mean is not none else "–" }} ({{ m.candidate.items }})</td>
<td>{{ m.paired }}</td>
<td>{{ "%+.3f" | format(m.difference) if m.difference is not none else "–" }}</td>
<td class="interval">{{ m.interval_text() }}</td>
<td>{% if m.p_adjusted is none %}–{% elif m.p_adjusted < 0.001 %}&lt;0.001{% else %}{{ "%.3f" | format(m.p_adjusted) }}{% endif %}</td>
<td>{{ "±%.3f" | format(m.detectable_difference) if m.detectable_difference is not none else "–" }}</td>
<td class="verdict {{ {BETTER: 'better', WORSE: 'worse'}.get(m.verdict, 'same') }}">{{ m.verdict }}\
{% if m.reason %}: {{ m.reason }}{% endif %}</td>
</tr>
{% endfor %}
</tbody>
</table>
<figure class="plot" data-plot="differences">
{{ c.differences | safe }}
<figcaption>Each score's mean paired difference (dot) with its interval (bar) at the level of its Holm step (the
table's interval column). Right of the dashed zero line the candidate scores higher. Green: significantly better; red:
significantly worse; grey: no detectable difference.</figcaption>
</figure>
{% for entry in c.metrics %}{% set m = entry.metric %}
<section class="metric" id="{{ entry.key }}">
<h3>{{ m.name }} — <span class="{{ {BETTER: 'better', WORSE: 'worse'}.get(m.verdict, 'same') }}">{{ m.verdict }}</span></h3>
{% if m.reason %}<p class="note">{{ m.reason }}</p>{% endif %}
{% if m.run_level %}<p class="note run-level">{{ m.run_level_text() }}.</p>{% endif %}
{% if m.paired %}<p class="note">{{ m.improved }} items improved, {{ m.regressed }} regressed, {{ m.unchanged }}
unchanged (of {{ m.paired }} scored in both runs).</p>{% endif %}
<div class="pair">
{% if entry.distribution %}<figure class="plot" data-plot="distribution">
{{ entry.distribution | safe }}
<figcaption>{{ m.name }} per item in each run (an item's attempts averaged); vertical lines: the means.</figcaption>
</figure>{% endif %}
{% if entry.paired %}<figure class="plot" data-plot="paired">
{{ entry.paired | safe }}
<figcaption>Candidate − baseline per item: the mean (line) and its interval (band).</figcaption>
</figure>{% endif %}
</div>
{% if entry.regressions %}
<figure class="plot" data-plot="regressions">
{{ entry.regressions | safe }}
<figcaption>The {{ m.worst_items | length }} items that lost most on {{ m.name }}: baseline value (grey) →
candidate value (red).</figcaption>
</figure>
<table class="items">
<thead><tr><th>item</th><th>baseline</th><th>candidate</th><th>Δ</th><th>baseline traces</th><th>candidate traces</th></tr></thead>
<tbody>
{% for change in m.worst_items %}
<tr><td>{{ change.item }}</td><td>{{ "%.3f" | format(change.baseline) }}</td><td>{{ "%.3f" | format(change.candidate) }}</td>
<td>{{ "%+.3f" | format(change.difference) }}</td>
<td>{% for link in change.baseline_links %}<a href="{{ link }}">trace {{ loop.index }}</a> {% else %}\
{{ change.baseline_traces | join(", ") }}{% endfor %}</td>
<td>{% for link in change.candidate_links %}<a href="{{ link }}">trace {{ loop.index }}</a> {% else %}\
{{ change.candidate_traces | join(", ") }}{% endfor %}</td></tr>
{% endfor %}
</tbody>
</table>
{% endif %}
</section>
{% endfor %}
{% if cmp.only_in_baseline or cmp.only_in_candidate %}
<h3>Items in one run only</h3>
<p class="note">Not in the paired differences above (they have nothing to be paired with).</p>
{% if cmp.only_in_baseline %}<p>{{ cmp.only_in_baseline | length }} only in the baseline:</p>
<ul class="ids only-baseline">{% for item in cmp.only_in_baseline %}<li>{{ item }}</li>{% endfor %}</ul>{% endif %}
{% if cmp.only_in_candidate %}<p>{{ cmp.only_in_candidate | length }} only in the candidate:</p>
<ul class="ids only-candidate">{% for item in cmp.only_in_candidate %}<li>{{ item }}</li>{% endfor %}</ul>{% endif %}
{% endif %}
{% if c.pass %}
<h3>pass@k and pass^k</h3>
<figure class="plot" data-plot="pass">
{{ c.pass | safe }}
<figcaption>pass@k (solid): the chance that at least one of k attempts at an item is correct; pass^k (dashed): that
all k are. Bands: {{ "%.0f" | format(cmp.options.confidence * 100) }} % intervals over items.</figcaption>
</figure>
<table class="pass">
<thead><tr><th>run</th><th>k</th><th>items</th><th>pass@k [interval]</th><th>pass^k [interval]</th></tr></thead>
<tbody>
{% for curve in cmp.pass_curves %}{% for p in curve.points %}
<tr><td>{{ curve.run }}</td><td>{{ p.k }}</td><td>{{ p.items }}</td>
<td>{{ "%.3f" | format(p.pass_at_k) }}{% if p.pass_at_k_interval %} [{{ "%.3f" | format(p.pass_at_k_interval[0]) }},
{{ "%.3f" | format(p.pass_at_k_interval[1]) }}]{% endif %}</td>
<td>{{ "%.3f" | format(p.pass_hat_k) }}{% if p.pass_hat_k_interval %} [{{ "%.3f" | format(p.pass_hat_k_interval[0]) }},
{{ "%.3f" | format(p.pass_hat_k_interval[1]) }}]{% endif %}</td></tr>
{% endfor %}{% endfor %}
</tbody>
</table>
{% endif %}
{% for note in cmp.notes %}<p class="note">Note: {{ note }}</p>{% endfor %}
<p class="method">Δ is candidate − baseline over the items both runs scored (an item's attempts averaged first).
Interval: {{ cmp.options.interval }}, {{ cmp.options.n_resamples }} resamples, seed {{ cmp.options.seed }},
at the level of the score's Holm step: the score with the i-th smallest p of m (from 0) at
1 − {{ cmp.options.alpha }}/(m − i), so an interval clear of zero agrees with the corrected test.
Test: {{ cmp.options.test }}, Holm-corrected across the compared scores. Better / worse: the corrected p below
{{ cmp.options.alpha }} and the interval clear of zero. Detectable Δ: the smallest mean difference these items
would detect with 80 % power. See docs/compare.md, "How to read a comparison".</p>
</section>
{% endfor %}
</body>
</html>
"""
