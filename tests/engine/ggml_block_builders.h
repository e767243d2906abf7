// Rows of ggml blocks for the dequantization tests (test_ggml_quants.cpp): each type's blocks are
// built from chosen quants and scales, packed the way llama.cpp's quantizers pack them
// (quantize_row_*_ref in ggml-quants.c, the struct layouts of ggml-common.h), together with the
// value each element must decode to, the block format's formula evaluated in double. The packing
// (ggml_block_builders.cpp) and the unpacking in engine/src/model/ggml_quants.cpp are written from
// opposite ends of the reference, so a misread bit position shows up as a wrong value.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kvlab/engine/model/ggml_types.h"

namespace kvlab::ggml_test {

using Rng = std::mt19937;

// A row of blocks and what each of its values must decode to.
struct Built {
  GgmlType type;
  std::vector<std::uint8_t> bytes;
  std::vector<double> want;
  std::vector<double> mag;  // sum of the magnitudes of the terms of each value (rounding scale)

  void value(double v, double magnitude) {
    want.push_back(v);
    mag.push_back(magnitude);
  }
  void value(double v) { value(v, std::abs(v)); }
};

// A row of `blocks` blocks of one type, random quants and scales from `rng`.
Built build_q4_0(Rng& rng, int blocks);
Built build_q4_1(Rng& rng, int blocks);
Built build_q5_0(Rng& rng, int blocks);
Built build_q5_1(Rng& rng, int blocks);
Built build_q8_0(Rng& rng, int blocks);
Built build_iq4_nl(Rng& rng, int blocks);
Built build_mxfp4(Rng& rng, int blocks);  // blocks 0 and 1: subnormal scale exponents 0 and 1
Built build_q2_k(Rng& rng, int blocks);
Built build_q3_k(Rng& rng, int blocks);
Built build_q4_k(Rng& rng, int blocks);
Built build_q5_k(Rng& rng, int blocks);
Built build_q6_k(Rng& rng, int blocks);
Built build_q8_k(Rng& rng, int blocks);
Built build_iq4_xs(Rng& rng, int blocks);
Built build_tq1_0(Rng& rng, int blocks);
Built build_tq2_0(Rng& rng, int blocks);
Built build_nvfp4(Rng& rng, int blocks);  // block 0: zero, subnormal, NaN-code and normal scales
Built build_q1_0(Rng& rng, int blocks);
Built build_q2_0(Rng& rng, int blocks);

// A row of `count` values of an element type.
Built build_f32(Rng& rng, int count);
Built build_f16(Rng& rng, int count);  // every finite code, subnormals included
Built build_bf16(Rng& rng, int count);

// Every dequantizable type: a row of `blocks` blocks (values, for the element types).
std::vector<Built> build_all(Rng& rng, int blocks_32, int blocks_256, int elements);

}  // namespace kvlab::ggml_test
