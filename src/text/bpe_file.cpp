// The tokenizer's text format (described in rtx/text.h): writing it, atomic saves (rtx::data::
// AtomicFile), and a strict reader that refuses anything malformed with a CheckpointError naming the
// source and the line, without ever allocating more than a valid file of the same size would need.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "core/check.h"
#include "data/path.h"
#include "rtx/data.h"
#include "rtx/text.h"
#include "text/bpe_internal.h"

namespace rtx::text {
namespace {

constexpr std::string_view kMagic = "rtx-bpe";
constexpr int64_t kFormatVersion = 1;
constexpr int64_t kMaxMerges = BpeTokenizer::kMaxVocabSize - BpeTokenizer::kByteTokens;
// The longest a valid file can be: the header and every merge line at their longest.
constexpr int64_t kMaxFileBytes = 64 + kMaxMerges * 16;

// Splits text into '\n'-terminated lines, counting them from 1.
class LineReader {
 public:
  explicit LineReader(std::string_view text) : text_(text) {}

  bool at_end() const { return pos_ == text_.size(); }
  int64_t line_number() const { return line_number_; }

  // The next line without its '\n'; false when none is left or the last one lacks its '\n'.
  bool next(std::string_view& line) {
    ++line_number_;
    const size_t end = text_.find('\n', pos_);
    if (end == std::string_view::npos) return false;
    line = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t line_number_ = 0;
};

// A decimal number of at most 7 digits, without sign or leading zeros.
bool parse_number(std::string_view s, int64_t& value) {
  if (s.empty() || s.size() > 7 || (s.size() > 1 && s[0] == '0')) return false;
  value = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  return true;
}

// The fields of a line separated by single spaces, when there are exactly count of them.
bool split_fields(std::string_view line, std::string_view* fields, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const size_t space = line.find(' ');
    if ((space == std::string_view::npos) != (i + 1 == count)) return false;
    fields[i] = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  }
  return true;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

std::string read_file(const std::string& path) {
  data::detail::check_path(path, "BpeTokenizer.load");
  const std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  RTX_CHECK(file != nullptr, CheckpointError, "[BpeTokenizer.load] {}: cannot open: {}", path, std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, got);
    RTX_CHECK(static_cast<int64_t>(text.size()) <= kMaxFileBytes, CheckpointError,
              "[BpeTokenizer.load] {}: larger than any tokenizer file ({} bytes at most)", path, kMaxFileBytes);
  }
  RTX_CHECK(!std::ferror(file.get()), CheckpointError, "[BpeTokenizer.load] {}: cannot read: {}", path,
            std::strerror(errno));
  return text;
}

}  // namespace

std::string BpeTokenizer::serialize() const {
  std::string out = std::string(kMagic) + " " + std::to_string(kFormatVersion) + " " + std::to_string(merges_.size()) + "\n";
  for (const Merge& m : merges_) out += std::to_string(m.left) + " " + std::to_string(m.right) + "\n";
  return out;
}

BpeTokenizer BpeTokenizer::parse(std::string_view text, const std::string& source, const char* op) {
  LineReader lines(text);
  std::string_view line;
  const auto fail = [&](const std::string& what) {
    RTX_THROW(CheckpointError, "[{}] {} line {}: {}", op, source, lines.line_number(), what);
  };

  std::string_view header[3];
  int64_t version = 0;
  int64_t merge_count = 0;
  if (!lines.next(line) || !split_fields(line, header, 3) || header[0] != kMagic)
    fail(fmt::format("not an rtx-bpe tokenizer: the first line must be '{} {} <number of merges>'", kMagic,
                     kFormatVersion));
  if (!parse_number(header[1], version) || version != kFormatVersion)
    fail(fmt::format("unsupported format version (this library reads version {})", kFormatVersion));
  if (!parse_number(header[2], merge_count) || merge_count > kMaxMerges)
    fail(fmt::format("the number of merges must be a decimal number of at most {}", kMaxMerges));

  std::vector<Merge> merges;
  std::vector<int64_t> token_bytes(kByteTokens, 1);
  std::unordered_map<uint64_t, int64_t> line_of_pair;
  for (int64_t rank = 0; rank < merge_count; ++rank) {
    if (!lines.next(line)) {
      fail(lines.at_end() ? fmt::format("the text ends after {} of its {} merges", rank, merge_count)
                          : std::string("the last line has no line end (truncated?)"));
    }
    std::string_view fields[2];
    int64_t ids[2] = {0, 0};
    if (!split_fields(line, fields, 2) || !parse_number(fields[0], ids[0]) || !parse_number(fields[1], ids[1]))
      fail("a merge must be two token ids separated by one space");
    const int64_t token = kByteTokens + rank;
    for (const int64_t id : ids) {
      if (id >= token) fail(fmt::format("merge refers to token {}, which is not defined before token {}", id, token));
    }
    const int64_t bytes = token_bytes[ids[0]] + token_bytes[ids[1]];
    if (bytes > kMaxTokenBytes)
      fail(fmt::format("token {} would be {} bytes long, over the limit of {}", token, bytes, kMaxTokenBytes));
    const Merge merge{static_cast<int32_t>(ids[0]), static_cast<int32_t>(ids[1])};
    const auto [it, inserted] = line_of_pair.try_emplace(detail::pair_key(merge.left, merge.right), lines.line_number());
    if (!inserted) fail(fmt::format("merge ({}, {}) repeats line {}", merge.left, merge.right, it->second));
    merges.push_back(merge);
    token_bytes.push_back(bytes);
  }
  if (!lines.at_end()) {
    lines.next(line);
    fail(fmt::format("unexpected text after the {} merges the header announces", merge_count));
  }
  return BpeTokenizer(std::move(merges));
}

BpeTokenizer BpeTokenizer::deserialize(std::string_view text) {
  return parse(text, "<string>", "BpeTokenizer.deserialize");
}

void BpeTokenizer::save(const std::string& path) const {
  data::AtomicFile file(path, "BpeTokenizer.save");
  file.write(serialize());
  file.commit();
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  return parse(read_file(path), path, "BpeTokenizer.load");
}

}  // namespace rtx::text
