#include "cli/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace kvserve {

namespace {

// Margins around the plot area, in pixels: room for tick labels, axis titles and the title.
constexpr double kLeft = 78, kRight = 24, kTop = 48, kBottom = 62;

std::string Escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", v);
  return buffer;
}

// A tick label: as few digits as the step needs.
std::string TickLabel(double v, double step) {
  const int decimals = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.*f", decimals, std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return buffer;
}

}  // namespace

std::vector<double> NiceTicks(double low, double high, int target) {
  if (!(high > low)) high = low + 1;
  const double raw = (high - low) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  const double first = std::floor(low / step) * step;
  for (int i = 0;; ++i) {
    const double t = first + i * step;
    ticks.push_back(t);
    if (t >= high - step * 1e-9) break;
  }
  return ticks;
}

std::string RenderLinePlot(const PlotOptions& options, const std::vector<PlotSeries>& series) {
  double x_min = 0, x_max = 0, y_min = 0, y_max = 0;
  for (const PlotSeries& s : series) {
    for (const auto& [x, y] : s.points) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
  }
  const std::vector<double> x_ticks = NiceTicks(x_min, x_max, 8);
  const std::vector<double> y_ticks = NiceTicks(y_min, y_max, 6);
  const double x_lo = x_ticks.front(), x_hi = x_ticks.back();
  const double y_lo = y_ticks.front(), y_hi = y_ticks.back();
  const double w = options.width, h = options.height;
  const double plot_w = w - kLeft - kRight, plot_h = h - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x_lo) / (x_hi - x_lo) * plot_w; };
  auto py = [&](double y) { return kTop + plot_h - (y - y_lo) / (y_hi - y_lo) * plot_h; };

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << options.width << "\" height=\""
      << options.height << "\" viewBox=\"0 0 " << options.width << ' ' << options.height
      << "\" font-family=\"sans-serif\" font-size=\"13\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << Num(w / 2) << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">"
      << Escape(options.title) << "</text>\n";
  // Grid lines and tick labels.
  const double x_step = x_ticks.size() > 1 ? x_ticks[1] - x_ticks[0] : 1;
  const double y_step = y_ticks.size() > 1 ? y_ticks[1] - y_ticks[0] : 1;
  for (double t : x_ticks) {
    svg << "<line x1=\"" << Num(px(t)) << "\" y1=\"" << Num(kTop) << "\" x2=\"" << Num(px(t))
        << "\" y2=\"" << Num(kTop + plot_h) << "\" stroke=\"#e4e4e4\"/>\n"
        << "<text x=\"" << Num(px(t)) << "\" y=\"" << Num(kTop + plot_h + 18)
        << "\" text-anchor=\"middle\">" << TickLabel(t, x_step) << "</text>\n";
  }
  for (double t : y_ticks) {
    svg << "<line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(py(t)) << "\" x2=\""
        << Num(kLeft + plot_w) << "\" y2=\"" << Num(py(t)) << "\" stroke=\"#e4e4e4\"/>\n"
        << "<text x=\"" << Num(kLeft - 8) << "\" y=\"" << Num(py(t) + 4)
        << "\" text-anchor=\"end\">" << TickLabel(t, y_step) << "</text>\n";
  }
  // Axes and their titles.
  svg << "<line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(kTop + plot_h) << "\" x2=\""
      << Num(kLeft + plot_w) << "\" y2=\"" << Num(kTop + plot_h) << "\" stroke=\"black\"/>\n"
      << "<line x1=\"" << Num(kLeft) << "\" y1=\"" << Num(kTop) << "\" x2=\"" << Num(kLeft)
      << "\" y2=\"" << Num(kTop + plot_h) << "\" stroke=\"black\"/>\n"
      << "<text x=\"" << Num(kLeft + plot_w / 2) << "\" y=\"" << Num(h - 16)
      << "\" text-anchor=\"middle\">" << Escape(options.x_label) << "</text>\n"
      << "<text x=\"18\" y=\"" << Num(kTop + plot_h / 2)
      << "\" text-anchor=\"middle\" transform=\"rotate(-90 18 " << Num(kTop + plot_h / 2) << ")\">"
      << Escape(options.y_label) << "</text>\n";
  // Series, then the legend in the top-left corner of the plot area.
  for (const PlotSeries& s : series) {
    svg << "<polyline fill=\"none\" stroke=\"" << Escape(s.color)
        << "\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < s.points.size(); ++i) {
      svg << (i ? " " : "") << Num(px(s.points[i].first)) << ',' << Num(py(s.points[i].second));
    }
    svg << "\"/>\n";
    for (const auto& [x, y] : s.points) {
      svg << "<circle cx=\"" << Num(px(x)) << "\" cy=\"" << Num(py(y)) << "\" r=\"3.5\" fill=\""
          << Escape(s.color) << "\"/>\n";
    }
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const double y = kTop + 18 + 20.0 * i;
    svg << "<line x1=\"" << Num(kLeft + 14) << "\" y1=\"" << Num(y - 4) << "\" x2=\""
        << Num(kLeft + 40) << "\" y2=\"" << Num(y - 4) << "\" stroke=\"" << Escape(series[i].color)
        << "\" stroke-width=\"2\"/>\n"
        << "<text x=\"" << Num(kLeft + 48) << "\" y=\"" << Num(y) << "\">" << Escape(series[i].name)
        << "</text>\n";
  }
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace kvserve
