// The Planner page's results table, imports, saving, reopening and pinning.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QSpinBox>
#include <QTableWidget>

#include "kvlab/gui/explain.h"
#include "kvlab/gui/gui_format.h"
#include "kvlab/gui/planner_view.h"
#include "kvlab/store/run_records.h"

namespace kvlab::gui {
namespace {

QStringList row_cells(const planners::Scheme& s, const planners::PlanResult& r) {
  return {QString::fromStdString(s.label),
          QString::number(r.kv_bytes_per_token, 'f', 0),
          format_byte_count(static_cast<double>(r.kv_bytes_per_sequence)),
          format_byte_count(static_cast<double>(r.kv_bytes_total)),
          r.fits ? QObject::tr("yes") : QObject::tr("no"),
          QString::number(r.max_batch),
          QString::number(r.max_context),
          r.min_gpus
              ? QStringLiteral("%1 (TP %2 × PP %3)").arg(r.min_gpus).arg(r.min_tp).arg(r.min_pp)
              : QObject::tr("none up to 64"),
          QString::number(r.decode_tokens_per_s, 'f', 0),
          QString::number(r.decode_tokens_per_s_per_sequence, 'f', 1)};
}

}  // namespace

void PlannerView::fill_table() {
  const QStringList header = {tr("scheme"),           tr("KV B/token"),  tr("KV per sequence"),
                              tr("KV of batch"),      tr("fits"),        tr("max batch"),
                              tr("max context"),      tr("fewest GPUs"), tr("tokens/s"),
                              tr("tokens/s per seq.")};
  m_table->clear();
  m_table->setColumnCount(header.size());
  m_table->setHorizontalHeaderLabels(header);
  explain::set_header_tooltips(m_table, explain::planner_columns());
  m_table->setRowCount(static_cast<int>(m_results.size() + m_pinned.size()));
  int row = 0;
  const auto put = [&](const QStringList& cells, const QColor& background) {
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      if (background.isValid()) item->setBackground(background);
      if (c == 4)
        item->setForeground(cells[c] == tr("yes") ? QColor(30, 120, 50) : QColor(190, 30, 30));
      m_table->setItem(row, c, item);
    }
    ++row;
  };
  for (std::size_t i = 0; i < m_results.size(); ++i)
    put(row_cells(m_shown_schemes[i], m_results[i]), {});
  for (const auto& [s, r] : m_pinned) {
    QStringList cells = row_cells(s, r);
    cells[0] = tr("pinned: %1 · %2").arg(m_pinned_title, cells[0]);
    put(cells, QColor(238, 238, 246));
  }
  m_table->resizeColumnsToContents();
  m_table->horizontalHeader()->setStretchLastSection(true);
}

bool PlannerView::import_config(const QString& path) {
  auto m = planners::import_hf_config_file(path.toStdString());
  if (!m) {
    m_error->setText(in_gui_terms(QString::fromStdString(m.message())));
    return false;
  }
  if (m_store) {
    if (auto s = m_store->save_catalog_entry("model", m->id, planners::model_to_json(*m)); !s) {
      m_error->setText(in_gui_terms(QString::fromStdString(s.message())));
      return false;
    }
    reload_catalogues();
  } else {
    m_models.push_back(*m);
    m_model->addItem(QString::fromStdString(m->name), QString::fromStdString(m->id));
  }
  set_model(QString::fromStdString(m->id));
  emit status_message(tr("Imported %1 from %2").arg(QString::fromStdString(m->id), path), 5000);
  return true;
}

bool PlannerView::add_gpu(const planners::GpuSpec& gpu) {
  if (auto v = gpu.validate(); !v) {
    m_error->setText(in_gui_terms(QString::fromStdString(v.message())));
    return false;
  }
  if (m_store) {
    if (auto s = m_store->save_catalog_entry("gpu", gpu.id, planners::gpu_to_json(gpu)); !s) {
      m_error->setText(in_gui_terms(QString::fromStdString(s.message())));
      return false;
    }
    reload_catalogues();
  } else {
    m_gpus.push_back(gpu);
    m_gpu->addItem(QString::fromStdString(gpu.name), QString::fromStdString(gpu.id));
  }
  set_gpu(QString::fromStdString(gpu.id));
  return true;
}

std::int64_t PlannerView::save() {
  if (!m_store) {
    m_error->setText(tr("No runs database: the scenario cannot be saved."));
    return 0;
  }
  if (m_results.empty()) return 0;
  const planners::Scenario s = scenario();
  PlanRunContext context;
  for (int i = 0; i < m_scheme_list->count(); ++i) {
    if (m_scheme_list->item(i)->checkState() == Qt::Checked) {
      context.scheme_ids.push_back(
          m_scheme_list->item(i)->data(Qt::UserRole).toString().toStdString());
    }
  }
  context.reserve_gib = m_reserve->value();
  context.evict = m_evict->currentText().toStdString();
  std::vector<std::pair<planners::Scheme, planners::PlanResult>> results;
  for (std::size_t i = 0; i < m_results.size(); ++i) {
    results.emplace_back(m_shown_schemes[i], m_results[i]);
  }
  const NewRun run = plan_run(s, results, context);
  auto id = m_store->save_run(run);
  if (!id) {
    m_error->setText(in_gui_terms(QString::fromStdString(id.message())));
    return 0;
  }
  emit status_message(tr("Scenario saved as run #%1").arg(*id), 5000);
  emit run_saved(*id);
  return *id;
}

bool PlannerView::restore(const nlohmann::json& p) {
  try {
    auto model = planners::model_from_json(p.at("model"));
    auto gpu = planners::gpu_from_json(p.at("gpu"));
    if (!model || !gpu) {
      m_error->setText(
          in_gui_terms(QString::fromStdString(!model ? model.message() : gpu.message())));
      return false;
    }
    m_restoring = true;
    if (m_model->findData(QString::fromStdString(model->id)) < 0) {
      m_models.push_back(*model);
      m_model->addItem(QString::fromStdString(model->name), QString::fromStdString(model->id));
    }
    if (m_gpu->findData(QString::fromStdString(gpu->id)) < 0) {
      m_gpus.push_back(*gpu);
      m_gpu->addItem(QString::fromStdString(gpu->name), QString::fromStdString(gpu->id));
    }
    set_model(QString::fromStdString(model->id));
    set_gpu(QString::fromStdString(gpu->id));
    m_context->setValue(p.at("context").get<int>());
    m_batch->setValue(p.at("batch").get<int>());
    m_tp->setValue(p.value("tp", 1));
    m_pp->setValue(p.value("pp", 1));
    m_util->setValue(p.value("util", 0.9));
    m_reserve->setValue(p.value("reserve_gib", 1.0));
    m_page->setValue(p.value("page_tokens", 16));
    m_efficiency->setValue(p.value("efficiency", 0.8));
    m_evict->setCurrentText(QString::fromStdString(p.value("evict", std::string("none"))));
    QStringList ids;
    for (const auto& id : p.at("schemes")) ids << QString::fromStdString(id.get<std::string>());
    m_restoring = false;
    set_schemes(ids);
  } catch (const nlohmann::json::exception& e) {
    m_restoring = false;
    m_error->setText(tr("The stored scenario cannot be read: %1").arg(e.what()));
    return false;
  }
  return m_error->text().isEmpty();
}

void PlannerView::pin() {
  const planners::Scenario s = scenario();
  m_pinned.clear();
  for (std::size_t i = 0; i < m_results.size(); ++i)
    m_pinned.emplace_back(m_shown_schemes[i], m_results[i]);
  m_pinned_title = tr("%1 on %2, %3 tokens × %4")
                       .arg(QString::fromStdString(s.model.name), QString::fromStdString(s.gpu.id))
                       .arg(s.context)
                       .arg(s.batch);
  fill_table();
}

}  // namespace kvlab::gui
