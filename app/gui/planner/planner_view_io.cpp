// The Planner page's catalogues, setters, results table, imports, saving, reopening and
// pinning.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QSpinBox>
#include <QTableView>

#include "common/explain.h"
#include "common/gui_format.h"
#include "kvlab/store/run_records.h"
#include "planner/planner_table_model.h"
#include "planner/planner_view.h"

namespace kvlab::gui {
void PlannerView::reload_catalogues() {
  m_models = planners::builtin_models();
  m_gpus = planners::builtin_gpus();
  m_measured.clear();
  if (m_store) {
    if (auto entries = m_store->list_catalog_entries("model")) {
      for (const auto& j : *entries) {
        if (auto m = planners::model_from_json(j)) m_models.push_back(*m);
      }
    }
    if (auto entries = m_store->list_catalog_entries("gpu")) {
      for (const auto& j : *entries) {
        if (auto g = planners::gpu_from_json(j)) m_gpus.push_back(*g);
      }
    }
    if (auto runs = m_store->list_runs(50)) {
      for (const auto& r : *runs) {
        const auto& m = r.metrics;
        if (run_kind_from_id(r.kind) != RunKind::Compression || !m.contains("bits_per_value") ||
            !m["bits_per_value"].is_number()) {
          continue;
        }
        m_measured.push_back(planners::measured_scheme(
            "run:" + std::to_string(r.id), "run " + std::to_string(r.id) + " (" + r.method + ")",
            m["bits_per_value"].get<double>()));
      }
    }
  }
  const QString model = m_model->currentData().toString(), gpu = m_gpu->currentData().toString();
  QStringList checked;
  for (int i = 0; i < m_scheme_list->count(); ++i) {
    if (m_scheme_list->item(i)->checkState() == Qt::Checked) {
      checked << m_scheme_list->item(i)->data(Qt::UserRole).toString();
    }
  }
  const QSignalBlocker b1(m_model), b2(m_gpu), b3(m_scheme_list);
  m_model->clear();
  for (const auto& m : m_models) {
    m_model->addItem(QString::fromStdString(m.name), QString::fromStdString(m.id));
  }
  m_gpu->clear();
  for (const auto& g : m_gpus) {
    m_gpu->addItem(QString::fromStdString(g.name), QString::fromStdString(g.id));
  }
  m_scheme_list->clear();
  const auto add_scheme = [&](const QString& id, const QString& label) {
    auto* item = new QListWidgetItem(label, m_scheme_list);
    item->setData(Qt::UserRole, id);
    item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
    item->setCheckState(checked.contains(id) ? Qt::Checked : Qt::Unchecked);
    item->setToolTip(explain::planner_scheme(id));
  };
  for (const std::string_view id : planners::scheme_ids()) {  // every one the planner knows
    add_scheme(QString::fromUtf8(id.data(), static_cast<qsizetype>(id.size())),
               QString::fromStdString(planners::parse_scheme(id).value().label));
  }
  for (const auto& s : m_measured) {
    add_scheme(QString::fromStdString(s.id), QString::fromStdString(s.label));
  }
  if (!model.isEmpty()) set_model(model);
  if (!gpu.isEmpty()) set_gpu(gpu);
}

void PlannerView::set_model(const QString& id) {
  const int i = m_model->findData(id);
  if (i >= 0) m_model->setCurrentIndex(i);
}
void PlannerView::set_gpu(const QString& id) {
  const int i = m_gpu->findData(id);
  if (i >= 0) m_gpu->setCurrentIndex(i);
}
void PlannerView::set_context(int tokens) {
  m_context->setValue(tokens);
}
void PlannerView::set_batch(int batch) {
  m_batch->setValue(batch);
}
void PlannerView::set_parallelism(int tp, int pp) {
  const QSignalBlocker b(m_tp);
  m_tp->setValue(tp);
  m_pp->setValue(pp);
  recompute();
}
void PlannerView::set_schemes(const QStringList& ids) {
  {
    const QSignalBlocker b(m_scheme_list);
    for (int i = 0; i < m_scheme_list->count(); ++i) {
      auto* item = m_scheme_list->item(i);
      item->setCheckState(ids.contains(item->data(Qt::UserRole).toString()) ? Qt::Checked
                                                                            : Qt::Unchecked);
    }
  }
  recompute();
}

void PlannerView::fill_table() {
  std::vector<PlannerTableModel::Row> rows;
  for (std::size_t i = 0; i < m_results.size(); ++i) {
    rows.push_back({m_shown_schemes[i], m_results[i], false});
  }
  for (const auto& [s, r] : m_pinned) rows.push_back({s, r, true});
  m_table_model->set_rows(std::move(rows), m_pinned_title);
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
  NewRun run = plan_run(s, results, context);
  run.params["compute_efficiency"] = s.compute_efficiency;  // restore() reads it back
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
    m_compute_efficiency->setValue(p.value("compute_efficiency", 0.6));
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
