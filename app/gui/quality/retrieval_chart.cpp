#include "quality/retrieval_chart.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "common/chart_style.h"

namespace kvlab::gui {

namespace {

const std::array<QCPScatterStyle::ScatterShape, 5> kShapes{
    QCPScatterStyle::ssCircle, QCPScatterStyle::ssSquare, QCPScatterStyle::ssDiamond,
    QCPScatterStyle::ssTriangle, QCPScatterStyle::ssCross};

// On two lines: one is wider than the chart at the app's smallest window.
QString no_runs_message() {
  return QObject::tr("No passkey-retrieval runs yet\n(kvlab quality --needle --save makes them)");
}

}  // namespace

RetrievalChart::RetrievalChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 240);
  setAutoAddPlottableToLegend(false);
  m_title = add_title(this, tr("Passkey retrieval against budget"));
  xAxis->setLabel(tr("budget (share of the prompt kept)"));
  yAxis->setLabel(tr("pass keys found"));
  QSharedPointer<QCPAxisTickerText> percent(new QCPAxisTickerText);
  for (int p = 0; p <= 100; p += 20) percent->addTick(p / 100.0, QStringLiteral("%1 %").arg(p));
  yAxis->setTicker(percent);
  m_full = new QCPItemStraightLine(this);
  m_full->setObjectName(QStringLiteral("full_line"));
  m_full->setPen(QPen(QColor(120, 120, 120), 1.2, Qt::DotLine));
  m_full_label = new QCPItemText(this);
  m_full_label->setColor(QColor(90, 90, 90));
  m_full_label->setFont(QFont(font().family(), 8));
  m_full_label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
  m_full_label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
  m_full_label->position->setTypeY(QCPItemPosition::ptPlotCoords);
  add_legend_row(this, legend, plotLayout()->rowCount());
  legend->setWrap(3);
  pan_and_ctrl_wheel_zoom(this);
  style_plot(this);
  clear_data(no_runs_message());
}

void RetrievalChart::clear_data(const QString& message) {
  m_data = {};
  for (QCPGraph* g : m_lines) removeGraph(g);
  m_lines.clear();
  m_full->setVisible(false);
  m_full_label->setVisible(false);
  m_title->setText(message);
  xAxis->setRange(0, 1);
  yAxis->setRange(0, 1.05);
  replot();
}

void RetrievalChart::set_data(const RetrievalChartData& data) {
  if (data.lines.empty() && !data.full_accuracy) {
    clear_data(no_runs_message());
    return;
  }
  clear_data({});
  m_data = data;
  std::map<std::string, std::size_t> policy_color;  // a policy keeps its colour when dashed
  const auto policy_has_solid = [&](const std::string& id) {
    return std::any_of(data.lines.begin(), data.lines.end(), [&](const RetrievalLine& l) {
      return l.policy_id == id && !l.press_before_question;
    });
  };
  bool any_dashed = false;
  double lo = 1, hi = 0;
  for (const RetrievalLine& line : data.lines) {
    const auto c = policy_color.emplace(line.policy_id, policy_color.size()).first->second;
    QCPGraph* g = addGraph(xAxis, yAxis);
    g->setObjectName(QStringLiteral("policy_line"));
    const QColor color = palette::series(c);
    g->setPen(QPen(color, 2, line.press_before_question ? Qt::DashLine : Qt::SolidLine));
    // Ten colours, five markers: the marker moves on by one each time the colours come round,
    // so no two of the first fifty policies look alike.
    const auto shape = kShapes[(c + c / palette::kSeriesColors) % kShapes.size()];
    g->setScatterStyle(
        QCPScatterStyle(shape, color, line.press_before_question ? Qt::white : color, 7));
    g->setName(line.name);
    g->setData(QVector<double>(line.budget.begin(), line.budget.end()),
               QVector<double>(line.accuracy.begin(), line.accuracy.end()), true);
    // One legend entry per policy: its dashed twin shares the colour and marker, and the axis
    // label says what dashed means (two entries per press made the legend taller than the plot).
    if (!line.press_before_question || !policy_has_solid(line.policy_id)) {
      g->addToLegend(legend);
      if (QCPAbstractLegendItem* item = legend->itemWithPlottable(g)) {
        item->setMargins(QMargins(8, 2, 8, 6));  // room below the text for the descenders
      }
    }
    any_dashed = any_dashed || line.press_before_question;
    m_lines.push_back(g);
    for (double b : line.budget) lo = std::min(lo, b), hi = std::max(hi, b);
  }
  if (data.full_accuracy) {
    m_full->point1->setCoords(0, *data.full_accuracy);
    m_full->point2->setCoords(1, *data.full_accuracy);
    m_full_label->setText(tr("full cache: %1 %").arg(100 * *data.full_accuracy, 0, 'g', 3));
    m_full_label->position->setCoords(0.99, *data.full_accuracy);
    m_full->setVisible(true);
    m_full_label->setVisible(true);
  }
  xAxis->setLabel(any_dashed ? tr("budget (share of the prompt kept) · dashed, hollow marks: "
                                  "pressed before the question")
                             : tr("budget (share of the prompt kept)"));
  if (hi < lo) lo = 0, hi = 1;
  const double pad = std::max(0.02, (hi - lo) * 0.06);
  xAxis->setRange(std::max(0.0, lo - pad), std::min(1.02, hi + pad));
  yAxis->setRange(-0.03, 1.14);  // room above 100 % for the full cache's label
  QSharedPointer<QCPAxisTickerText> percent(new QCPAxisTickerText);
  const double step = hi - lo > 0.5 ? 0.1 : 0.05;
  for (double x = 0; x <= 1.0001; x += step) {
    percent->addTick(x, QStringLiteral("%1 %").arg(std::round(100 * x)));
  }
  xAxis->setTicker(percent);
  m_title->setText(data.title);
  replot();
}

}  // namespace kvlab::gui
