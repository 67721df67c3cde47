"""One calibration: a metric's labelled items → agreement of the metric (the panel's value) and of each judge
model with the humans, Krippendorff's α across models and humans, the agreement of each model's strictness
votes with each other, the tuned threshold and the panel chosen on data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trace_scorer.calibrate.agreement import (
    N_RESAMPLES,
    Agreement,
    Figure,
    binary_agreement,
    krippendorff_alpha,
    numeric_agreement,
)
from trace_scorer.calibrate.items import LabelledSet
from trace_scorer.calibrate.panels import NUMERIC_FIGURE, PanelChoice, choose_panel
from trace_scorer.calibrate.thresholds import Tuning, tune

#: The rater name of a judged metric's own value (the panel's mean), beside its models.
PANEL_SUFFIX = " (panel)"
#: Resamples of the intervals drawn by re-running a whole computation (threshold, Krippendorff's α).
SLOW_RESAMPLES = 500


@dataclass(frozen=True)
class Options:
    #: "correct when value ≥ threshold": the verdict the metric's value is compared as (binary labels).
    threshold: float = 0.5
    #: Where the default came from ("the default", "pass_at_k.threshold of target x", …).
    threshold_source: str = "the default"
    objective: str = "f1"
    panel_figure: str = "kappa"
    margin: float = 0.05
    seed: int = 0
    n_resamples: int = N_RESAMPLES


@dataclass
class Calibration:
    metric: str
    label: str
    kind: str  # "binary" | "numeric"
    options: Options
    items: int
    left_out: dict[str, int]
    raters: list[Agreement] = field(default_factory=list)
    alpha: Figure | None = None
    #: Each model's strictness votes: α across its votes, and the share of items where they were unanimous.
    strictness: dict[str, dict[str, Any]] = field(default_factory=dict)
    tuning: Tuning | None = None
    panels: PanelChoice | None = None
    notes: list[str] = field(default_factory=list)
    #: ``--push-to-queue``: the annotation queue and the traces added to it.
    pushed: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "label": self.label,
            "kind": self.kind,
            "items": self.items,
            "left_out": self.left_out,
            "threshold": {"value": self.options.threshold, "source": self.options.threshold_source},
            "raters": [r.as_json() for r in self.raters],
            "krippendorff_alpha": self.alpha.as_json() if self.alpha else None,
            "strictness": {
                m: {"alpha": s["alpha"].as_json(), "unanimous": s["unanimous"], "items": s["items"]}
                for m, s in self.strictness.items()
            },
            "tuning": self.tuning.as_json() if self.tuning else None,
            "panels": self.panels.as_json() if self.panels else None,
            "options": {
                "seed": self.options.seed,
                "resamples": self.options.n_resamples,
                "objective": self.options.objective,
                "panel_figure": self.options.panel_figure,
                "margin": self.options.margin,
            },
            "notes": self.notes,
            **({"pushed": self.pushed} if self.pushed is not None else {}),
        }


def _is_binary(found: LabelledSet) -> bool:
    return all(label in (0.0, 1.0) for item in found.items for label in item.labels)


def calibrate(found: LabelledSet, options: Options) -> Calibration:
    """Every figure of the report for one metric and one label."""
    binary = _is_binary(found)
    out = Calibration(
        found.metric,
        found.label,
        "binary" if binary else "numeric",
        options,
        len(found.items),
        dict(found.left_out),
    )
    if len(found.items) < 2:
        out.notes.append(f"{len(found.items)} labelled items: at least two are needed")
        return out
    seed, resamples = options.seed, options.n_resamples
    models = found.models

    def verdict(value: float, threshold: float) -> float:
        return 1.0 if value >= threshold else 0.0

    raters: list[tuple[str, list[float], list[float], float | None]] = []
    valued = [item for item in found.items if item.value is not None]
    if valued:
        metric_rater = found.metric + (PANEL_SUFFIX if models else "")
        # The panel's cost: every model's, when every item's is known.
        priced = [i for i in valued if models and all(m in i.costs for m in models)]
        panel_cost = (
            100 * sum(sum(i.costs.values()) for i in priced) / len(valued)
            if len(priced) == len(valued) and priced
            else None
        )
        raters.append(
            (metric_rater, [i.label for i in valued], [i.value for i in valued if i.value is not None], panel_cost)
        )
    for model in models:
        mine = [item for item in found.items if model in item.models]
        costs = [item.costs[model] for item in mine if model in item.costs]
        cost = 100 * sum(costs) / len(costs) if mine and len(costs) == len(mine) else None
        raters.append((model, [i.label for i in mine], [i.models[model] for i in mine], cost))
    for name, labels, values, cost in raters:
        if binary:
            threshold = options.threshold if name.startswith(found.metric) and name not in models else 0.5
            agreement = binary_agreement(
                name,
                [verdict(v, 0.5) for v in labels],
                [verdict(v, threshold) for v in values],
                seed=seed,
                n_resamples=resamples,
            )
        else:
            agreement = numeric_agreement(name, labels, values, seed=seed, n_resamples=resamples)
        agreement.cost_per_100 = cost
        out.raters.append(agreement)

    # Krippendorff's α: each annotator and each model a rater of every item.
    annotators = max(len(item.labels) for item in found.items)
    rows: list[list[float | None]] = [
        [item.labels[a] if a < len(item.labels) else None for item in found.items] for a in range(annotators)
    ]
    for model in models:
        rows.append(
            [
                (verdict(item.models[model], 0.5) if binary else item.models[model]) if model in item.models else None
                for item in found.items
            ]
        )
    if len(rows) >= 2:
        out.alpha = krippendorff_alpha(
            rows, level="nominal" if binary else "interval", seed=seed, n_resamples=min(resamples, SLOW_RESAMPLES)
        )
    elif not models:
        out.notes.append("one annotator and no judge model: Krippendorff's α needs two raters")

    for model in models:
        voted = [item.votes[model] for item in found.items if model in item.votes]
        if not voted:
            continue
        width = max(len(v) for v in voted)
        vote_rows: list[list[float | None]] = [
            [float(v[k]) if k < len(v) else None for v in voted] for k in range(width)
        ]
        out.strictness[model] = {
            "alpha": krippendorff_alpha(
                vote_rows, level="nominal", seed=seed, n_resamples=min(resamples, SLOW_RESAMPLES)
            ),
            "unanimous": round(sum(1 for v in voted if len(set(v)) == 1) / len(voted), 6),
            "items": len(voted),
        }

    if binary and valued:
        labels_array = np.asarray([verdict(i.label, 0.5) for i in valued])
        values_array = np.asarray([i.value for i in valued], dtype=np.float64)
        if np.unique(values_array).size > 2 or not set(np.unique(values_array).tolist()) <= {0.0, 1.0}:
            out.tuning = tune(
                labels_array,
                values_array,
                objective=options.objective,
                default=options.threshold,
                seed=seed,
                n_resamples=min(resamples, SLOW_RESAMPLES),
            )
            if out.tuning is None:
                out.notes.append("every label is the same: no threshold to tune")
    if len(models) >= 2:
        out.panels = choose_panel(
            found.items,
            models,
            figure=options.panel_figure if binary else NUMERIC_FIGURE,
            margin=options.margin,
            seed=seed,
            n_resamples=resamples,
            numeric=not binary,
        )
        if out.panels is None:
            out.notes.append("no item was judged by every model: no panel compared")
    return out
