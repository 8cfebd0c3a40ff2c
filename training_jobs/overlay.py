"""Training curves by step, of one run or of several overlaid (as Weights & Biases compares runs): the training loss,
the validation loss (an SFT run whose dataset has a validation split: its trainer evaluates it at each checkpoint),
an RL run's mean reward, and the learning rate, in the chart data static/js/charts.js draws, with each run's figures
for the table beside the charts.

Reads only: one query per run, for its last METRICS_SHOWN steps.
"""

from dataclasses import dataclass, field

from .models import TrainingRun

METRICS_SHOWN = 500  # the curves' steps; a longer run shows its last ones
MAX_RUNS = 8  # one colour each
# charts.js's palette, in its order: a run keeps its colour on every chart, whichever runs that chart leaves out.
COLORS = ["#2f5bd3", "#e07b39", "#1f8a4c", "#b03a8c", "#7c8b1f", "#5b3fd3", "#c0392b", "#2a9db5"]


@dataclass(frozen=True)
class Series:
    key: str  # the metric's name, as the trainer logs it
    title: str
    y: dict  # the axis: never below 0; a reward on the score's [0, 1]
    best: str  # "min" or "max": which end is better (the table's best value)


SERIES = [
    Series("loss", "training loss", {"min": 0}, "min"),
    Series("eval_loss", "validation loss", {"min": 0}, "min"),
    Series("reward_mean", "mean reward", {"min": 0, "max": 1}, "max"),
    Series("learning_rate", "learning rate", {"min": 0}, "min"),
]


def _number(value):
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def step_values(run: TrainingRun) -> dict[int, dict]:
    """{step: {metric: value}} of the run's last METRICS_SHOWN steps, oldest first. A step logged in more than one
    row (an RL run's rollout figures, then its optimizer's) is one, a later row's value winning."""
    merged: dict[int, dict] = {}
    for step, values in run.metrics.order_by("-step", "-id").values_list("step", "values")[: METRICS_SHOWN * 2]:
        row = merged.setdefault(step, {})
        for name, value in (values or {}).items():
            row.setdefault(name, value)  # newest first: the first seen is the latest
    return {step: merged[step] for step in sorted(merged)[-METRICS_SHOWN:]}


def line_chart(series: Series, steps: list[int], datasets: list[dict]) -> dict:
    # spanGaps: a run without a point at some step (the validation loss is only at checkpoints, other runs log other
    # steps) is still one line.
    return {
        "type": "line",
        "labels": steps,
        "x": {"title": "step"},
        "y": {**series.y, "title": series.title},
        "datasets": [{**d, "spanGaps": True} for d in datasets],
    }


@dataclass
class RunCurves:
    run: TrainingRun
    color: str
    values: dict[int, dict]
    figures: dict = field(default_factory=dict)  # series key -> {"last", "best", "at"} (at: the best value's step)

    @property
    def label(self) -> str:
        return f"#{self.run.pk} {self.run.name}"


def overlay(runs: list[TrainingRun]) -> dict:
    """The runs' curves overlaid: {"runs": [RunCurves], "charts": [{"series", "id", "chart", "rows": [{"curve", "last",
    "best", "at"}]}]}, one chart per series that at least one of the runs logged (its rows: those runs' figures), each
    run in its own colour."""
    curves = [RunCurves(run, COLORS[i % len(COLORS)], step_values(run)) for i, run in enumerate(runs)]
    charts = []
    for series in SERIES:
        having = []
        for curve in curves:
            points = [(s, v[series.key]) for s, v in curve.values.items() if _number(v.get(series.key)) is not None]
            if not points:
                continue
            at, best = (min if series.best == "min" else max)(points, key=lambda point: point[1])
            curve.figures[series.key] = {"last": points[-1][1], "best": best, "at": at}
            having.append(curve)
        if not having:
            continue
        steps = sorted(
            {s for curve in having for s, v in curve.values.items() if _number(v.get(series.key)) is not None}
        )
        datasets = [
            {
                "label": curve.label,
                "color": curve.color,
                "data": [_number(curve.values.get(s, {}).get(series.key)) for s in steps],
            }
            for curve in having
        ]
        rows = [{"curve": curve, **curve.figures[series.key]} for curve in having]
        charts.append(
            {"series": series, "id": f"chart-{series.key}", "chart": line_chart(series, steps, datasets), "rows": rows}
        )
    return {"runs": curves, "charts": charts}
