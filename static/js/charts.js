/* Charts of the evaluation pages, drawn with the vendored Chart.js (static/vendor/chartjs) from data in the page.

   <canvas data-chart="chart-categories" role="img" aria-label="..."></canvas>
   {{ chart|json_script:"chart-categories" }}

   The data: {"type": "bar", "labels": [...], "datasets": [{"label", "data": [...], "low": [...], "high": [...]}],
   "y": {"min", "max", "title", "step"}, "x": {"title"}, "integers": counts on the y axis}. `low`/`high` (optional) draw a confidence interval's whiskers on each
   bar or point (the ciWhiskers plugin below: no plugin library); a dataset's `interval` names them in the tooltip
   ("95% CI" unless given, e.g. "± std"). Every chart has a table beside it: the page reads without
   this script. Charts are drawn on page load and again in content htmx swaps in (a page that refreshes itself). */
(function () {
  "use strict";

  const PALETTE = ["#2f5bd3", "#e07b39", "#1f8a4c", "#b03a8c", "#7c8b1f", "#5b3fd3", "#c0392b", "#2a9db5"];

  const ciWhiskers = {
    id: "ciWhiskers",
    afterDatasetsDraw(chart) {
      const ctx = chart.ctx;
      chart.data.datasets.forEach((dataset, index) => {
        if (!dataset.low || !dataset.high || !chart.isDatasetVisible(index)) return;
        const meta = chart.getDatasetMeta(index);
        const scale = chart.scales[meta.yAxisID];
        meta.data.forEach((bar, j) => {
          const low = dataset.low[j];
          const high = dataset.high[j];
          if (low === null || low === undefined || high === null || high === undefined) return;
          const top = scale.getPixelForValue(high);
          const bottom = scale.getPixelForValue(low);
          const cap = Math.max(2, Math.min(7, (bar.width || 12) / 4));
          ctx.save();
          ctx.strokeStyle = "#1d2330";
          ctx.lineWidth = 1.3;
          ctx.beginPath();
          ctx.moveTo(bar.x, top);
          ctx.lineTo(bar.x, bottom);
          ctx.moveTo(bar.x - cap, top);
          ctx.lineTo(bar.x + cap, top);
          ctx.moveTo(bar.x - cap, bottom);
          ctx.lineTo(bar.x + cap, bottom);
          ctx.stroke();
          ctx.restore();
        });
      });
    },
  };

  function number(value) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(3);
  }

  function config(spec) {
    const datasets = spec.datasets.map((dataset, index) => ({
      ...dataset,
      backgroundColor: dataset.color || PALETTE[index % PALETTE.length],
      borderColor: dataset.color || PALETTE[index % PALETTE.length],
      borderWidth: spec.type === "line" ? 2 : 0, // a line chart's line is its border
    }));
    const y = spec.y || {};
    return {
      type: spec.type || "bar",
      data: { labels: spec.labels, datasets },
      plugins: [ciWhiskers],
      options: {
        animation: false, // pages that refresh themselves redraw their charts: no flicker
        maintainAspectRatio: false,
        scales: {
          y: {
            min: y.min,
            max: y.max,
            title: { display: Boolean(y.title), text: y.title },
            // A step counted from the minimum: an axis from -1 by 0.5 has 0 among its ticks whatever the chart's
            // height (Chart.js's own choice, -1 by 0.2, is thinned to -1, -0.6, -0.2, 0.2, … on a short chart).
            ticks: { ...(spec.integers ? { precision: 0 } : {}), ...(y.step ? { stepSize: y.step } : {}) },
            // An axis that goes below 0 (a difference A − B) marks 0, where its bars start.
            grid: { color: (ctx) => (ctx.tick && ctx.tick.value === 0 && y.min < 0 ? "#6b7280" : "rgba(0, 0, 0, 0.1)") },
          },
          x: { title: { display: Boolean(spec.x && spec.x.title), text: spec.x && spec.x.title } },
        },
        plugins: {
          legend: { display: datasets.length > 1 },
          tooltip: {
            callbacks: {
              label(item) {
                const dataset = item.dataset;
                let text = `${dataset.label || ""}: ${spec.integers ? item.raw : number(item.raw)}`;
                if (dataset.low && dataset.high && dataset.low[item.dataIndex] !== null) {
                  text += ` (${dataset.interval || "95% CI"} ${number(dataset.low[item.dataIndex])}–${number(dataset.high[item.dataIndex])})`;
                }
                return text;
              },
            },
          },
        },
      },
    };
  }

  function draw(root) {
    if (!window.Chart || !root.querySelectorAll) return;
    root.querySelectorAll("canvas[data-chart]").forEach((canvas) => {
      if (window.Chart.getChart(canvas)) return;
      const source = document.getElementById(canvas.dataset.chart);
      if (!source) return;
      new window.Chart(canvas, config(JSON.parse(source.textContent)));
      canvas.dataset.drawn = "true";
    });
  }

  function forgetDetached() {
    // A swap removed the canvases of the content it replaced: let their charts go.
    Object.values(window.Chart ? window.Chart.instances : {}).forEach((chart) => {
      if (!chart.canvas || !chart.canvas.isConnected) chart.destroy();
    });
  }

  document.addEventListener("DOMContentLoaded", () => draw(document));
  document.addEventListener("htmx:load", (event) => draw(event.target));
  document.addEventListener("htmx:afterSwap", forgetDetached);
  if (document.readyState !== "loading") draw(document);
})();
