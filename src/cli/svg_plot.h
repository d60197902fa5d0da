// A line chart as a standalone SVG document: axes with "nice" ticks (1, 2, 5 × 10^k), tick labels,
// axis titles, a title, one polyline with point markers per series and a legend. Used by
// `kvserve bench --cache-compare --plot FILE.svg`.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kvserve {

struct PlotSeries {
  std::string name;
  std::string color;                              // any SVG color, e.g. "#1f77b4"
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in the given order
};

struct PlotOptions {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 760;   // pixels
  int height = 460;  // pixels
};

// Both axes start at 0 (or below, for negative data) and end at a tick at or above the largest
// value. Text is XML-escaped.
std::string RenderLinePlot(const PlotOptions& options, const std::vector<PlotSeries>& series);

// Tick positions from `low` to at least `high` with a 1, 2 or 5 × 10^k step, about `target` ticks.
std::vector<double> NiceTicks(double low, double high, int target);

}  // namespace kvserve
