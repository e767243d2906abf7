#include "io/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace kvlab::detail {

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

}  // namespace

Result<InputFile> InputFile::open(const std::filesystem::path& path) {
  std::string label = path.string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(fmt::format("{}: cannot open: {}", label, errno_text(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(fmt::format("{}: cannot read file size: {}", label, errno_text(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(fmt::format("{}: not a regular file", label));
  }
  return InputFile(fd, nullptr, static_cast<std::uint64_t>(st.st_size), std::move(label));
}

InputFile InputFile::from_memory(std::span<const std::byte> bytes, std::string label) {
  return InputFile(-1, bytes.data(), bytes.size(), std::move(label));
}

InputFile::InputFile(InputFile&& other) noexcept
    : m_fd(std::exchange(other.m_fd, -1)),
      m_memory(other.m_memory),
      m_size(other.m_size),
      m_label(std::move(other.m_label)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = std::exchange(other.m_fd, -1);
    m_memory = other.m_memory;
    m_size = other.m_size;
    m_label = std::move(other.m_label);
  }
  return *this;
}

InputFile::~InputFile() {
  if (m_fd >= 0) ::close(m_fd);
}

std::shared_ptr<const FileMapping> InputFile::map() const {
  if (m_fd < 0 || m_size == 0) return nullptr;
  auto mapping = FileMapping::map_descriptor(m_fd, static_cast<std::size_t>(m_size), m_label);
  if (!mapping) return nullptr;
  return std::shared_ptr<const FileMapping>(std::move(*mapping));
}

Status InputFile::read_at(std::uint64_t offset, std::span<std::byte> out) const {
  if (offset > m_size || out.size() > m_size - offset) {
    return make_error(fmt::format("{}: cannot read {} bytes at offset {}: the file is {} bytes",
                                  m_label, out.size(), offset, m_size));
  }
  if (m_fd < 0) {  // in memory (or empty)
    if (!out.empty()) std::memcpy(out.data(), m_memory + offset, out.size());
    return Ok{};
  }
  std::size_t done = 0;
  while (done < out.size()) {
    // pread takes at most SSIZE_MAX; Linux moves at most ~2 GiB per call anyway.
    const std::size_t chunk = std::min<std::size_t>(out.size() - done, std::size_t{1} << 30);
    const ssize_t n = ::pread(m_fd, out.data() + done, chunk, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(fmt::format("{}: read error at offset {}: {}", m_label, offset + done,
                                    errno_text(errno)));
    }
    if (n == 0) {
      return make_error(
          fmt::format("{}: unexpected end of file at offset {} (was the file truncated while "
                      "reading?)",
                      m_label, offset + done));
    }
    done += static_cast<std::size_t>(n);
  }
  return Ok{};
}

Result<OutputFile> OutputFile::create(const std::filesystem::path& path) {
  std::string label = path.string();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return make_error(fmt::format("{}: cannot create: {}", label, errno_text(errno)));
  return OutputFile(fd, std::move(label));
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : m_fd(std::exchange(other.m_fd, -1)), m_label(std::move(other.m_label)) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
  if (this != &other) {
    if (m_fd >= 0) ::close(m_fd);
    m_fd = std::exchange(other.m_fd, -1);
    m_label = std::move(other.m_label);
  }
  return *this;
}

OutputFile::~OutputFile() {
  if (m_fd >= 0) ::close(m_fd);
}

Status OutputFile::write(std::span<const std::byte> bytes) {
  if (m_fd < 0) return make_error(fmt::format("{}: write after close", m_label));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const std::size_t chunk = std::min<std::size_t>(bytes.size() - done, std::size_t{1} << 30);
    const ssize_t n = ::write(m_fd, bytes.data() + done, chunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(fmt::format("{}: write error: {}", m_label, errno_text(errno)));
    }
    done += static_cast<std::size_t>(n);
  }
  return Ok{};
}

Status OutputFile::sync_and_close() {
  if (m_fd < 0) return make_error(fmt::format("{}: already closed", m_label));
  const int fd = std::exchange(m_fd, -1);
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(fmt::format("{}: cannot flush to disk: {}", m_label, errno_text(err)));
  }
  if (::close(fd) != 0) {
    return make_error(fmt::format("{}: error on close: {}", m_label, errno_text(errno)));
  }
  return Ok{};
}

Status write_file_atomically(const std::filesystem::path& path,
                             const std::function<Status(OutputFile&)>& fill) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  Status status = [&]() -> Status {
    auto file = OutputFile::create(tmp);
    if (!file) return file.error();
    KVLAB_TRY(fill(*file));
    KVLAB_TRY(file->sync_and_close());
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
      return make_error(fmt::format("{}: cannot rename {} into place: {}", path.string(),
                                    tmp.string(), ec.message()));
    }
    // Make the rename itself durable (best effort: some filesystems refuse to sync directories).
    std::filesystem::path dir = path.parent_path();
    if (dir.empty()) dir = ".";
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return Ok{};
  }();
  if (!status) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);  // best effort; the original file was never touched
  }
  return status;
}

}  // namespace kvlab::detail
