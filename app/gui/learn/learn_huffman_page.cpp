#include "learn/learn_huffman_page.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QTimer>

#include "common/chart_pair.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "compression/code_length_chart.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab::gui {
namespace {

constexpr int kHuffmanTickMs = 600;
constexpr int kRows = LearnHuffmanModel::kRows, kColumns = LearnHuffmanModel::kColumns;
constexpr int kRowHeight = 34;

QString huffman_explanation() {
  return QObject::tr(
      "<p>After quantization every number is a small integer <b>code</b>, stored in 8 bits. The "
      "codes are far from equally common: most values lie near the middle of their range, so a "
      "few codes occur very often and the rest rarely. The <b>entropy</b> H = −Σ p log₂ p of "
      "the histogram is the fewest bits per code that any code-by-code scheme can reach.</p>"
      "<p><b>Huffman coding</b> (1952) gets within one bit of it: merge the two lightest nodes "
      "into one that weighs their sum until a single tree is left; a code's bits are the path "
      "from the root. Frequent codes are merged last, so they sit near the root and get "
      "<b>short</b> code words; rare codes get long ones. Press <b>Step</b> or <b>Play</b>.</p>"
      "<p><b>KVComp</b> builds <b>one codebook per layer</b> (keys and values apart) from the "
      "prefill's histogram and reuses it for every block appended while decoding: the histogram "
      "barely changes as tokens arrive, so one 129-byte book replaces a table per block. The "
      "engine caps code words at 12 bits (one table lookup to decode) and adds an escape code "
      "for values the prefill never produced.</p>"
      "<p>A code word has a whole number of bits, so a code of probability 0.34 (ideal: 1.56 "
      "bits) costs 1 or 2. Where every code fits in 4 bits (rel. scale 0.1 and up), the engine "
      "therefore codes each <b>pair</b> of neighbouring codes as one symbol when that is "
      "smaller: the rounding then falls on two codes at once, and the Compression view's code "
      "lengths show bits per code averaged over the pairs. This page builds the code-by-code "
      "tree.</p>");
}

}  // namespace

LearnHuffmanPage::LearnHuffmanPage(QWidget* parent)
    : LearnPage(tr("Huffman coding of the codes"), huffman_explanation(),
                QStringLiteral("Huffman, \"A Method for the Construction of Minimum-Redundancy "
                               "Codes\", Proc. IRE 1952; Jiang et al., \"KVComp: A "
                               "High-Performance, LLM-Aware, Lossy Compression Framework for KV "
                               "Cache\", 2025 (arXiv:2509.00579)"),
                tr("Open in the Compression view"), parent) {
  full_view_button()->setToolTip(
      tr("Run KVComp at this rel. scale with the Huffman codec on this same synthetic layer in "
         "the Compression view, which also compares the bit-pack and variable-width codecs"));
  m_role = new QComboBox;
  m_role->addItem(tr("keys"), static_cast<int>(TensorRole::Key));
  m_role->addItem(tr("values"), static_cast<int>(TensorRole::Value));
  m_role->setToolTip(
      tr("Which tensor of the layer to code: keys (quantized per channel in blocks of 64 "
         "tokens) or values (per token); each gets its own codebook"));
  m_rel = new QComboBox;
  for (double r : LearnHuffmanModel::rel_scales()) {
    m_rel->addItem(tr("%1 (codes 0–%2)").arg(r).arg(static_cast<int>(std::round(1 / r))), r);
  }
  m_rel->setCurrentIndex(m_rel->findData(m_model.rel_scale()));
  m_rel->setToolTip(
      tr("KVComp's step = rel. scale × (max − min) of each unit, code = round((x − min) / step), "
         "so codes run from 0 to round(1 / rel. scale): a coarser scale, fewer distinct codes"));

  m_playback = new PlaybackControls(
      {tr("Merge step after step until one tree is left; press again to pause"),
       tr("One merge: the two lightest roots become children of a new node"),
       tr("Back to the leaves, before any merge")},
      kHuffmanTickMs);
  m_playback->set_at_end([this] { return m_model.at_end(); });
  m_playback->set_can_play([this] { return m_model.step_count() > 0; });

  auto* form = new QFormLayout;
  add_form_row(form, tr("Tensor"), m_role);
  add_form_row(form, tr("Rel. scale"), m_rel);
  auto* about = new QLabel(tr("Layer 0 of a synthetic llama3-8b cache (%1 tokens × 8 KV heads × "
                              "128 channels: step b's layer), quantized by the engine's KVComp "
                              "quantizer.")
                               .arg(LearnHuffmanModel::kContext));
  about->setWordWrap(true);
  about->setToolTip(
      tr("The engine's seeded synthetic generator and KVComp quantizer, as the Compression view "
         "runs them"));
  m_step_label = new QLabel;
  m_step_label->setToolTip(tr("Merges done so far: n leaves need n − 1 merges to become a tree"));
  m_tree_note = new QLabel;
  m_tree_note->setObjectName(QStringLiteral("tree_note"));
  m_tree_note->setWordWrap(true);
  m_tree_note->setToolTip(
      tr("Which codes are the tree's leaves. The tree shows at most %1 leaves; the code lengths "
         "and bits always come from the Huffman code over every code that occurs")
          .arg(LearnHuffmanModel::kMaxTreeLeaves));
  m_error_label = new QLabel;
  m_error_label->setWordWrap(true);
  style::make_error_text(m_error_label);
  m_error_label->setToolTip(tr("Why the page could not compute its numbers"));
  auto* controls = new QVBoxLayout;
  controls->addLayout(form);
  controls->addWidget(about);
  controls->addWidget(m_playback);
  controls->addWidget(m_step_label);
  controls->addWidget(m_tree_note);
  controls->addWidget(m_error_label);
  controls->addStretch(1);
  auto* controls_box = new QWidget;
  controls_box->setLayout(controls);
  controls_box->setFixedWidth(215);

  m_chart = new CodeLengthChart;
  m_chart->setMinimumWidth(280);
  m_chart->setToolTip(
      tr("Bars: how often each uint8 code value occurs in the tensor (left axis; the engine's "
         "count_codes). Red: the length in bits of its code word in the Huffman code the tree "
         "below builds (right axis): the more frequent, the shorter"));
  m_table = new QTableWidget(kRows, kColumns);
  style_table();
  m_headline = new QLabel;
  m_headline->setObjectName(QStringLiteral("headline"));
  m_headline->setWordWrap(true);
  m_headline->setTextFormat(Qt::RichText);
  m_headline->setToolTip(
      tr("Read off the table: the Huffman row against 8-bit codes, the narrowest fixed width "
         "and the entropy, on this tensor's codes"));
  auto* table_box = new QWidget;
  auto* right = new QVBoxLayout(table_box);
  right->setContentsMargins(0, 0, 0, 0);
  right->addWidget(m_table);
  right->addWidget(m_headline);
  right->addStretch(1);

  m_tree = new HuffmanTreeWidget;
  m_tree->setToolTip(
      tr("The Huffman construction: leaves are code values (count below); each merge joins the "
         "two lightest roots under a node weighing their sum, lighter on the left (0), heavier "
         "on the right (1). Hover a node for its numbers"));

  auto* top = new QHBoxLayout;
  top->addWidget(controls_box);
  top->addWidget(new ChartPair(m_chart, tr("Code lengths"), table_box, tr("Bits per code")), 1);
  body()->addLayout(top);
  body()->addWidget(m_tree, 1);

  connect(m_role, &QComboBox::currentIndexChanged, this, &LearnHuffmanPage::recompute);
  connect(m_rel, &QComboBox::currentIndexChanged, this, &LearnHuffmanPage::recompute);
  connect(m_playback, &PlaybackControls::step_requested, this, &LearnHuffmanPage::step);
  connect(m_playback, &PlaybackControls::reset_requested, this, &LearnHuffmanPage::reset);
  recompute();
}

void LearnHuffmanPage::set_rel_scale(double rel_scale) {
  const int i = m_rel->findData(rel_scale);
  if (i >= 0) m_rel->setCurrentIndex(i);
}
void LearnHuffmanPage::set_role(TensorRole role) {
  m_role->setCurrentIndex(m_role->findData(static_cast<int>(role)));
}
bool LearnHuffmanPage::is_playing() const {
  return m_playback->is_playing();
}

void LearnHuffmanPage::recompute() {
  pause();
  m_model.set_role(static_cast<TensorRole>(m_role->currentData().toInt()));
  m_model.set_rel_scale(m_rel->currentData().toDouble());
  m_error_label->setText(m_model.error_text());
  m_tree->set_steps(m_model.tree());
  m_tree_note->setText(m_model.tree_note());
  fill_table();
  m_chart->set_data(m_model.chart_data(),
                    tr("Codes and Huffman lengths (%1)")
                        .arg(m_model.role() == TensorRole::Key ? tr("keys") : tr("values")));
  update_step_view();
}

void LearnHuffmanPage::step() {
  m_model.step();
  update_step_view();
}

void LearnHuffmanPage::play() {
  m_playback->play();
}

void LearnHuffmanPage::pause() {
  m_playback->pause();
}

void LearnHuffmanPage::reset() {
  pause();
  m_model.reset();
  update_step_view();
}

void LearnHuffmanPage::update_step_view() {
  m_tree->set_merges(m_model.merge_step());
  m_step_label->setText(m_model.step_text());
  m_playback->step_button()->setEnabled(!m_model.at_end());
  m_playback->play_button()->setEnabled(m_model.step_count() > 0);
}

void LearnHuffmanPage::style_table() {
  m_table->setHorizontalHeaderLabels(
      {tr("bits\nper code"), tr("tensor\nsize"), tr("saved vs\n8-bit"), tr("saved vs\nfixed")});
  const QString column_tips[] = {
      tr("Average bits per code: Σ count × bits of the code's word / number of codes"),
      tr("Bytes of the tensor's codes: bits per code × number of codes / 8 (scales, minimums, "
         "offsets and the codebook not included)"),
      tr("1 − bits / 8: the share (and bytes) saved against storing every code in one byte"),
      tr("1 − bits / w: the share (and bytes) saved against the narrowest fixed width w that "
         "holds the largest code")};
  const QString row_tips[] = {
      tr("Every code in one byte, as the quantizer writes them"),
      tr("Every code in w bits, w = bits of the largest code that occurs (the engine's bit-pack "
         "codec rounds w up to 2, 4 or 8)"),
      tr("The Huffman code built by the tree below (unlimited length): Σ count × length / codes"),
      tr("The engine's code-by-code book, HuffmanCodebook::from_histogram: optimal with code "
         "words of at most 12 bits and an escape symbol of weight 1, so it can cost a little more "
         "than the tree (where every code fits 4 bits the engine may code pairs instead: see "
         "above)"),
      tr("Order-0 Shannon entropy −Σ p log₂ p (the engine's shannon_entropy_bits): no "
         "code-by-code scheme gets below it")};
  for (int c = 0; c < kColumns; ++c) m_table->horizontalHeaderItem(c)->setToolTip(column_tips[c]);
  for (int r = 0; r < kRows; ++r) {
    m_table->setVerticalHeaderItem(r, new QTableWidgetItem);
    m_table->verticalHeaderItem(r)->setToolTip(row_tips[r]);
  }
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionMode(QAbstractItemView::NoSelection);
  // Sized from the font, not from the cells: before the page is first shown the headers do not
  // know their final sizes yet.
  const QFontMetrics fm(m_table->font());
  m_table->verticalHeader()->setFixedWidth(fm.horizontalAdvance(tr("engine codebook")) + 16);
  m_table->horizontalHeader()->setFixedHeight(2 * fm.lineSpacing() + 10);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->setFixedSize(
      m_table->verticalHeader()->width() +
          kColumns * (fm.horizontalAdvance(QStringLiteral("888.8 KiB")) + 14) +
          2 * m_table->frameWidth() + 2,
      m_table->horizontalHeader()->height() + kRows * kRowHeight + 2 * m_table->frameWidth() + 2);
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  m_table->verticalHeader()->setDefaultSectionSize(kRowHeight);
  m_table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_table->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_table->setToolTip(
      tr("Bits per code of five ways to store this tensor's codes, the bytes they take and what "
         "each saves. Green: this page's Huffman code"));
}

void LearnHuffmanPage::fill_table() {
  m_table->horizontalHeaderItem(3)->setText(tr("saved vs\n%1-bit").arg(m_model.bits().fixed_width));
  const QStringList names = m_model.row_names();
  for (int r = 0; r < kRows; ++r) {
    m_table->verticalHeaderItem(r)->setText(names[r]);
    const QStringList cells = m_model.row_cells(r);
    for (int c = 0; c < kColumns; ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setTextAlignment(Qt::AlignCenter);
      if (r == LearnHuffmanModel::kHuffmanRow) item->setBackground(QColor(214, 238, 214));
      m_table->setItem(r, c, item);
    }
  }
  m_headline->setText(m_model.headline());
}

}  // namespace kvlab::gui
