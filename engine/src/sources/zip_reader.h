// Private: a small, defensive zip reader for .npz archives. Reads the central directory (zip64
// included, as numpy writes it for large arrays) and streams entries that are stored or
// deflated, checking each entry's CRC-32. Every offset and size is checked against the file;
// nothing is trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "io/file_io.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;  // 0 stored, 8 deflate
  std::uint16_t flags = 0;
  std::uint32_t crc32 = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t uncompressed_size = 0;
  std::uint64_t local_header_offset = 0;
};

// Reads the central directory. Encrypted entries, multi-disk archives and compression methods
// other than stored and deflate are errors; so is any record that points outside the file.
Result<std::vector<ZipEntry>> read_zip_directory(const InputFile& file);

// Reads one entry's uncompressed bytes in order.
class ZipEntryReader {
 public:
  static Result<ZipEntryReader> open(const InputFile& file, const ZipEntry& entry);
  ZipEntryReader(ZipEntryReader&&) noexcept;
  ZipEntryReader& operator=(ZipEntryReader&&) noexcept;
  ~ZipEntryReader();

  std::uint64_t size() const { return m_entry.uncompressed_size; }
  std::uint64_t position() const { return m_position; }
  // The next out.size() bytes; an error if the entry has fewer left or its data is corrupt.
  Status read(std::span<std::byte> out);
  // Call after reading every byte: checks the compressed stream ends there and the CRC-32.
  Status finish();

 private:
  struct Inflater;
  ZipEntryReader(const InputFile& file, ZipEntry entry, std::uint64_t data_offset);
  std::string where() const;  // "archive.npz: entry 'x.npy'"
  Status refill();            // more compressed input for the inflater, when it has none

  const InputFile* m_file = nullptr;
  ZipEntry m_entry;
  std::uint64_t m_data_offset = 0;  // start of the compressed data in the file
  std::uint64_t m_position = 0;     // uncompressed bytes delivered
  std::uint64_t m_consumed = 0;     // compressed bytes taken from the file
  std::uint32_t m_crc = 0;
  std::unique_ptr<Inflater> m_inflater;  // deflate only
};

}  // namespace kvlab::detail
