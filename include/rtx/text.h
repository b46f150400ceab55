// Byte-level byte-pair-encoding (BPE) tokenizer: tokens 0..255 are the byte values, so every byte
// string encodes and decode(encode(s)) == s. Training learns merges of adjacent tokens within
// GPT-2-style words; encoding applies them by rank.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rtx/export.h"

namespace rtx::text {

// One learned merge: the adjacent tokens `left` and `right` become token 256 + (the merge's rank).
struct Merge {
  int32_t left = 0;
  int32_t right = 0;
  bool operator==(const Merge& other) const { return left == other.left && right == other.right; }
};

// A trained tokenizer. Immutable after construction, so every const method may run concurrently.
//
// Words: the text is first split into words and merges never cross them. A word is an optional
// single leading space followed by a run of letters (ASCII letters and every byte >= 0x80, so
// multi-byte UTF-8 characters stay inside words), a run of digits, or a run of other non-space
// bytes; a run of whitespace (space, \t, \n, \v, \f, \r) is a word of its own, except that its final
// space, when a non-space byte follows, is the leading space of the next word.
//
// Text format (serialize / save), ASCII with '\n' line ends:
//   rtx-bpe 1 <number of merges>
//   <left id> <right id>          one line per merge in rank order; merge k creates token 256 + k
// Ids are decimal without sign or leading zeros, and refer to tokens defined before the merge.
class RTX_API BpeTokenizer {
 public:
  static constexpr int kByteTokens = 256;
  // Largest vocabulary train() and the loaders accept.
  static constexpr int64_t kMaxVocabSize = int64_t{1} << 20;
  // Longest token, in bytes: training never merges beyond it and the loaders refuse longer tokens.
  static constexpr int64_t kMaxTokenBytes = int64_t{1} << 16;

  // The byte-only tokenizer (256 tokens, no merges).
  BpeTokenizer();

  // Learns merges on corpus until the vocabulary has vocab_size tokens (256 + merges) or no pair of
  // adjacent tokens occurs twice. The most frequent pair is merged first; ties go to the smallest
  // (left, right), so training is reproducible bit for bit. Throws ValueError unless
  // 256 <= vocab_size <= kMaxVocabSize, or when corpus is 2 GiB or more.
  static BpeTokenizer train(std::string_view corpus, int64_t vocab_size);

  // Token ids of text: the merges applied by rank within each word.
  std::vector<int32_t> encode(std::string_view text) const;
  // The bytes of the tokens, concatenated. Throws IndexError for an id outside [0, vocab_size()).
  std::string decode(const std::vector<int32_t>& ids) const;

  int vocab_size() const { return kByteTokens + static_cast<int>(merges_.size()); }
  const std::vector<Merge>& merges() const { return merges_; }
  // The bytes token id stands for. Throws IndexError for an id outside [0, vocab_size()).
  std::string token_bytes(int32_t id) const;
  // Throws IndexError, naming op (e.g. "BpeTokenizer.decode"), unless 0 <= id < vocab_size().
  void check_id(int64_t id, const char* op) const;

  // The text format above, and back. deserialize throws CheckpointError naming "<string>" and the
  // line when the text is not a valid tokenizer.
  std::string serialize() const;
  static BpeTokenizer deserialize(std::string_view text);
  // Writes serialize() atomically (rtx::data::AtomicFile: a temporary file beside it, fsync,
  // rename); throws CheckpointError naming the file when it cannot, ValueError for a path with a
  // NUL byte.
  void save(const std::string& path) const;
  // Reads a file save() wrote; throws CheckpointError naming the file (and the line) when it cannot,
  // ValueError for a path with a NUL byte.
  static BpeTokenizer load(const std::string& path);

 private:
  // merges must be valid: each refers to tokens defined before it, and no pair repeats.
  explicit BpeTokenizer(std::vector<Merge> merges);
  // The tokenizer the text format in text describes; errors name op, source and the line.
  static BpeTokenizer parse(std::string_view text, const std::string& source, const char* op);

  std::vector<Merge> merges_;
  // (left << 32 | right) -> rank, for encoding.
  std::unordered_map<uint64_t, int32_t> rank_of_pair_;
};

}  // namespace rtx::text
