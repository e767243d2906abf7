#include "sources/zip_reader.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>

#include <fmt/format.h>

namespace kvlab::detail {

namespace {

// Record signatures and sizes (PKWARE APPNOTE.TXT 6.3, sections 4.3.7 - 4.3.16).
constexpr std::uint32_t kLocalHeaderSig = 0x04034b50;
constexpr std::uint32_t kCentralHeaderSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::size_t kLocalHeaderSize = 30;
constexpr std::size_t kCentralHeaderSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kZip64EndSize = 56;
constexpr std::size_t kZip64LocatorSize = 20;
constexpr std::uint64_t kMaxCentralDirectory = 64ull << 20;
// Deflate cannot expand data by more than about 1032:1 (RFC 1951 block limits); a larger claim
// is corrupt or hostile and would only make us allocate.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

std::uint16_t u16(const std::byte* p) {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) |
                                    (std::to_integer<unsigned>(p[1]) << 8));
}
std::uint32_t u32(const std::byte* p) {
  return static_cast<std::uint32_t>(u16(p)) | (static_cast<std::uint32_t>(u16(p + 2)) << 16);
}
std::uint64_t u64(const std::byte* p) {
  return static_cast<std::uint64_t>(u32(p)) | (static_cast<std::uint64_t>(u32(p + 4)) << 32);
}

std::uint32_t crc_update(std::uint32_t crc, std::span<const std::byte> bytes) {
  return static_cast<std::uint32_t>(
      crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

// Reads the zip64 extended-information extra field (APPNOTE 4.5.3): 8-byte values present only
// for the 32-bit fields that hold 0xFFFFFFFF, in a fixed order.
Status apply_zip64_extra(std::span<const std::byte> extra, ZipEntry& e, std::uint32_t csize32,
                         std::uint32_t usize32, std::uint32_t offset32, const std::string& where) {
  const bool need_u = usize32 == 0xFFFFFFFFu, need_c = csize32 == 0xFFFFFFFFu,
             need_o = offset32 == 0xFFFFFFFFu;
  std::size_t pos = 0;
  while (pos + 4 <= extra.size()) {
    const std::uint16_t id = u16(&extra[pos]);
    const std::uint16_t len = u16(&extra[pos + 2]);
    if (pos + 4 + len > extra.size()) {
      return make_error(fmt::format("{}: extra field runs past its record", where));
    }
    if (id == 0x0001) {
      const std::byte* p = &extra[pos + 4];
      std::size_t left = len;
      const auto take = [&](std::uint64_t& out) -> bool {
        if (left < 8) return false;
        out = u64(p);
        p += 8;
        left -= 8;
        return true;
      };
      if ((need_u && !take(e.uncompressed_size)) || (need_c && !take(e.compressed_size)) ||
          (need_o && !take(e.local_header_offset))) {
        return make_error(fmt::format("{}: zip64 extra field is too short", where));
      }
      return Ok{};
    }
    pos += 4 + len;
  }
  if (need_u || need_c || need_o) {
    return make_error(
        fmt::format("{}: sizes or offset say zip64 but the entry has no zip64 extra field", where));
  }
  return Ok{};
}

}  // namespace

Result<std::vector<ZipEntry>> read_zip_directory(const InputFile& file) {
  const std::string& label = file.label();
  const std::uint64_t size = file.size();
  if (size == 0) return make_error(fmt::format("{}: the file is empty", label));
  if (size < kEndSize) {
    return make_error(
        fmt::format("{}: not a zip archive: {} bytes is too short for one", label, size));
  }
  // The end record sits in the last 22 + 65535 (longest comment) bytes.
  const std::uint64_t tail_len = std::min<std::uint64_t>(size, kEndSize + 0xFFFF);
  std::vector<std::byte> tail(tail_len);
  KVLAB_TRY(file.read_at(size - tail_len, tail));
  std::optional<std::size_t> end_at;
  for (std::size_t i = tail_len - kEndSize + 1; i-- > 0;) {
    if (u32(&tail[i]) == kEndSig && i + kEndSize + u16(&tail[i + 20]) <= tail_len) {
      end_at = i;
      break;
    }
  }
  if (!end_at) {
    return make_error(fmt::format(
        "{}: not a zip archive, or a truncated one: no end-of-central-directory record", label));
  }
  const std::byte* end = &tail[*end_at];
  const std::uint64_t end_pos = size - tail_len + *end_at;
  std::uint64_t disk = u16(end + 4), cd_disk = u16(end + 6);
  std::uint64_t count = u16(end + 10);
  std::uint64_t cd_size = u32(end + 12), cd_offset = u32(end + 16);
  std::uint64_t cd_limit = end_pos;  // the directory ends before the end record(s)

  if (count == 0xFFFF || cd_size == 0xFFFFFFFFu || cd_offset == 0xFFFFFFFFu) {
    if (end_pos < kZip64LocatorSize) {
      return make_error(fmt::format("{}: zip64 archive without a zip64 locator", label));
    }
    std::array<std::byte, kZip64LocatorSize> loc{};
    KVLAB_TRY(file.read_at(end_pos - kZip64LocatorSize, loc));
    if (u32(loc.data()) != kZip64LocatorSig) {
      return make_error(fmt::format("{}: zip64 archive without a zip64 locator", label));
    }
    const std::uint64_t z64_pos = u64(&loc[8]);
    if (z64_pos > end_pos - kZip64LocatorSize ||
        end_pos - kZip64LocatorSize - z64_pos < kZip64EndSize) {
      return make_error(fmt::format(
          "{}: zip64 end-of-central-directory offset {} is outside the file", label, z64_pos));
    }
    std::array<std::byte, kZip64EndSize> z64{};
    KVLAB_TRY(file.read_at(z64_pos, z64));
    if (u32(z64.data()) != kZip64EndSig) {
      return make_error(
          fmt::format("{}: bad zip64 end-of-central-directory signature at {}", label, z64_pos));
    }
    disk = u32(&z64[16]);
    cd_disk = u32(&z64[20]);
    count = u64(&z64[32]);
    cd_size = u64(&z64[40]);
    cd_offset = u64(&z64[48]);
    cd_limit = z64_pos;
  }
  if (disk != 0 || cd_disk != 0) {
    return make_error(fmt::format("{}: multi-disk zip archives are not supported", label));
  }
  if (cd_offset > cd_limit || cd_size > cd_limit - cd_offset) {
    return make_error(fmt::format(
        "{}: zip central directory [{}, {}) is outside the file (it must end before byte {})",
        label, cd_offset, cd_offset + cd_size, cd_limit));
  }
  if (cd_size > kMaxCentralDirectory) {
    return make_error(
        fmt::format("{}: zip central directory of {} bytes is larger than the "
                    "limit of {}",
                    label, cd_size, kMaxCentralDirectory));
  }
  if (count > cd_size / kCentralHeaderSize) {
    return make_error(
        fmt::format("{}: zip central directory claims {} entries but its {} bytes hold at most {}",
                    label, count, cd_size, cd_size / kCentralHeaderSize));
  }
  std::vector<std::byte> cd(cd_size);
  KVLAB_TRY(file.read_at(cd_offset, cd));

  std::vector<ZipEntry> entries;
  entries.reserve(count);
  std::size_t pos = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (cd.size() - pos < kCentralHeaderSize || u32(&cd[pos]) != kCentralHeaderSig) {
      return make_error(fmt::format(
          "{}: zip central directory entry {} of {} is truncated or has a bad signature", label,
          i + 1, count));
    }
    const std::byte* h = &cd[pos];
    const std::size_t name_len = u16(h + 28), extra_len = u16(h + 30), comment_len = u16(h + 32);
    if (cd.size() - pos - kCentralHeaderSize < name_len + extra_len + comment_len) {
      return make_error(fmt::format(
          "{}: zip central directory entry {} of {} runs past the directory", label, i + 1, count));
    }
    ZipEntry e;
    e.flags = u16(h + 8);
    e.method = u16(h + 10);
    e.crc32 = u32(h + 16);
    const std::uint32_t csize32 = u32(h + 20), usize32 = u32(h + 24), offset32 = u32(h + 42);
    e.compressed_size = csize32;
    e.uncompressed_size = usize32;
    e.local_header_offset = offset32;
    e.name.assign(reinterpret_cast<const char*>(h + kCentralHeaderSize), name_len);
    const std::string where = fmt::format("{}: entry '{}'", label, e.name);
    const std::span<const std::byte> extra(h + kCentralHeaderSize + name_len, extra_len);
    if (auto s = apply_zip64_extra(extra, e, csize32, usize32, offset32, where); !s) {
      return s.error();
    }
    if (u16(h + 34) != 0 && u16(h + 34) != 0xFFFF) {
      return make_error(fmt::format("{}: multi-disk zip archives are not supported", where));
    }
    if ((e.flags & 0x1u) != 0) {
      return make_error(fmt::format("{}: encrypted zip entries are not supported", where));
    }
    if (e.method != 0 && e.method != 8) {
      return make_error(fmt::format(
          "{}: compression method {} is not supported (only stored and deflate)", where, e.method));
    }
    if (e.local_header_offset > cd_offset || cd_offset - e.local_header_offset < kLocalHeaderSize) {
      return make_error(
          fmt::format("{}: local header offset {} is outside the archive's data (which ends at {})",
                      where, e.local_header_offset, cd_offset));
    }
    entries.push_back(std::move(e));
    pos += kCentralHeaderSize + name_len + extra_len + comment_len;
  }
  return entries;
}

struct ZipEntryReader::Inflater {
  z_stream stream{};
  bool initialized = false;
  bool ended = false;
  std::vector<unsigned char> input = std::vector<unsigned char>(64 * 1024);
  ~Inflater() {
    if (initialized) inflateEnd(&stream);
  }
};

ZipEntryReader::ZipEntryReader(const InputFile& file, ZipEntry entry, std::uint64_t data_offset)
    : m_file(&file), m_entry(std::move(entry)), m_data_offset(data_offset) {}
ZipEntryReader::ZipEntryReader(ZipEntryReader&&) noexcept = default;
ZipEntryReader& ZipEntryReader::operator=(ZipEntryReader&&) noexcept = default;
ZipEntryReader::~ZipEntryReader() = default;

std::string ZipEntryReader::where() const {
  return fmt::format("{}: entry '{}'", m_file->label(), m_entry.name);
}

Result<ZipEntryReader> ZipEntryReader::open(const InputFile& file, const ZipEntry& entry) {
  const std::string where = fmt::format("{}: entry '{}'", file.label(), entry.name);
  const std::uint64_t size = file.size();
  if (entry.local_header_offset > size || size - entry.local_header_offset < kLocalHeaderSize) {
    return make_error(fmt::format("{}: local header at {} is past the end of the file", where,
                                  entry.local_header_offset));
  }
  std::array<std::byte, kLocalHeaderSize> local{};
  KVLAB_TRY(file.read_at(entry.local_header_offset, local));
  if (u32(local.data()) != kLocalHeaderSig) {
    return make_error(fmt::format("{}: bad local header signature at offset {}", where,
                                  entry.local_header_offset));
  }
  const std::uint64_t data_offset =
      entry.local_header_offset + kLocalHeaderSize + u16(&local[26]) + u16(&local[28]);
  if (data_offset > size || entry.compressed_size > size - data_offset) {
    return make_error(fmt::format("{}: data range [{}, {}) is past the end of the file ({} bytes)",
                                  where, data_offset, data_offset + entry.compressed_size, size));
  }
  ZipEntryReader reader(file, entry, data_offset);
  if (entry.method == 0) {
    if (entry.compressed_size != entry.uncompressed_size) {
      return make_error(
          fmt::format("{}: stored entry has compressed size {} but uncompressed size {}", where,
                      entry.compressed_size, entry.uncompressed_size));
    }
    return reader;
  }
  if (entry.uncompressed_size / kMaxDeflateRatio > entry.compressed_size + 1) {
    return make_error(
        fmt::format("{}: claims {} compressed bytes inflate to {}, more than deflate can produce",
                    where, entry.compressed_size, entry.uncompressed_size));
  }
  reader.m_inflater = std::make_unique<Inflater>();
  // Negative window bits: raw deflate, as zip stores it (no zlib header).
  if (inflateInit2(&reader.m_inflater->stream, -MAX_WBITS) != Z_OK) {
    return make_error(fmt::format("{}: cannot start the inflater", where));
  }
  reader.m_inflater->initialized = true;
  return reader;
}

Status ZipEntryReader::refill() {
  z_stream& z = m_inflater->stream;
  if (z.avail_in != 0 || m_consumed == m_entry.compressed_size) return Ok{};
  const std::size_t n = static_cast<std::size_t>(
      std::min<std::uint64_t>(m_inflater->input.size(), m_entry.compressed_size - m_consumed));
  const std::span<std::byte> buf(reinterpret_cast<std::byte*>(m_inflater->input.data()), n);
  KVLAB_TRY(m_file->read_at(m_data_offset + m_consumed, buf));
  m_consumed += n;
  z.next_in = m_inflater->input.data();
  z.avail_in = static_cast<uInt>(n);
  return Ok{};
}

Status ZipEntryReader::read(std::span<std::byte> out) {
  if (out.size() > size() - m_position) {
    return make_error(fmt::format("{}: needs {} bytes at offset {} but the entry holds {}", where(),
                                  out.size(), m_position, size()));
  }
  if (!m_inflater) {
    KVLAB_TRY(m_file->read_at(m_data_offset + m_position, out));
  } else {
    z_stream& z = m_inflater->stream;
    std::size_t produced = 0;
    while (produced < out.size()) {
      if (m_inflater->ended) {
        return make_error(
            fmt::format("{}: the deflate stream ends after {} bytes, but the entry "
                        "says it holds {}",
                        where(), m_position + produced, size()));
      }
      KVLAB_TRY(refill());
      const std::size_t want = std::min<std::size_t>(out.size() - produced, std::size_t{1} << 30);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
      z.avail_out = static_cast<uInt>(want);
      const int ret = inflate(&z, Z_NO_FLUSH);
      produced += want - z.avail_out;
      if (ret == Z_STREAM_END) {
        m_inflater->ended = true;
      } else if (ret == Z_BUF_ERROR && z.avail_in == 0 && m_consumed == m_entry.compressed_size) {
        return make_error(fmt::format("{}: the deflate data is truncated", where()));
      } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
        return make_error(fmt::format("{}: corrupt deflate data ({})", where(),
                                      z.msg != nullptr ? z.msg : "error " + std::to_string(ret)));
      }
    }
  }
  m_crc = crc_update(m_crc, out);
  m_position += out.size();
  return Ok{};
}

Status ZipEntryReader::finish() {
  if (m_position != size()) {
    return make_error(fmt::format("{}: {} bytes left unread", where(), size() - m_position));
  }
  if (m_inflater && !m_inflater->ended) {
    // The stream must end exactly here: inflate into a one-byte buffer to see its end marker.
    z_stream& z = m_inflater->stream;
    for (;;) {
      KVLAB_TRY(refill());
      Bytef extra = 0;
      z.next_out = &extra;
      z.avail_out = 1;
      const int ret = inflate(&z, Z_NO_FLUSH);
      if (z.avail_out == 0) {
        return make_error(
            fmt::format("{}: the deflate stream holds more than the {} bytes the directory says",
                        where(), size()));
      }
      if (ret == Z_STREAM_END) break;
      if (ret == Z_BUF_ERROR && z.avail_in == 0 && m_consumed == m_entry.compressed_size) {
        return make_error(fmt::format("{}: the deflate data is truncated", where()));
      }
      if (ret != Z_OK && ret != Z_BUF_ERROR) {
        return make_error(fmt::format("{}: corrupt deflate data ({})", where(),
                                      z.msg != nullptr ? z.msg : "error " + std::to_string(ret)));
      }
    }
    m_inflater->ended = true;
  }
  if (m_crc != m_entry.crc32) {
    return make_error(
        fmt::format("{}: CRC-32 mismatch: the directory says {:08x} but the data gives {:08x}",
                    where(), m_entry.crc32, m_crc));
  }
  return Ok{};
}

}  // namespace kvlab::detail
