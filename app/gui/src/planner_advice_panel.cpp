#include "kvlab/gui/planner_advice_panel.h"

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>

#include "kvlab/gui/gui_style.h"
#include "kvlab/gui/number_fields.h"
#include "kvlab/gui/planner_advice_model.h"

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
  m_question->setWordWrap(true);
  QFont bold = m_question->font();
  bold.setBold(true);
  m_question->setFont(bold);
  m_question->setToolTip(tr("The page's model, GPU and parallelism; contexts and users vary"));

  auto* how = style::muted_label(
      tr("Each cell: the scheme with the most tokens/s per GPU for that many concurrent users of "
         "that many tokens, and its gain over fp16. Hover a cell for why, and for the scheme's "
         "quality cost."),
      this);
  how->setToolTip(
      tr("Every cell is computed by the planner's latency model (planners::advise): each "
         "scheme serves as many of the users as fit its KV memory, and is timed per decode "
         "step"));

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
  auto* min_gain_caption = new QLabel(tr("Compress only for a gain of at least"));
  min_gain_caption->setBuddy(m_min_gain);
  min_gain_caption->setToolTip(m_min_gain->toolTip());

  m_model = new PlannerAdviceModel(this);
  m_table = new QTableView;
  m_table->setModel(m_model);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionMode(QAbstractItemView::SingleSelection);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->horizontalHeader()->setMinimumSectionSize(90);
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->setMinimumHeight(150);
  m_table->setToolTip(
      tr("Rows: tokens per sequence; columns: concurrent users. Grey: don't compress (fp16); "
         "green: compress with the scheme shown; red: not one sequence fits with any scheme"));

  auto* legend = new QHBoxLayout;
  legend->addWidget(swatch(PlannerAdviceModel::dont_compress_color(), tr("don't compress"),
                           tr("fp16 holds every user and no scheme gains enough")));
  legend->addWidget(swatch(PlannerAdviceModel::compress_color(), tr("compress (gain over fp16)"),
                           tr("A compressed scheme serves more tokens/s per GPU: it holds more "
                              "users, or reads fewer bytes per step")));
  legend->addWidget(swatch(PlannerAdviceModel::nothing_fits_color(), tr("nothing fits"),
                           tr("Not one sequence of this context fits with any scheme: more GPUs "
                              "(tensor or pipeline parallelism)")));
  legend->addStretch(1);
  legend->addWidget(min_gain_caption);
  legend->addWidget(m_min_gain);

  m_note = style::muted_label(QString(), this);
  m_note->setToolTip(tr("Contexts left out of the matrix"));
  m_quality = new QLabel;
  m_quality->setWordWrap(true);
  m_quality->setTextFormat(Qt::PlainText);
  m_quality->setToolTip(
      tr("The newest stored quality run of this model with each scheme's method (Quality page, "
         "or kvlab quality --save): what the compression costs in perplexity and KL"));
  m_rates = style::muted_label(QString(), this);
  m_rates->setToolTip(
      tr("Where the decompression rates of the latency model come from: a kvlab bench gpu run "
         "of this GPU when one is stored, else the H100 measurement scaled by FP32 throughput"));

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_question);
  layout->addWidget(how);
  layout->addWidget(m_table, 1);
  layout->addLayout(legend);
  layout->addWidget(m_note);
  layout->addWidget(m_quality);
  layout->addWidget(m_rates);
  connect(m_min_gain, &QDoubleSpinBox::valueChanged, this, &PlannerAdvicePanel::min_gain_changed);
}

double PlannerAdvicePanel::min_gain() const {
  return m_min_gain->value() / 100;
}

void PlannerAdvicePanel::set_min_gain(double fraction) {
  m_min_gain->setValue(fraction * 100);
}

void PlannerAdvicePanel::set_advice(planners::Advice advice, const QString& question,
                                    const QString& note) {
  m_question->setText(question);
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
  m_rates->setText(tr("Decompression rates: %1").arg(QString::fromStdString(advice.rates_source)));
  m_model->set_advice(std::move(advice));
}

void PlannerAdvicePanel::set_error(const QString& question, const QString& message) {
  m_question->setText(question);
  m_model->set_advice({});
  style::make_error_text(m_note);
  m_note->setText(message);
  m_note->setVisible(true);
  m_quality->clear();
  m_rates->clear();
}

}  // namespace kvlab::gui
