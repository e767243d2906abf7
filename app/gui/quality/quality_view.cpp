// The Quality page: the widgets over the page model (quality_model.h): the controls name the
// key and the job, the chart, the table and the retrieval curves show the model's points.
#include "quality/quality_view.h"

#include "quality/generate_panel.h"

#include <algorithm>
#include <utility>

#include <QAbstractItemView>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "common/explain.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/number_fields.h"
#include "common/run_controller.h"
#include "common/run_shell.h"
#include "quality/quality_chart.h"
#include "quality/quality_configs.h"
#include "quality/quality_model.h"
#include "quality/quality_results.h"
#include "quality/retrieval_chart.h"

namespace kvlab::gui {

namespace {

QString absolute(const QString& path) {
  return path.trimmed().isEmpty() ? QString() : QFileInfo(path.trimmed()).absoluteFilePath();
}

constexpr int kControlsWidth = 340;
constexpr int kDefaultSampleTokens = 1024;

// Sizes and selection behaviour of the table over the QualityTableModel.
void init_quality_table(QTableView* table) {
  table->setSelectionBehavior(QAbstractItemView::SelectRows);
  table->setSelectionMode(QAbstractItemView::SingleSelection);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setAlternatingRowColors(true);
  table->verticalHeader()->setVisible(false);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  // Readable names first: the configuration keeps a width of its own (its full label is in the
  // tooltip) and the table scrolls sideways in a narrow window rather than squeeze it to "…".
  table->horizontalHeader()->setSectionResizeMode(kQualityConfiguration, QHeaderView::Interactive);
  table->setColumnWidth(kQualityConfiguration, 150);
  table->horizontalHeader()->setStretchLastSection(true);
  table->horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
}

}  // namespace

QualityView::QualityView(std::shared_ptr<RunsStore> store, QWidget* parent) : QWidget(parent) {
  m_page = new QualityModel(store, this);
  m_run = m_page->run_controller();
  connect(m_run, &RunController::running_changed, this, &QualityView::set_running);
  auto* splitter = new QSplitter(Qt::Horizontal, this);
  splitter->addWidget(build_controls());
  splitter->addWidget(build_results(store));
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);
  splitter->setChildrenCollapsible(false);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(splitter);
  // Names for finding the parts (tests, accessibility tools).
  const std::pair<QWidget*, const char*> names[] = {{m_model_path, "model"},
                                                    {m_sampled, "sampled"},
                                                    {m_file, "file"},
                                                    {m_sample_tokens, "sample_tokens"},
                                                    {m_seed, "seed"},
                                                    {m_window, "window"},
                                                    {m_target_se, "target_se"},
                                                    {m_text_file, "text_file"},
                                                    {m_methods, "methods"},
                                                    {m_error, "error"},
                                                    {m_heading, "heading"},
                                                    {m_x, "x"},
                                                    {m_y, "y"},
                                                    {m_log_y, "log_y"},
                                                    {m_reset_zoom, "reset_zoom"},
                                                    {m_chart, "chart"},
                                                    {m_retrieval, "retrieval"},
                                                    {m_table, "table"}};
  for (const auto& [part, name] : names) part->setObjectName(QLatin1String(name));

  connect(m_page, &QualityModel::points_changed, this, &QualityView::redraw);
  connect(m_page, &QualityModel::key_changed, this, &QualityView::set_controls);
  connect(m_page, &QualityModel::status_message, this, &QualityView::status_message);
  connect(m_page, &QualityModel::run_saved, this, &QualityView::run_saved);
  connect(m_page, &QualityModel::error, this, &QualityView::show_error);
  connect(m_shell, &RunShell::run_requested, this, [this] { run(); });
  connect(m_model_path, &QLineEdit::editingFinished, this, &QualityView::controls_changed);
  connect(m_text_file, &QLineEdit::editingFinished, this, &QualityView::controls_changed);
  connect(m_sampled, &QRadioButton::toggled, this, &QualityView::controls_changed);
  connect(m_sample_tokens, &QSpinBox::editingFinished, this, &QualityView::controls_changed);
  connect(m_seed, &QSpinBox::editingFinished, this, &QualityView::controls_changed);
  const auto axes_changed = [this] {
    m_page->set_axes(static_cast<QualityX>(m_x->currentIndex()),
                     static_cast<QualityY>(m_y->currentIndex()), m_log_y->isChecked());
  };
  connect(m_x, &QComboBox::currentIndexChanged, this, axes_changed);
  connect(m_y, &QComboBox::currentIndexChanged, this, [this, axes_changed](int index) {
    const QSignalBlocker block(m_log_y);
    m_log_y->setChecked(static_cast<QualityY>(index) != QualityY::Agreement);
    axes_changed();
  });
  connect(m_log_y, &QCheckBox::toggled, this, axes_changed);
  connect(m_reset_zoom, &QPushButton::clicked, m_chart, &QualityChart::reset_zoom);
  connect(m_chart, &QualityChart::point_hovered, this, [this](int index) {
    const auto& points = m_page->points();
    const bool valid = index >= 0 && index < static_cast<int>(points.size());
    emit status_message(
        valid ? quality_point_summary(points[static_cast<std::size_t>(index)]) : QString(), 0);
  });
  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    const auto rows = m_table->selectionModel()->selectedRows();
    m_chart->set_highlight(rows.isEmpty() ? -1 : rows.front().row());
  });
  set_running(false);
  reload_from_store();
}

QualityView::~QualityView() = default;

QWidget* QualityView::build_controls() {
  auto* controls = new QWidget;

  auto* model_box = new QGroupBox(tr("Model"), controls);
  m_model_path = new QLineEdit(model_box);
  m_model_path->setPlaceholderText(tr(".gguf, llama2.c .bin or Hugging Face folder"));
  m_model_path->setToolTip(
      tr("A GGUF model (llama or qwen2, its tokenizer inside), a llama2.c checkpoint with its "
         "tok*.bin beside it, or a Hugging Face folder (config.json, safetensors, "
         "tokenizer.json)"));
  auto* model_file = new QPushButton(tr("File…"), model_box);
  model_file->setToolTip(tr(
      "Choose a GGUF model (.gguf) or a llama2.c checkpoint (.bin) with its tok*.bin beside it"));
  auto* model_folder = new QPushButton(tr("Folder…"), model_box);
  model_folder->setToolTip(
      tr("Choose a Hugging Face checkpoint folder (config.json, safetensors, tokenizer.json)"));
  auto* model_buttons = new QHBoxLayout;
  model_buttons->addWidget(model_file);
  model_buttons->addWidget(model_folder);
  model_buttons->addStretch(1);
  auto* model_layout = new QVBoxLayout(model_box);
  model_layout->addWidget(m_model_path);
  model_layout->addLayout(model_buttons);
  connect(model_file, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Model file"), m_model_path->text(),
                                     tr("Models (*.gguf *.bin);;GGUF models (*.gguf);;llama2.c "
                                        "checkpoints (*.bin);;All files (*)"));
    if (!path.isEmpty()) set_model_path(path);
  });
  connect(model_folder, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getExistingDirectory(this, tr("Hugging Face model folder"),
                                                           m_model_path->text());
    if (!path.isEmpty()) set_model_path(path);
  });

  auto* text_box = new QGroupBox(tr("Text"), controls);
  m_sampled = new QRadioButton(tr("The model's own sampled text"), text_box);
  m_sampled->setChecked(true);
  m_sampled->setToolTip(
      tr("Score text the model samples itself: stories from BOS at temperature 1 with a seeded "
         "generator, so no corpus is needed"));
  m_sample_tokens = new IntField(text_box);
  m_sample_tokens->setRange(2, 1'000'000);
  m_sample_tokens->setValue(kDefaultSampleTokens);
  m_sample_tokens->setSuffix(tr(" tokens"));
  m_sample_tokens->setToolTip(
      tr("Tokens of sampled text to score; they are cut into windows of the model's context, "
         "each starting from BOS"));
  m_seed = new IntField(text_box);
  m_seed->setRange(0, 1'000'000'000);
  m_seed->setValue(1);
  m_seed->setPrefix(tr("seed "));
  m_seed->setToolTip(tr("Seed of the sampler: the same seed gives the same text"));
  auto* sample_row = new QHBoxLayout;
  sample_row->addSpacing(20);
  sample_row->addWidget(m_sample_tokens);
  sample_row->addWidget(m_seed);
  m_file = new QRadioButton(tr("A text file"), text_box);
  m_file->setToolTip(tr("Score a UTF-8 text of your own, tokenized with the model's tokenizer"));
  m_text_file = new QLineEdit(text_box);
  m_text_file->setPlaceholderText(tr("UTF-8 text"));
  m_text_file->setToolTip(tr("Path of the UTF-8 text file to score"));
  auto* text_browse = new QPushButton(tr("Browse…"), text_box);
  text_browse->setToolTip(tr("Choose the text file"));
  auto* file_row = new QHBoxLayout;
  file_row->addSpacing(20);
  file_row->addWidget(m_text_file, 1);
  file_row->addWidget(text_browse);
  m_window = new IntField(text_box);
  m_window->setRange(0, 1'000'000);
  m_window->setValue(0);
  m_window->setSingleStep(256);
  m_window->setPrefix(tr("windows of "));
  m_window->setSuffix(tr(" tokens"));
  m_window->setSpecialValueText(tr("windows of the model's context, or one of the whole text"));
  m_window->setToolTip(
      tr("Tokens per window, BOS included: the text is cut into windows of this many positions, "
         "each scored from BOS. The default is the model's context, or the whole text in one "
         "window where the text is shorter; a long-context model (8K "
         "and more) scores far faster in shorter windows (512), as `kvlab quality --window` "
         "does"));
  m_target_se = new RealField(text_box);
  m_target_se->setRange(0, 100);
  m_target_se->setDecimals(2);
  m_target_se->setSingleStep(0.25);
  m_target_se->setValue(0);
  m_target_se->setPrefix(tr("stop at ± "));
  m_target_se->setSuffix(tr(" points"));
  m_target_se->setSpecialValueText(tr("score every window of the text"));
  m_target_se->setToolTip(
      tr("Score windows in text order, eight at a time, only until the standard error of each "
         "configuration's perplexity change is at most this many percentage points (or the text "
         "ends): a long text then costs only what the precision asked for, as `kvlab quality "
         "--target-se` does. The heading and the table say how many windows each run rests on"));
  auto* text_layout = new QVBoxLayout(text_box);
  text_layout->addWidget(m_sampled);
  text_layout->addLayout(sample_row);
  text_layout->addWidget(m_file);
  text_layout->addLayout(file_row);
  text_layout->addWidget(m_window);
  text_layout->addWidget(m_target_se);
  connect(text_browse, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("Text to score"), m_text_file->text(), tr("Text (*.txt);;All files (*)"));
    if (!path.isEmpty()) set_text_file(path);
  });

  auto* methods_box = new QGroupBox(tr("Configurations to compare"), controls);
  m_methods = new QListWidget(methods_box);
  m_methods->setToolTip(
      tr("The configurations to measure: quantization methods and eviction policies, each "
         "saved as its own quality run"));
  for (const QualityChoice& c : quality_choices()) {
    auto* item = new QListWidgetItem(c.name, m_methods);
    item->setData(Qt::UserRole, c.id);
    item->setToolTip(quality_choice_tooltip(c));
    item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
    item->setCheckState(c.checked_at_start ? Qt::Checked : Qt::Unchecked);
  }
  m_methods->setMinimumHeight(m_methods->sizeHintForRow(0) * 7);
  auto* all = new QPushButton(tr("All"), methods_box);
  all->setToolTip(tr("Check every configuration"));
  auto* none = new QPushButton(tr("None"), methods_box);
  none->setToolTip(tr("Uncheck every configuration"));
  auto* check_buttons = new QHBoxLayout;
  check_buttons->addWidget(all);
  check_buttons->addWidget(none);
  check_buttons->addStretch(1);
  auto* methods_layout = new QVBoxLayout(methods_box);
  methods_layout->addWidget(m_methods, 1);
  methods_layout->addLayout(check_buttons);
  connect(all, &QPushButton::clicked, this, [this] {
    QStringList ids;
    for (const QualityChoice& c : quality_choices()) ids << c.id;
    set_checked(ids);
  });
  connect(none, &QPushButton::clicked, this, [this] { set_checked({}); });

  m_shell = new RunShell({tr("Measure each checked configuration and save it as a quality run"),
                          tr("Stop measuring; the configurations already measured stay saved"),
                          tr("How far the measurement has got, window by window")},
                         m_run, controls);
  auto* note = style::muted_label(
      tr("Each configuration runs the model over the text twice, exactly and with attention "
         "reading the compressed or evicted cache, in windows of the model's context (or of the "
         "whole text where it is shorter)."),
      controls);

  auto* layout = new QVBoxLayout(controls);
  layout->setContentsMargins(0, 0, 6, 0);
  layout->addWidget(model_box);
  layout->addWidget(text_box);
  layout->addWidget(methods_box, 1);
  layout->addWidget(m_shell);
  layout->addWidget(note);

  auto* scroll = new QScrollArea;  // scrolls rather than clips when the window is short
  scroll->setWidget(controls);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setMinimumWidth(kControlsWidth);
  scroll->setMaximumWidth(kControlsWidth + 120);
  return scroll;
}

QWidget* QualityView::build_results(const std::shared_ptr<RunsStore>& store) {
  auto* results = new QWidget;
  m_error = new QLabel(results);
  m_error->setWordWrap(true);
  m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
  style::make_error_banner(m_error);
  m_error->setVisible(false);
  m_heading = new QLabel(results);
  m_heading->setWordWrap(true);
  m_heading->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_heading->setToolTip(
      tr("The model and text the runs were measured on; exact perplexity is the model's own, "
         "exp(mean negative log-likelihood) with an uncompressed cache"));

  m_x = new QComboBox(results);
  m_x->addItem(tr("memory ratio"));
  m_x->addItem(tr("bits per value"));
  m_x->setItemData(0, explain::quality_ratio(), Qt::ToolTipRole);
  m_x->setItemData(1, explain::quality_bits(), Qt::ToolTipRole);
  m_x->setToolTip(
      tr("The chart's x axis: memory ratio vs fp16 (higher is smaller) or bits per value held "
         "(lower is smaller), eviction's kept fraction included"));
  m_y = new QComboBox(results);
  m_y->addItem(tr("Δ perplexity"));
  m_y->addItem(tr("agreement"));
  m_y->addItem(tr("KL"));
  m_y->setItemData(0, explain::perplexity_change(), Qt::ToolTipRole);
  m_y->setItemData(1, explain::next_token_agreement(), Qt::ToolTipRole);
  m_y->setItemData(2, explain::quality_kl(), Qt::ToolTipRole);
  m_y->setToolTip(
      tr("The chart's y axis: how much the compressed or evicted cache changes the model's "
         "predictions (perplexity change, next-token agreement or KL)"));
  m_log_y = new QCheckBox(tr("Log y"), results);
  m_log_y->setChecked(true);
  m_log_y->setToolTip(tr("A logarithmic y axis, used when every value is positive"));
  m_reset_zoom = new QPushButton(tr("Reset zoom"), results);
  m_reset_zoom->setToolTip(tr("Show every point again (drag pans, the wheel zooms)"));
  for (QComboBox* axis : {m_x, m_y}) {  // shrink rather than widen the page past a laptop's
    axis->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    axis->setMinimumContentsLength(10);
    axis->setMaximumWidth(230);  // takes what room there is, up to its longest item
  }
  auto* selectors = new QHBoxLayout;
  auto* x_label = new QLabel(tr("x"), results);
  x_label->setBuddy(m_x);
  x_label->setToolTip(m_x->toolTip());
  auto* y_label = new QLabel(tr("y"), results);
  y_label->setBuddy(m_y);
  y_label->setToolTip(m_y->toolTip());
  selectors->addWidget(x_label);
  selectors->addWidget(m_x, 1);
  selectors->addSpacing(8);
  selectors->addWidget(y_label);
  selectors->addWidget(m_y, 1);
  selectors->addSpacing(8);
  selectors->addWidget(m_log_y);
  selectors->addStretch(1);
  selectors->addWidget(m_reset_zoom);

  m_chart = new QualityChart;
  m_retrieval = new RetrievalChart;
  m_chart_tabs = new QTabWidget;
  m_chart_tabs->setDocumentMode(true);
  m_chart_tabs->addTab(m_chart, tr("Quality against memory"));
  m_chart_tabs->addTab(m_retrieval, tr("Passkey retrieval against budget"));
  m_generate = new GeneratePanel([this] { return absolute(m_model_path->text()); }, store);
  connect(m_generate, &GeneratePanel::status_message, this, &QualityView::status_message);
  connect(m_generate, &GeneratePanel::run_saved, this, &QualityView::run_saved);
  m_chart_tabs->addTab(m_generate, tr("Generate from a compressed cache"));
  m_chart_tabs->setTabToolTip(
      kGenerateTab, tr("The model continues a prompt with its cache held compressed, as each "
                       "method's engine stores it: memory held, decode speed against fp16, and "
                       "where the text departs from fp16's (kvlab generate --method M --compare)"));
  m_chart_tabs->setTabToolTip(0, tr("Each stored quality run of this model and text: error "
                                    "against memory, the Pareto frontier as a step line"));
  m_chart_tabs->setTabToolTip(
      kRetrievalTab, tr("Stored passkey-retrieval runs (kvlab quality --needle --save) of this "
                        "model: the share of pass keys found against the eviction budget, one "
                        "line per policy; dashed: pressed before the question was read"));
  m_table = new QTableView;
  m_table->setModel(m_page->table());
  init_quality_table(m_table);
  // The Generate tab is a page of its own: the runs table and the axes are the charts'.
  connect(m_chart_tabs, &QTabWidget::currentChanged, this, [this, selectors](int index) {
    const bool charts = index != kGenerateTab;
    m_table->setVisible(charts);
    for (int i = 0; i < selectors->count(); ++i) {
      if (QWidget* w = selectors->itemAt(i)->widget()) w->setVisible(charts);
    }
  });
  auto* vertical = new QSplitter(Qt::Vertical);
  vertical->addWidget(m_chart_tabs);
  vertical->addWidget(m_table);
  vertical->setChildrenCollapsible(false);
  vertical->setStretchFactor(0, 3);
  vertical->setStretchFactor(1, 2);
  vertical->setSizes({480, 280});

  auto* layout = new QVBoxLayout(results);
  layout->setContentsMargins(6, 0, 0, 0);
  layout->addWidget(m_error);
  layout->addWidget(m_heading);
  layout->addLayout(selectors);
  layout->addWidget(vertical, 1);
  return results;
}

void QualityView::set_model_path(const QString& path) {
  m_model_path->setText(path);
  controls_changed();
}

void QualityView::offer_model_path(const QString& path) {
  const QString now = m_model_path->text().trimmed();
  if (path.isEmpty() || (!now.isEmpty() && now != m_offered_model)) return;
  m_offered_model = path;
  set_model_path(path);
}

void QualityView::set_sampled_text(int tokens, std::uint64_t seed) {
  m_syncing = true;
  m_sample_tokens->setValue(tokens);
  m_seed->setValue(static_cast<int>(seed));
  m_sampled->setChecked(true);
  m_syncing = false;
  controls_changed();
}

void QualityView::set_text_file(const QString& path) {
  m_syncing = true;
  m_text_file->setText(path);
  m_file->setChecked(true);
  m_syncing = false;
  controls_changed();
}

void QualityView::set_window(int tokens) {
  m_window->setValue(tokens);
}

void QualityView::set_target_se(double points) {
  m_target_se->setValue(points);
}

void QualityView::set_checked(const QStringList& ids) {
  for (int i = 0; i < m_methods->count(); ++i) {
    QListWidgetItem* item = m_methods->item(i);
    item->setCheckState(ids.contains(item->data(Qt::UserRole).toString()) ? Qt::Checked
                                                                          : Qt::Unchecked);
  }
}

QStringList QualityView::checked_ids() const {
  QStringList ids;
  for (int i = 0; i < m_methods->count(); ++i) {
    const QListWidgetItem* item = m_methods->item(i);
    if (item->checkState() == Qt::Checked) ids << item->data(Qt::UserRole).toString();
  }
  return ids;
}

QualityText QualityView::controls_text() const {
  QualityText text;
  if (m_file->isChecked()) {
    text.kind = QualityText::Kind::File;
    text.path = absolute(m_text_file->text()).toStdString();
  } else {
    text.tokens = m_sample_tokens->value();
    text.seed = static_cast<std::uint64_t>(m_seed->value());
  }
  return text;
}

QualityKey QualityView::controls_key() const {
  QualityKey key;
  key.model = absolute(m_model_path->text()).toStdString();
  key.text = controls_text().describe();
  return key;
}

void QualityView::set_controls(const QualityKey& key) {
  m_syncing = true;
  m_model_path->setText(QString::fromStdString(key.model));
  if (const auto text = QualityText::parse(key.text)) {
    if (text->kind == QualityText::Kind::File) {
      m_text_file->setText(QString::fromStdString(text->path));
      m_file->setChecked(true);
    } else {
      m_sample_tokens->setValue(text->tokens);
      m_seed->setValue(static_cast<int>(text->seed));
      m_sampled->setChecked(true);
    }
  }
  m_syncing = false;
}

// The chart follows the controls: the stored runs of the model and text they name.
void QualityView::controls_changed() {
  if (m_syncing) return;
  m_page->set_key(controls_key());
}

void QualityView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (!is_running()) reload_from_store();  // runs the CLI saved meanwhile
}

void QualityView::reload_from_store() {
  m_page->reload();
}

bool QualityView::show_stored_run(std::int64_t id) {
  if (!m_page->show_stored_run(id)) return false;
  m_error->setVisible(false);
  if (const int row = m_page->table()->row_of_run(id); row >= 0) m_table->selectRow(row);
  return true;
}

void QualityView::redraw() {
  const std::int64_t selected = [this]() -> std::int64_t {
    const auto rows = m_table->selectionModel()->selectedRows();
    return rows.isEmpty() ? 0 : m_page->table()->run_at(rows.front().row());
  }();
  m_heading->setText(m_page->heading());
  if (const QString why = m_page->retrieval_error(); why.isEmpty()) {
    m_retrieval->set_data(m_page->retrieval());
  } else {
    m_retrieval->clear_data(why);
  }
  if (m_page->points().empty()) {
    m_chart->clear_data(m_page->empty_message());
    return;
  }
  m_chart->set_data(m_page->chart_data());
  if (const int row = m_page->table()->row_of_run(selected); selected && row >= 0) {
    m_table->selectRow(row);
  }
}

void QualityView::set_running(bool running) {
  for (QWidget* w :
       std::initializer_list<QWidget*>{m_model_path, m_sampled, m_file, m_sample_tokens, m_seed,
                                       m_text_file, m_window, m_target_se, m_methods}) {
    w->setEnabled(!running);
  }
}

bool QualityView::is_running() const {
  return m_run->running();
}

QualityJob QualityView::job() const {
  QualityJob job;
  job.model = absolute(m_model_path->text()).toStdString();
  job.text = controls_text();
  job.window = m_window->value();
  job.target_se = m_target_se->value() / 100;  // given in percentage points
  for (const QString& id : checked_ids()) {
    if (const QualityChoice* c = find_quality_choice(id)) job.choices.push_back(*c);
  }
  return job;
}

bool QualityView::run() {
  if (!m_page->run(job())) return false;
  m_error->setVisible(false);
  return true;
}

void QualityView::cancel() {
  m_run->cancel();
}

bool QualityView::run_and_wait(int timeout_ms) {
  return m_run->run_and_wait([this] { return run(); }, timeout_ms);
}

bool QualityView::wait_until_done(int timeout_ms) {
  return m_run->wait_until_done(timeout_ms);
}

const QString& QualityView::last_error() const {
  return m_run->last_error();
}

void QualityView::show_error(const QString& engine_message) {
  const QString message = in_gui_terms(engine_message);
  m_error->setText(message);
  m_error->setVisible(true);
  emit status_message(message, 0);
}

}  // namespace kvlab::gui
