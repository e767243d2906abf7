// Private file helpers for the file sources: a read-only file that reads at offsets with bounds
// checks, and atomic whole-file writes (write PATH.tmp, flush to disk, rename over PATH).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "io/file_mapping.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

// A regular file opened for reading (owning its descriptor), or bytes in memory read the same
// way, so every parser runs unchanged on both.
class InputFile {
 public:
  static Result<InputFile> open(const std::filesystem::path& path);
  // `bytes` must outlive the InputFile; `label` names them in messages.
  static InputFile from_memory(std::span<const std::byte> bytes, std::string label);
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  std::uint64_t size() const { return m_size; }
  const std::string& label() const { return m_label; }  // the path, for messages
  // Reads exactly out.size() bytes at `offset`; an error (never a short read) when the range is
  // not inside the file.
  Status read_at(std::uint64_t offset, std::span<std::byte> out) const;
  // The whole file mapped read-only, for reading tensors in place; null for bytes in memory (the
  // caller owns those, for an unknown time) and when the file cannot be mapped (read it instead).
  std::shared_ptr<const FileMapping> map() const;

 private:
  InputFile(int fd, const std::byte* memory, std::uint64_t size, std::string label)
      : m_fd(fd), m_memory(memory), m_size(size), m_label(std::move(label)) {}
  int m_fd = -1;
  const std::byte* m_memory = nullptr;
  std::uint64_t m_size = 0;
  std::string m_label;
};

// A file being written. Owns its descriptor.
class OutputFile {
 public:
  static Result<OutputFile> create(const std::filesystem::path& path);
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  Status write(std::span<const std::byte> bytes);
  // Flushes to disk and closes; the descriptor is gone afterwards whatever happens.
  Status sync_and_close();

 private:
  OutputFile(int fd, std::string label) : m_fd(fd), m_label(std::move(label)) {}
  int m_fd = -1;
  std::string m_label;
};

// Writes `path` so that a crash never leaves a half-written file where a good one was: `fill`
// writes PATH.tmp, which is synced and then renamed over PATH. On any error PATH is untouched
// and PATH.tmp is removed.
Status write_file_atomically(const std::filesystem::path& path,
                             const std::function<Status(OutputFile&)>& fill);

// a * b, or false when it does not fit in 64 bits.
inline bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}

}  // namespace kvlab::detail
