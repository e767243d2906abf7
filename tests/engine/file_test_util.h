// Helpers for the file-source tests: scratch folders, raw bytes, hand-built .npy headers,
// stored zip archives (with our own CRC-32) and raw safetensors files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>
#include <cstdint>
#include <cstring>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/kv_cache.h"
#include "scratch_dir.h"

namespace kvlab::file_test {

using Bytes = std::vector<std::uint8_t>;

// A fresh, empty folder under the test build's tmp dir, unique to the running test.
inline std::filesystem::path scratch_dir(std::string_view name) {
  return test::fresh_test_dir(std::filesystem::path(KVLAB_TEST_TMPDIR) / "files", name);
}

inline void write_bytes(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline Bytes read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void append(Bytes& out, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  out.insert(out.end(), p, p + n);
}
inline void append(Bytes& out, std::string_view s) {
  append(out, s.data(), s.size());
}
inline void put16(Bytes& out, std::uint32_t v) {
  out.push_back(static_cast<std::uint8_t>(v));
  out.push_back(static_cast<std::uint8_t>(v >> 8));
}
inline void put32(Bytes& out, std::uint32_t v) {
  put16(out, v & 0xFFFF);
  put16(out, v >> 16);
}
inline void put64(Bytes& out, std::uint64_t v) {
  put32(out, static_cast<std::uint32_t>(v));
  put32(out, static_cast<std::uint32_t>(v >> 32));
}

template <class T>
Bytes as_bytes(const std::vector<T>& values) {
  Bytes out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A .npy written by hand: magic, version, header length, the dict text padded with spaces to a
// 64-byte boundary and ended by '\n' (as numpy.lib.format writes it), then `data`.
inline Bytes npy_bytes(std::string_view descr, std::string_view shape, const Bytes& data,
                       int major = 1, std::string_view fortran = "False") {
  std::string dict = "{'descr': '" + std::string(descr) +
                     "', 'fortran_order': " + std::string(fortran) +
                     ", 'shape': " + std::string(shape) + ", }";
  const std::size_t preamble = major == 1 ? 10 : 12;
  while ((preamble + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  if (major == 1) {
    put16(out, static_cast<std::uint32_t>(dict.size()));
  } else {
    put32(out, static_cast<std::uint32_t>(dict.size()));
  }
  append(out, dict);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// CRC-32 (ISO-HDLC, reflected polynomial 0xEDB88320), bit by bit: independent of zlib.
inline std::uint32_t crc32_of(const Bytes& data) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const std::uint8_t b : data) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

struct ZipMember {
  std::string name;
  Bytes data;
};

// A zip archive of stored (uncompressed) members, as zipfile.ZIP_STORED writes it. With
// `zip64`, every size and offset goes through the zip64 records (APPNOTE 4.3.14, 4.3.15, 4.5.3)
// as writers do for archives over 4 GiB: 0xFFFFFFFF in the 32-bit fields, the values in a zip64
// extra field, and a zip64 end record plus locator before the classic end record.
inline Bytes stored_zip(const std::vector<ZipMember>& members, bool zip64 = false) {
  Bytes out, cd;
  for (const auto& m : members) {
    const auto offset = static_cast<std::uint32_t>(out.size());
    const std::uint32_t crc = crc32_of(m.data);
    const auto size = static_cast<std::uint32_t>(m.data.size());
    const auto name_len = static_cast<std::uint32_t>(m.name.size());
    put32(out, 0x04034b50);
    put16(out, 20);    // version needed
    put16(out, 0);     // flags
    put16(out, 0);     // stored
    put16(out, 0);     // time
    put16(out, 0x21);  // date
    put32(out, crc);
    put32(out, size);
    put32(out, size);
    put16(out, name_len);
    put16(out, 0);
    append(out, m.name);
    out.insert(out.end(), m.data.begin(), m.data.end());

    put32(cd, 0x02014b50);
    put16(cd, 20);  // made by
    put16(cd, 20);  // needed
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, crc);
    put32(cd, zip64 ? 0xFFFFFFFFu : size);
    put32(cd, zip64 ? 0xFFFFFFFFu : size);
    put16(cd, name_len);
    put16(cd, zip64 ? 28 : 0);  // extra
    put16(cd, 0);               // comment
    put16(cd, 0);               // disk
    put16(cd, 0);               // internal attributes
    put32(cd, 0);               // external attributes
    put32(cd, zip64 ? 0xFFFFFFFFu : offset);
    append(cd, m.name);
    if (zip64) {
      put16(cd, 0x0001);
      put16(cd, 24);
      put64(cd, size);    // uncompressed
      put64(cd, size);    // compressed
      put64(cd, offset);  // local header
    }
  }
  const auto cd_offset = static_cast<std::uint32_t>(out.size());
  out.insert(out.end(), cd.begin(), cd.end());
  if (zip64) {
    const auto end64 = out.size();
    put32(out, 0x06064b50);
    put64(out, 44);  // size of the rest of this record
    put16(out, 45);
    put16(out, 45);
    put32(out, 0);
    put32(out, 0);
    put64(out, members.size());
    put64(out, members.size());
    put64(out, cd.size());
    put64(out, cd_offset);
    put32(out, 0x07064b50);  // locator
    put32(out, 0);
    put64(out, end64);
    put32(out, 1);
  }
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, zip64 ? 0xFFFF : static_cast<std::uint32_t>(members.size()));
  put16(out, zip64 ? 0xFFFF : static_cast<std::uint32_t>(members.size()));
  put32(out, zip64 ? 0xFFFFFFFFu : static_cast<std::uint32_t>(cd.size()));
  put32(out, zip64 ? 0xFFFFFFFFu : cd_offset);
  put16(out, 0);
  return out;
}

// A safetensors file from a header object and the data section, padded like ours.
inline Bytes safetensors_bytes(const nlohmann::json& header, const Bytes& data) {
  std::string text = header.dump();
  while (text.size() % 8 != 0) text += ' ';
  Bytes out;
  put64(out, text.size());
  append(out, text);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

// A cache of seeded random values; queries when q_heads > 0.
inline KvCache random_cache(DType dtype, int layers, int tokens, int kv_heads, int head_dim,
                            int q_heads = 0, int queries = 0, std::uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const auto values = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = normal(rng);
    return v;
  };
  KvCache cache;
  cache.shape = {"test-model", layers, q_heads > 0 ? q_heads : kv_heads, kv_heads, head_dim};
  cache.source = "synthetic:test";
  const std::size_t kv = static_cast<std::size_t>(tokens) * kv_heads * head_dim;
  for (int l = 0; l < layers; ++l) {
    LayerKv layer;
    layer.key = Tensor::from_float(values(kv), dtype, tokens, kv_heads, head_dim);
    layer.value = Tensor::from_float(values(kv), dtype, tokens, kv_heads, head_dim);
    if (q_heads > 0) {
      layer.query =
          Tensor::from_float(values(static_cast<std::size_t>(queries) * q_heads * head_dim), dtype,
                             queries, q_heads, head_dim);
    }
    cache.layers.push_back(std::move(layer));
  }
  return cache;
}

inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.tokens() == b.tokens() && a.heads() == b.heads() &&
         a.dim() == b.dim() &&
         (a.nbytes() == 0 || std::memcmp(a.data(), b.data(), a.nbytes()) == 0);
}

inline Bytes from_hex(std::string_view hex) {
  Bytes out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// An .npz as numpy.savez_compressed writes it (Python's zipfile, ZIP_DEFLATED, force_zip64:
// local headers carry 0xFFFFFFFF sizes and a zip64 extra field). Entries layers.{0,1}.key.npy
// and layers.{0,1}.value.npy, each '<f4' shape (2, 1, 4): layer l's key holds l*100 + i and its
// value l*100 + 50 + i for i = 0..7 in C order.
inline Bytes deflated_npz() {
  return from_hex(
      "504b03042d0000000800000021000da0d19effffffffffffffff100014006c61796572732e302e6b65792e6e7079"
      "0100"
      "1000a0000000000000005d000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a0"
      "9e96"
      "5f54529498179f5f94920a12774bcc294e058a17672416a402f91a463a0a863a0a269a3a0ab50ae4012e063068b0"
      "0712"
      "0e4004c40d40bc00880f00f1030700504b03042d000000080000002100c9addfb1ffffffffffffffff120014006c"
      "6179"
      "6572732e302e76616c75652e6e707901001000a00000000000000060000000000000009bec17ea1b10c9c850c650"
      "ad9e"
      "925a9c5ca46ea5a06e9366a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a463a"
      "0a86"
      "3a0a269a3a0ab50ae4012e06060f2706061f200e00e210208e00e218204e00e2142700504b03042d000000080000"
      "0021"
      "004ac0bc63ffffffffffffffff100014006c61796572732e312e6b65792e6e707901001000a00000000000000061"
      "0000"
      "00000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5a06e9366a2aea3a09e965f54529498179f5f94920a"
      "1277"
      "4bcc294e058a17672416a402f91a463a0a863a0a269a3a0ab50ae4012e0686134e0c0ca780f80c109f03e20b407c"
      "0988"
      "af00f1352700504b03042d0000000800000021007780cd9bffffffffffffffff120014006c61796572732e312e76"
      "616c"
      "75652e6e707901001000a00000000000000060000000000000009bec17ea1b10c9c850c650ad9e925a9c5ca46ea5"
      "a06e"
      "9366a2aea3a09e965f54529498179f5f94920a12774bcc294e058a17672416a402f91a463a0a863a0a269a3a0ab5"
      "0ae4"
      "012e060631670606712096006249209602626920960162596700504b01022d032d0000000800000021000da0d19e"
      "5d00"
      "0000a00000001000000000000000000000008001000000006c61796572732e302e6b65792e6e7079504b01022d03"
      "2d00"
      "0000080000002100c9addfb160000000a000000012000000000000000000000080019f0000006c61796572732e30"
      "2e76"
      "616c75652e6e7079504b01022d032d0000000800000021004ac0bc6361000000a000000010000000000000000000"
      "0000"
      "8001430100006c61796572732e312e6b65792e6e7079504b01022d032d0000000800000021007780cd9b60000000"
      "a000"
      "00001200000000000000000000008001e60100006c61796572732e312e76616c75652e6e7079504b050600000000"
      "0400"
      "0400fc0000008a0200000000");
}

}  // namespace kvlab::file_test
