/* What the results view (app.js) and the comparison (compare.js) share when they hand data to
 * Plotly: the series colours, error bars from a mean and its interval's ends, and an x axis
 * whose ticks are the swept values themselves (chain length 2, 3, 5, 8: never 2.5).
 *
 * Every number comes from the server: the ends of an interval are drawn as sent (the server
 * cuts the interval of a rate, a time or a share at 0); an end the server could not bound
 * (null) draws no bar on that side, and the hover text says so. */
(function () {
  "use strict";
  // Plotly's own default order
  const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                   "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  // at most this many distinct swept values are each a tick of their own
  const MAX_TICKS = 20;

  /** Plotly error bars from the means and the interval's low and high ends (null: none). */
  function bars(mean, low, high) {
    return {type: "data", symmetric: false, visible: true,
            array: mean.map((m, i) => high[i] === null || m === null ? 0 : high[i] - m),
            arrayminus: mean.map((m, i) => low[i] === null || m === null ? 0 : m - low[i])};
  }

  /** An x axis titled ``title``; when every x of the traces is a number and there are few,
   * its ticks are exactly those values (the swept ones), else Plotly's own. */
  function xaxis(title, xs) {
    const axis = {title: {text: title || ""}};
    const all = [].concat(...xs);
    if (all.length && all.every(v => typeof v === "number")) {
      const ticks = [...new Set(all)].sort((a, b) => a - b);
      if (ticks.length <= MAX_TICKS) {
        axis.tickmode = "array";
        axis.tickvals = ticks;
        axis.ticktext = ticks.map(String);
      }
    } else if (all.length) {
      axis.type = "category";
    }
    return axis;
  }

  window.SfclabPlot = {COLOURS: COLOURS, bars: bars, xaxis: xaxis};
})();
