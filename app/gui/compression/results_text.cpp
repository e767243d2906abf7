#include "compression/results_text.h"

#include <QCoreApplication>

#include "common/gui_format.h"

namespace kvlab::gui {

namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("ResultsPanel", text);
}

}  // namespace

ResultsTexts results_texts(const ReportSummary& s, const QString& origin) {
  ResultsTexts t;
  t.heading = tr("%1 · <b>%2</b> · %3 tokens × %4 layers · %5")
                  .arg(s.source.toHtmlEscaped(), s.method_label.toHtmlEscaped())
                  .arg(s.tokens)
                  .arg(s.layers)
                  .arg(origin.toHtmlEscaped());
  if (!s.backend.isEmpty()) t.heading += tr(" · on %1").arg(s.backend.toHtmlEscaped());
  if (s.peak_memory_bytes > 0) {
    t.heading += tr(" · peak memory %1").arg(format_byte_count(s.peak_memory_bytes));
  }
  if (s.device_peak_memory_bytes > 0) {
    t.heading += tr(" (GPU %1)").arg(format_byte_count(s.device_peak_memory_bytes));
  }
  if (!s.stages.isEmpty()) t.heading += QStringLiteral("<br>") + s.stages.toHtmlEscaped();

  t.values = {
      format_ratio(s.ratio),
      format_bits_per_value(s.bits_per_value),
      format_metric(s.mse),
      format_metric(s.max_abs),
      format_snr_db(s.snr_db),
      format_metric(s.logit_rmse),
      format_metric(s.softmax_kl),
      format_percent(s.attn_output_rel_error),
      QString::number(s.attn_output_cosine, 'f', 5),
  };
  t.fp16_formula = s.fp16_formula;
  t.measured_formula = s.measured_formula;
  t.measured_caption = tr("at %1 bits/value:").arg(format_bits_per_value(s.bits_per_value));

  if (s.codec) {
    const CodecSummary& c = *s.codec;
    t.codec = CodecTexts{
        tr("%1 codes:").arg(c.codec.isEmpty() ? tr("coded") : c.codec),
        {
            tr("%1 bits/code").arg(format_bits_per_value(c.entropy_bits_per_code)),
            tr("%1 bits/code").arg(format_bits_per_value(c.payload_bits_per_code)),
            format_byte_count(c.metadata_bytes),
            format_byte_count(c.codebook_bytes),
        },
    };
  }
  return t;
}

}  // namespace kvlab::gui
