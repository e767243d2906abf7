// A read-only memory mapping of a whole file: model weights and KV caches are used straight from
// it. A file cut short by another program while mapped makes reads past its new end fault
// (SIGBUS), as with every mmap-based reader (llama.cpp's included); kvlab never writes a file in
// place (saves are atomic renames), so only an outside writer can do that.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "kvlab/engine/core/result.h"

namespace kvlab::detail {

class FileMapping {
 public:
  static Result<std::unique_ptr<FileMapping>> open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return make_error(fmt::format("{}: not a regular file", path));
    }
    auto m = map_descriptor(fd, static_cast<std::size_t>(st.st_size), path);
    ::close(fd);
    return m;
  }
  // Maps `size` bytes of an open descriptor (which the caller still owns and may close).
  static Result<std::unique_ptr<FileMapping>> map_descriptor(int fd, std::size_t size,
                                                             const std::string& label) {
    auto m = std::make_unique<FileMapping>();
    m->m_size = size;
    if (size > 0) {
      void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        return make_error(fmt::format("{}: cannot map: {}", label, std::strerror(errno)));
      }
      m->m_data = static_cast<const std::byte*>(p);
    }
    return m;
  }
  FileMapping() = default;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping() {
    if (m_data) ::munmap(const_cast<std::byte*>(m_data), m_size);
  }
  const std::byte* data() const { return m_data; }
  std::size_t size() const { return m_size; }

 private:
  const std::byte* m_data = nullptr;
  std::size_t m_size = 0;
};

}  // namespace kvlab::detail
