// The .npy reader and writer. See npy.hpp for what is read and written; the format itself is
// numpy's "NEP 1" file format (numpy/lib/format.py documents it).
#include "covflow/io/npy.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "npy_source.hpp"

namespace covflow::io {

static_assert(std::endian::native == std::endian::little,
              "covflow's NPY reader and writer assume a little-endian host ('<' is native)");

namespace {

constexpr std::array<unsigned char, 6> kMagic = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::size_t kMagicAndVersion = 8;  // magic + major + minor
// numpy pads so the data starts on a 64-byte boundary, and leaves room in the header for the
// growing axis to reach 21 digits (numpy/lib/format.py: ARRAY_ALIGN, GROWTH_AXIS_MAX_DIGITS).
constexpr std::size_t kArrayAlign = 64;
constexpr std::size_t kGrowthAxisMaxDigits = 21;

using Kind = NpyError::Kind;
using detail::fail;
using detail::File;
using detail::size_phrase;

std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return std::nullopt;
  return a * b;
}

std::optional<std::uint64_t> checked_count(std::span<const std::uint64_t> shape) {
  std::uint64_t count = 1;
  for (std::uint64_t d : shape) {
    auto next = checked_mul(count, d);
    if (!next) return std::nullopt;
    count = *next;
  }
  return count;
}

std::string hex_bytes(const unsigned char* data, std::size_t count) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    if (i) out += ' ';
    out += digits[data[i] >> 4];
    out += digits[data[i] & 15];
  }
  return out;
}

// The header as it may be quoted in a message: printable ASCII only, trailing padding dropped,
// long ones cut.
std::string quote_header(std::string_view header) {
  while (!header.empty() && (header.back() == ' ' || header.back() == '\n' || header.back() == '\r' ||
                             header.back() == '\t' || header.back() == '\0'))
    header.remove_suffix(1);
  constexpr std::size_t kMax = 200;
  std::string out;
  for (std::size_t i = 0; i < header.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(header[i]);
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  if (header.size() > kMax) out += "...";
  return out;
}

// ---- the header dict ---------------------------------------------------------------------------

struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::uint64_t> shape;
};

// A recursive-descent parser for the subset of Python literals an NPY header uses: a dict of
// string keys to a string, a bool or a tuple of integers, with Python's whitespace and optional
// trailing commas.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& where) : text_(text), where_(where) {}

  Header parse() {
    Header header;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    if (!consume('{')) malformed("it does not start with '{'");
    for (;;) {
      skip_space();
      if (consume('}')) break;
      if (at_end()) malformed("it ends before the closing '}'");
      const std::string key = parse_string("a key");
      skip_space();
      if (!consume(':')) malformed("expected ':' after key '" + key + "'");
      skip_space();
      auto once = [&](bool& seen) {
        if (seen) malformed("key '" + key + "' appears twice");
        seen = true;
      };
      if (key == "descr") {
        once(have_descr);
        if (peek() == '[')
          fail(Kind::unsupported, where_,
               "unsupported dtype: a structured dtype (descr is a list of fields); covflow reads plain "
               "float32, float64, complex64, complex128 and int32 arrays");
        header.descr = parse_string("the value of 'descr'");
      } else if (key == "fortran_order") {
        once(have_order);
        header.fortran_order = parse_bool();
      } else if (key == "shape") {
        once(have_shape);
        header.shape = parse_shape();
      } else {
        malformed("unexpected key '" + key + "' (an NPY header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume('}')) break;
      malformed("expected ',' or '}' after the value of '" + key + "'");
    }
    skip_space();
    if (!at_end()) malformed("unexpected text after the closing '}'");
    if (!have_descr) malformed("missing key 'descr'");
    if (!have_order) malformed("missing key 'fortran_order'");
    if (!have_shape) malformed("missing key 'shape'");
    return header;
  }

 private:
  [[noreturn]] void malformed(const std::string& why) const {
    fail(Kind::damaged, where_, "malformed header: " + why + "; the header reads: " + quote_header(text_));
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  bool consume(char c) {
    if (peek() != c || at_end()) return false;
    ++pos_;
    return true;
  }
  void skip_space() {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  std::string parse_string(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed("expected a quoted string as " + what);
    ++pos_;
    std::string out;
    for (;;) {
      if (at_end()) malformed("unterminated string in " + what);
      const char c = text_[pos_++];
      if (c == quote) return out;
      if (c == '\n') malformed("unterminated string in " + what);
      if (c == '\\') malformed("escape sequences are not expected in " + what);
      out += c;
    }
  }

  bool parse_bool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    malformed("'fortran_order' must be True or False");
  }

  std::uint64_t parse_dimension() {
    if (peek() == '-') malformed("'shape' has a negative dimension");
    if (peek() < '0' || peek() > '9') malformed("'shape' must be a tuple of non-negative integers");
    std::uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      const auto digit = static_cast<std::uint64_t>(peek() - '0');
      if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10)
        malformed("a dimension of 'shape' does not fit 64 bits");
      value = value * 10 + digit;
      ++pos_;
    }
    consume('L');  // Python 2 wrote long integers with an L suffix
    return value;
  }

  std::vector<std::uint64_t> parse_shape() {
    if (!consume('(')) {
      if (peek() == '[') malformed("'shape' must be a tuple, not a list");
      malformed("'shape' must be a tuple of non-negative integers");
    }
    std::vector<std::uint64_t> shape;
    bool trailing_comma = false;
    for (;;) {
      skip_space();
      if (consume(')')) break;
      shape.push_back(parse_dimension());
      skip_space();
      trailing_comma = consume(',');
      if (trailing_comma) continue;
      skip_space();
      if (consume(')')) break;
      malformed("expected ',' or ')' in 'shape'");
    }
    if (shape.size() == 1 && !trailing_comma)
      malformed("'shape' (" + std::to_string(shape[0]) + ") is a number, not a tuple; a one-element tuple is written (" +
                std::to_string(shape[0]) + ",)");
    return shape;
  }

  std::string_view text_;
  const std::string& where_;
  std::size_t pos_ = 0;
};

// A descr such as "<c16" → dtype and whether the data is big-endian. Unsupported ones throw.
struct DescrInfo {
  NpyDtype dtype;
  bool big_endian;
};

std::string describe_foreign_descr(std::string_view type) {
  // A readable name for a numpy type code such as "i4" (int32) or "c32" (complex256).
  if (type.size() < 2) return {};
  const char kind = type[0];
  std::size_t bytes = 0;
  for (char c : type.substr(1)) {
    if (c < '0' || c > '9' || bytes > 1000) return {};
    bytes = bytes * 10 + static_cast<std::size_t>(c - '0');
  }
  const std::string bits = std::to_string(bytes * 8);
  switch (kind) {
    case 'i': return "int" + bits;
    case 'u': return "uint" + bits;
    case 'f': return "float" + bits;
    case 'c': return "complex" + bits;
    case 'b': return "bool";
    case 'U': return "unicode string";
    case 'S': return "byte string";
    case 'V': return "void (raw bytes)";
    case 'M': return "datetime64";
    case 'm': return "timedelta64";
    default: return {};
  }
}

DescrInfo interpret_descr(const std::string& descr, const std::string& where) {
  std::string_view type = descr;
  bool big_endian = false;
  if (!type.empty() && (type[0] == '<' || type[0] == '>' || type[0] == '=' || type[0] == '|')) {
    big_endian = type[0] == '>';
    type.remove_prefix(1);
  }
  if (type == "f4") return {NpyDtype::float32, big_endian};
  if (type == "f8") return {NpyDtype::float64, big_endian};
  if (type == "c8") return {NpyDtype::complex64, big_endian};
  if (type == "c16") return {NpyDtype::complex128, big_endian};
  if (type == "i4") return {NpyDtype::int32, big_endian};
  std::string what = "unsupported dtype '" + quote_header(descr) + "'";
  if (const std::string name = describe_foreign_descr(type); !name.empty()) what += " (" + name + ")";
  if (type == "O") what += " (Python objects)";
  fail(Kind::unsupported, where,
       what + "; covflow reads float32 '<f4', float64 '<f8', complex64 '<c8', complex128 '<c16' and int32 "
              "'<i4' (byte order '<', '>', '=' or '|')");
}

void byte_swap(std::vector<std::byte>& bytes, std::size_t component) {
  for (std::size_t i = 0; i + component <= bytes.size(); i += component)
    std::reverse(bytes.begin() + static_cast<std::ptrdiff_t>(i),
                 bytes.begin() + static_cast<std::ptrdiff_t>(i + component));
}

}  // namespace

namespace detail {

void fail(NpyError::Kind kind, const std::string& where, const std::string& what) {
  throw NpyError(kind, where + ": " + what);
}

std::string size_phrase(std::uint64_t bytes) { return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes"); }

}  // namespace detail

// ---- dtypes ------------------------------------------------------------------------------------

std::string_view numpy_name(NpyDtype dtype) noexcept {
  switch (dtype) {
    case NpyDtype::float32: return "float32";
    case NpyDtype::float64: return "float64";
    case NpyDtype::complex64: return "complex64";
    case NpyDtype::complex128: return "complex128";
    case NpyDtype::int32: return "int32";
  }
  return "unknown";
}

std::string_view descr(NpyDtype dtype) noexcept {
  switch (dtype) {
    case NpyDtype::float32: return "<f4";
    case NpyDtype::float64: return "<f8";
    case NpyDtype::complex64: return "<c8";
    case NpyDtype::complex128: return "<c16";
    case NpyDtype::int32: return "<i4";
  }
  return "";
}

std::size_t item_size(NpyDtype dtype) noexcept {
  switch (dtype) {
    case NpyDtype::float32: return 4;
    case NpyDtype::float64: return 8;
    case NpyDtype::complex64: return 8;
    case NpyDtype::complex128: return 16;
    case NpyDtype::int32: return 4;
  }
  return 0;
}

NpyDtype real_dtype(NpyDtype dtype) noexcept {
  switch (dtype) {
    case NpyDtype::complex64: return NpyDtype::float32;
    case NpyDtype::complex128: return NpyDtype::float64;
    default: return dtype;
  }
}

bool is_complex(NpyDtype dtype) noexcept { return dtype == NpyDtype::complex64 || dtype == NpyDtype::complex128; }

std::uint64_t NpyArray::element_count() const noexcept {
  return checked_count(shape).value_or(std::numeric_limits<std::uint64_t>::max());
}

std::string format_shape(std::span<const std::uint64_t> shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

// ---- reading -----------------------------------------------------------------------------------

namespace {

// A whole regular file whose size fstat gave.
class FileSource final : public detail::NpySource {
 public:
  FileSource(std::FILE* file, std::uint64_t size, const std::string& where) : file_(file), size_(size), where_(where) {}
  std::uint64_t size() const override { return size_; }
  // Everything reads what the size says is there; a file that shrinks meanwhile is "truncated".
  void read(void* into, std::size_t count, const char* what) override {
    if (count == 0) return;
    if (std::fread(into, 1, count, file_) != count) {
      if (std::ferror(file_)) fail(Kind::io, where_, std::string("read error in ") + what + ": " + std::strerror(errno));
      fail(Kind::damaged, where_, std::string("truncated: the file ended while reading ") + what);
    }
  }

 private:
  std::FILE* file_;
  std::uint64_t size_;
  const std::string& where_;
};

}  // namespace

NpyArray detail::parse_npy(NpySource& source, const std::string& where) {
  const std::uint64_t file_size = source.size();
  if (file_size == 0) fail(Kind::damaged, where, "empty file (0 bytes), not an NPY file");
  std::array<unsigned char, 12> preamble{};
  const std::size_t first = static_cast<std::size_t>(std::min<std::uint64_t>(file_size, kMagicAndVersion));
  source.read(preamble.data(), first, "the preamble");
  const std::size_t magic_seen = std::min(first, kMagic.size());
  if (std::memcmp(preamble.data(), kMagic.data(), magic_seen) != 0) {
    std::string what = "not an NPY file: bad magic (starts with " + hex_bytes(preamble.data(), magic_seen) +
                       ", an NPY file starts with 93 4e 55 4d 50 59, \"\\x93NUMPY\")";
    if (preamble[0] == 'P' && preamble[1] == 'K')
      what += "; this looks like a zip archive such as an .npz from numpy.savez: save one array with numpy.save";
    fail(Kind::damaged, where, what);
  }
  if (first < kMagicAndVersion)
    fail(Kind::damaged, where,
         "truncated: the file holds " + size_phrase(file_size) + ", less than the 10-byte NPY preamble");
  const int major = preamble[6], minor = preamble[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0))
    fail(Kind::damaged, where,
         "unknown NPY format version " + std::to_string(major) + "." + std::to_string(minor) +
             " (covflow reads 1.0, 2.0 and 3.0)");
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t preamble_size = kMagicAndVersion + length_bytes;
  if (file_size < preamble_size)
    fail(Kind::damaged, where,
         "truncated: the file holds " + size_phrase(file_size) + ", less than the " + std::to_string(preamble_size) +
             "-byte preamble of NPY version " + std::to_string(major) + ".0");
  source.read(preamble.data() + kMagicAndVersion, length_bytes, "the preamble");
  std::uint64_t header_length = 0;
  for (std::size_t i = 0; i < length_bytes; ++i)
    header_length |= std::uint64_t(preamble[kMagicAndVersion + i]) << (8 * i);
  const std::uint64_t after_preamble = file_size - preamble_size;
  if (header_length > after_preamble)
    fail(Kind::damaged, where,
         "header length field says " + size_phrase(header_length) + " but only " + size_phrase(after_preamble) +
             " follow the preamble");

  std::string header_text(static_cast<std::size_t>(header_length), '\0');
  source.read(header_text.data(), header_text.size(), "the header");
  const Header header = HeaderParser(header_text, where).parse();
  const DescrInfo type = interpret_descr(header.descr, where);

  NpyArray array;
  array.dtype = type.dtype;
  array.shape = header.shape;
  array.fortran_order = header.fortran_order;
  const std::string described = format_shape(array.shape) + " " + std::string(numpy_name(array.dtype));
  const auto count = checked_count(array.shape);
  const auto data_bytes = count ? checked_mul(*count, item_size(array.dtype)) : std::nullopt;
  if (!data_bytes)
    fail(Kind::damaged, where, "header says shape " + described + ", more bytes than 64 bits can count");
  const std::uint64_t available = after_preamble - header_length;
  if (*data_bytes > available)
    fail(Kind::damaged, where,
         "header says shape " + described + " = " + size_phrase(*data_bytes) + " but only " + size_phrase(available) +
             " follow the header");
  if (*data_bytes < available)
    fail(Kind::damaged, where,
         size_phrase(available - *data_bytes) + " follow the array data (header says shape " + described + " = " +
             size_phrase(*data_bytes) + "); an NPY file holds exactly one array");

  array.bytes.resize(static_cast<std::size_t>(*data_bytes));
  source.read(array.bytes.data(), array.bytes.size(), "the array data");
  if (type.big_endian) byte_swap(array.bytes, is_complex(array.dtype) ? item_size(array.dtype) / 2 : item_size(array.dtype));
  return array;
}

NpyArray read_npy(const std::filesystem::path& path) {
  const std::string where = path.string();
  File file(path, "rb");
  if (file.get() == nullptr) fail(Kind::io, where, std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (::fstat(::fileno(file.get()), &st) != 0)
    fail(Kind::io, where, std::string("cannot stat: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(Kind::io, where, "is a directory, not an NPY file");
  if (!S_ISREG(st.st_mode)) fail(Kind::io, where, "is not a regular file (covflow needs to know the size of an NPY file)");
  FileSource source(file.get(), static_cast<std::uint64_t>(st.st_size), where);
  return detail::parse_npy(source, where);
}

// ---- writing -----------------------------------------------------------------------------------

std::string npy_header(NpyDtype dtype, std::span<const std::uint64_t> shape, bool fortran_order) {
  std::string dict = "{'descr': '" + std::string(descr(dtype)) + "', 'fortran_order': " +
                     (fortran_order ? "True" : "False") + ", 'shape': " + format_shape(shape) + ", }";
  if (!shape.empty()) {
    const std::size_t digits = std::to_string(fortran_order ? shape.back() : shape.front()).size();
    dict.append(kGrowthAxisMaxDigits - std::min(digits, kGrowthAxisMaxDigits), ' ');
  }
  // The header is the dict, space padding and '\n', sized so preamble + header is a multiple of 64.
  const std::size_t text = dict.size() + 1;
  auto padding = [&](std::size_t preamble) { return kArrayAlign - (preamble + text) % kArrayAlign; };
  int major = 1;
  std::size_t header_length = text + padding(kMagicAndVersion + 2);
  if (header_length > 0xffff) {
    major = 2;
    header_length = text + padding(kMagicAndVersion + 4);
  }
  std::string out(reinterpret_cast<const char*>(kMagic.data()), kMagic.size());
  out += static_cast<char>(major);
  out += '\0';
  for (std::size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out += static_cast<char>((header_length >> (8 * i)) & 0xff);
  out += dict;
  out.append(header_length - text, ' ');
  out += '\n';
  return out;
}

void write_npy(const std::filesystem::path& path, const NpyArray& array) {
  const auto count = checked_count(array.shape);
  const auto data_bytes = count ? checked_mul(*count, item_size(array.dtype)) : std::nullopt;
  if (!data_bytes || *data_bytes != array.bytes.size())
    fail(Kind::argument, path.string(),
         "cannot write: shape " + format_shape(array.shape) + " " + std::string(numpy_name(array.dtype)) +
             " needs " + (data_bytes ? size_phrase(*data_bytes) : std::string("more bytes than 64 bits count")) +
             " of data, " + size_phrase(array.bytes.size()) + " given");
  const std::string header = npy_header(array.dtype, array.shape, array.fortran_order);
  File file(path, "wb");
  if (file.get() == nullptr) fail(Kind::io, path.string(), std::string("cannot create: ") + std::strerror(errno));
  // A file cut short by a full disk must not be left to pass for a result.
  auto fail_and_remove = [&](const char* what) {
    const std::string reason = std::strerror(errno);
    file.close();
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
    fail(Kind::io, path.string(), std::string(what) + reason);
  };
  if (std::fwrite(header.data(), 1, header.size(), file.get()) != header.size() ||
      (!array.bytes.empty() && std::fwrite(array.bytes.data(), 1, array.bytes.size(), file.get()) != array.bytes.size()))
    fail_and_remove("write error: ");
  if (!file.close()) fail_and_remove("write error on close: ");
}

}  // namespace covflow::io
