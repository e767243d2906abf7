// The Planner page's "Should I compress?" tab: the question for the page's model, GPU and
// parallelism, the advice matrix (PlannerAdviceModel) with a legend of its colours, the gain a
// compressed scheme must bring to be advised, the quality cost of each scheme from the stored
// quality runs, and where the decompression rates come from. The page computes the advice
// (planners::advise) and hands it over; the panel only shows it.
#pragma once

#include <optional>

#include <QString>
#include <QWidget>

#include "kvlab/planners/serving.h"

class QDoubleSpinBox;
class QLabel;
class QTableView;

namespace kvlab::gui {

class PlannerAdviceModel;

class PlannerAdvicePanel : public QWidget {
  Q_OBJECT

 public:
  explicit PlannerAdvicePanel(QWidget* parent = nullptr);

  // `question`: "Should Llama-3-70B on 4 × H100 (TP 4, PP 1) compress its KV cache?";
  // `note`: what was left out (contexts beyond the model's limit), or empty.
  void set_advice(planners::Advice advice, const QString& question, const QString& note);
  // The advice could not be computed: the table empties and `message` says why.
  void set_error(const QString& question, const QString& message);

  // The gain over fp16 a compressed scheme must bring to be advised (0.1: 10%).
  double min_gain() const;
  void set_min_gain(double fraction);
  // The most perplexity change a recommended scheme may have measured (0.01: +1%); nullopt: no
  // limit (the control's "any").
  std::optional<double> max_perplexity_change() const;
  void set_max_perplexity_change(std::optional<double> fraction);

  QTableView* table() const { return m_table; }
  PlannerAdviceModel* model() const { return m_model; }
  // The question above the matrix is named "question", the quality note "quality".

 signals:
  void options_changed();  // the minimum gain or the quality limit

 private:
  QString heading(const QString& question) const;

  QLabel *m_question = nullptr, *m_note = nullptr, *m_quality = nullptr, *m_rates = nullptr;
  QString m_rates_tip;
  QDoubleSpinBox *m_min_gain = nullptr, *m_max_ppl = nullptr;
  QTableView* m_table = nullptr;
  PlannerAdviceModel* m_model = nullptr;
};

}  // namespace kvlab::gui
