#include "compression/key_channel_panel.h"

#include <QHBoxLayout>
#include <QVBoxLayout>

#include "common/layer_picker.h"
#include "compression/key_channel_chart.h"

namespace kvlab::gui {

namespace {

// The heads combo: 0 the max over heads, 1 their mean, 2 + h head h.
constexpr int kFirstHeadIndex = 2;

QStringList heads_choices(int heads) {
  QStringList choices{QObject::tr("all (max)"), QObject::tr("all (mean)")};
  for (int h = 0; h < heads; ++h) choices << QObject::tr("head %1").arg(h);
  return choices;
}

}  // namespace

KeyChannelPanel::KeyChannelPanel(QWidget* parent) : QWidget(parent) {
  m_picker = new LayerPicker(tr("KV heads"), heads_choices(0), this);
  m_picker->set_tooltips(tr("Layer whose keys are shown (0 is the first)"),
                         tr("Per channel index: the largest value over all KV heads, the mean of "
                            "the heads' largest values, or one head's"));
  m_chart = new KeyChannelChart(this);
  m_chart->setObjectName(QStringLiteral("chart"));
  m_chart->setToolTip(
      tr("Per channel of the head: the largest |k| over the cache's tokens before the Method "
         "panel's rotation (blue) and after it (green; Hadamard when the panel has none). A "
         "rotation keeps each vector's length and spreads outlier channels over the head, so "
         "it lowers the outliers and raises the quiet channels"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(m_picker);
  controls->addStretch(1);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  layout->addWidget(m_chart, 1);

  connect(m_picker, &LayerPicker::changed, this, [this](int layer, int) {
    if (!m_stats || m_stats->layer != layer) {
      emit layer_changed(layer);
    } else {
      redraw();
    }
  });
}

void KeyChannelPanel::set_layer_count(int layers) {
  m_picker->set_layer_count(layers);
}

void KeyChannelPanel::refill_heads(int heads) {
  if (heads == m_heads_listed) return;
  m_heads_listed = heads;
  m_picker->set_choices(heads_choices(heads));
}

void KeyChannelPanel::set_stats(KeyChannelStats stats) {
  refill_heads(stats.heads);
  m_picker->select(stats.layer, m_picker->choice());
  m_stats = std::move(stats);
  redraw();
}

void KeyChannelPanel::clear(const QString& why) {
  m_stats.reset();
  m_chart->clear_data(why);
}

void KeyChannelPanel::select_layer(int layer) {
  m_picker->select(layer, m_picker->choice());
}

int KeyChannelPanel::selected_layer() const {
  return m_picker->layer();
}

int KeyChannelPanel::selected_heads() const {
  const int choice = m_picker->choice();
  if (choice == 0) return kMaxOverHeads;
  if (choice == 1) return kMeanOverHeads;
  return choice - kFirstHeadIndex;
}

void KeyChannelPanel::select_heads(int heads_pick) {
  const int choice = heads_pick == kMaxOverHeads    ? 0
                     : heads_pick == kMeanOverHeads ? 1
                                                    : heads_pick + kFirstHeadIndex;
  m_picker->select(m_picker->layer(), choice);
  redraw();
}

void KeyChannelPanel::redraw() {
  if (m_stats) m_chart->set_data(key_channel_series(*m_stats, selected_heads()));
}

}  // namespace kvlab::gui
