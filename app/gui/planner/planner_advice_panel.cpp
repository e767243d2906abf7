#include "planner/planner_advice_panel.h"

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

#include "common/gui_style.h"
#include "common/number_fields.h"
#include "planner/planner_advice_model.h"

namespace kvlab::gui {
namespace {

// A small coloured box and its meaning, for the legend under the table.
QLabel* swatch(const QColor& color, const QString& text, const QString& tip) {
  auto* l = new QLabel(QStringLiteral("<span style='background:%1'>&nbsp;&nbsp;&nbsp;&nbsp;"
                                      "</span>&nbsp;%2")
                           .arg(color.name(), text.toHtmlEscaped()));
  l->setTextFormat(Qt::RichText);
  l->setToolTip(tip);
  return l;
}

}  // namespace

PlannerAdvicePanel::PlannerAdvicePanel(QWidget* parent) : QWidget(parent) {
  m_question = new QLabel;
  m_question->setObjectName(QStringLiteral("question"));
  m_question->setWordWrap(true);
  m_question->setTextFormat(Qt::RichText);
  m_question->setToolTip(
      tr("For the page's model, GPU and parallelism, contexts and users varying. Every cell is "
         "computed by the planner's latency model (planners::advise): each scheme serves as "
         "many of the users as fit its KV memory, and is timed per decode step"));

  m_min_gain = new RealField;
  m_min_gain->setRange(0, 500);
  m_min_gain->setDecimals(0);
  m_min_gain->setSingleStep(5);
  m_min_gain->setValue(10);
  m_min_gain->setSuffix(tr(" %"));
  m_min_gain->setKeyboardTracking(false);
  m_min_gain->setToolTip(
      tr("When fp16 holds every user, a compressed scheme is advised only when it serves at "
         "least this much more tokens/s per GPU: less would not pay for its quality cost"));
  auto* min_gain_caption = new QLabel(tr("Min. gain"));
  min_gain_caption->setBuddy(m_min_gain);
  min_gain_caption->setToolTip(m_min_gain->toolTip());

  m_max_ppl = new RealField;
  m_max_ppl->setRange(0, 1000);
  m_max_ppl->setDecimals(1);
  m_max_ppl->setSingleStep(0.5);
  m_max_ppl->setValue(0);
  m_max_ppl->setSuffix(tr(" %"));
  m_max_ppl->setSpecialValueText(tr("any"));
  m_max_ppl->setKeyboardTracking(false);
  m_max_ppl->setToolTip(
      tr("Advise only schemes whose stored quality run of this model raised perplexity by at "
         "most this much; schemes with no quality run are left out too. \"any\": no limit"));
  auto* max_ppl_caption = new QLabel(tr("Max. perplexity +"));
  max_ppl_caption->setBuddy(m_max_ppl);
  max_ppl_caption->setToolTip(m_max_ppl->toolTip());

  m_model = new PlannerAdviceModel(this);
  m_table = new QTableView;
  m_table->setModel(m_model);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->horizontalHeader()->setMinimumSectionSize(64);
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->setMinimumHeight(90);
  m_table->setToolTip(
      tr("Rows: tokens per sequence; columns: concurrent users. Grey: don't compress (fp16); "
         "green: compress with the scheme shown; red: not one sequence fits with any scheme"));

  auto* legend = new QHBoxLayout;
  legend->addWidget(swatch(PlannerAdviceModel::dont_compress_color(), tr("don't compress"),
                           tr("fp16 holds every user and no scheme gains enough")));
  legend->addWidget(swatch(PlannerAdviceModel::compress_color(), tr("compress"),
                           tr("A compressed scheme serves more tokens/s per GPU: it holds more "
                              "users, or reads fewer bytes per step")));
  legend->addWidget(swatch(PlannerAdviceModel::nothing_fits_color(), tr("nothing fits"),
                           tr("Not one sequence of this context fits with any scheme: more GPUs "
                              "(tensor or pipeline parallelism)")));
  legend->addStretch(1);
  // What a scheme must bring to be advised, on a row of its own so that the page keeps to a
  // 1024-pixel window.
  auto* limits = new QHBoxLayout;
  limits->addWidget(min_gain_caption);
  limits->addWidget(m_min_gain);
  limits->addSpacing(12);
  limits->addWidget(max_ppl_caption);
  limits->addWidget(m_max_ppl);
  limits->addStretch(1);

  m_note = style::muted_label(QString(), this);
  m_note->setToolTip(tr("Contexts left out of the matrix"));
  m_quality = new QLabel;
  m_quality->setObjectName(QStringLiteral("quality"));
  m_quality->setWordWrap(true);
  m_quality->setTextFormat(Qt::PlainText);
  m_quality->setToolTip(
      tr("The newest stored quality run of this model with each scheme's method (Quality page, "
         "or kvlab quality --save): what the compression costs in perplexity and KL"));
  m_rates = style::muted_label(QString(), this);
  m_rates_tip =
      tr("Where the decompression rates of the latency model come from: a kvlab bench gpu run "
         "of this GPU when one is stored, else the H100 measurement scaled by FP32 throughput");
  m_rates->setToolTip(m_rates_tip);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 4, 0, 0);
  layout->setSpacing(4);
  layout->addWidget(m_question);
  layout->addWidget(m_table, 1);
  layout->addLayout(legend);
  layout->addLayout(limits);
  layout->addWidget(m_note);
  layout->addWidget(m_quality);
  layout->addWidget(m_rates);
  connect(m_min_gain, &QDoubleSpinBox::valueChanged, this, &PlannerAdvicePanel::options_changed);
  connect(m_max_ppl, &QDoubleSpinBox::valueChanged, this, &PlannerAdvicePanel::options_changed);
}

double PlannerAdvicePanel::min_gain() const {
  return m_min_gain->value() / 100;
}

void PlannerAdvicePanel::set_min_gain(double fraction) {
  m_min_gain->setValue(fraction * 100);
}

std::optional<double> PlannerAdvicePanel::max_perplexity_change() const {
  if (m_max_ppl->value() <= 0) return std::nullopt;
  return m_max_ppl->value() / 100;
}

void PlannerAdvicePanel::set_max_perplexity_change(std::optional<double> fraction) {
  m_max_ppl->setValue(fraction ? *fraction * 100 : 0);
}

QString PlannerAdvicePanel::heading(const QString& question) const {
  return QStringLiteral("<b>%1</b><br><span style='color:%2'>%3</span>")
      .arg(question.toHtmlEscaped(), style::kMutedText.name(),
           tr("Each cell: the scheme with the most tokens/s per GPU (within 2%, the one checked "
              "earlier, whose quality cost is smaller), and its gain over fp16. Hover a cell for "
              "why, its TPOT and its quality cost.")
               .toHtmlEscaped());
}

void PlannerAdvicePanel::set_advice(planners::Advice advice, const QString& question,
                                    const QString& note) {
  m_question->setText(heading(question));
  m_note->setStyleSheet(QString());  // muted again after an error
  m_note->setText(note);
  m_note->setVisible(!note.isEmpty());
  QStringList quality;
  bool any = false;
  for (std::size_t k = 1; k < advice.scheme_ids.size(); ++k) {
    const std::string q = k < advice.quality.size() ? advice.quality[k] : std::string();
    any = any || !q.empty();
    quality << QStringLiteral("%1: %2").arg(
        QString::fromStdString(advice.scheme_ids[k]),
        q.empty() ? tr("not measured") : QString::fromStdString(q));
  }
  m_quality->setText(any ? tr("Quality cost (stored quality runs): %1").arg(quality.join("; "))
                         : tr("Quality cost: no stored quality run of this model with these "
                              "methods; measure them on the Quality page."));
  // The source's first words name it; the whole of it (what was measured) is the tooltip.
  const QString source = QString::fromStdString(advice.rates_source);
  m_rates->setText(tr("Decompression rates: %1").arg(source.section(QStringLiteral(" ("), 0, 0)));
  m_rates->setToolTip(m_rates_tip + QStringLiteral("\n\n") + source);
  m_model->set_advice(std::move(advice));
}

void PlannerAdvicePanel::set_error(const QString& question, const QString& message) {
  m_question->setText(heading(question));
  m_model->set_advice({});
  style::make_error_text(m_note);
  m_note->setText(message);
  m_note->setVisible(true);
  m_quality->clear();
  m_rates->clear();
}

}  // namespace kvlab::gui
