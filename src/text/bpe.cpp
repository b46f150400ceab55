// BpeTokenizer: training entry point, encoding (merges applied by rank within each word, through a
// min-heap over the word's adjacent pairs) and decoding (tokens expanded through their merges).
#include <algorithm>
#include <limits>

#include "core/check.h"
#include "rtx/text.h"
#include "text/bpe_internal.h"
#include "text/words.h"

namespace rtx::text {
namespace {

// Words up to this long are encoded once per encode() call and copied when they repeat.
constexpr size_t kCachedWordBytes = 64;

// A mergeable pair in a word being encoded: the merge's rank and the position of its left symbol.
struct RankedPair {
  int32_t rank;
  int64_t position;
};

// The lowest rank first, then the leftmost position: a word sees the merges in training order, and
// overlapping occurrences of one pair merge left to right, as in training.
struct LaterFirst {
  bool operator()(const RankedPair& a, const RankedPair& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  }
};

// Encodes words; keeps its buffers from one word to the next.
class WordEncoder {
 public:
  WordEncoder(const std::vector<Merge>& merges, const std::unordered_map<uint64_t, int32_t>& rank_of_pair)
      : merges_(merges), rank_of_pair_(rank_of_pair) {}

  void encode(std::string_view word, std::vector<int32_t>& out) {
    const auto n = static_cast<int64_t>(word.size());
    token_.resize(n);
    prev_.resize(n);
    next_.resize(n);
    for (int64_t p = 0; p < n; ++p) {
      token_[p] = static_cast<unsigned char>(word[p]);
      prev_[p] = p - 1;
      next_[p] = p + 1 < n ? p + 1 : -1;
    }
    heap_.clear();
    for (int64_t p = 0; p + 1 < n; ++p) queue_pair_at(p);
    std::make_heap(heap_.begin(), heap_.end(), LaterFirst());
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), LaterFirst());
      const RankedPair top = heap_.back();
      heap_.pop_back();
      const int64_t p = top.position;
      const int64_t q = next_[p];
      const Merge& m = merges_[top.rank];
      if (q < 0 || token_[p] != m.left || token_[q] != m.right) continue;  // stale entry
      token_[p] = BpeTokenizer::kByteTokens + top.rank;
      token_[q] = -1;
      next_[p] = next_[q];
      if (next_[p] >= 0) prev_[next_[p]] = p;
      if (prev_[p] >= 0) push_pair_at(prev_[p]);
      push_pair_at(p);
    }
    for (int64_t p = 0; p >= 0; p = next_[p]) out.push_back(token_[p]);
  }

 private:
  // Adds the pair starting at position p, if it has a merge, to the heap's storage.
  bool queue_pair_at(int64_t p) {
    const int64_t q = next_[p];
    if (q < 0) return false;
    const auto it = rank_of_pair_.find(detail::pair_key(token_[p], token_[q]));
    if (it == rank_of_pair_.end()) return false;
    heap_.push_back({it->second, p});
    return true;
  }

  void push_pair_at(int64_t p) {
    if (queue_pair_at(p)) std::push_heap(heap_.begin(), heap_.end(), LaterFirst());
  }

  const std::vector<Merge>& merges_;
  const std::unordered_map<uint64_t, int32_t>& rank_of_pair_;
  // The word's symbols as a linked list: token (-1 once merged into its left neighbour) and the
  // neighbours' positions (-1 at the word's ends).
  std::vector<int32_t> token_;
  std::vector<int64_t> prev_, next_;
  std::vector<RankedPair> heap_;  // a min-heap (LaterFirst), possibly holding stale entries
};

}  // namespace

BpeTokenizer::BpeTokenizer() = default;

BpeTokenizer::BpeTokenizer(std::vector<Merge> merges) : merges_(std::move(merges)) {
  rank_of_pair_.reserve(merges_.size());
  for (size_t rank = 0; rank < merges_.size(); ++rank)
    rank_of_pair_.emplace(detail::pair_key(merges_[rank].left, merges_[rank].right), static_cast<int32_t>(rank));
}

BpeTokenizer BpeTokenizer::train(std::string_view corpus, int64_t vocab_size) {
  RTX_CHECK(vocab_size >= kByteTokens, ValueError, "[BpeTokenizer.train] vocab_size {} is below the {} byte tokens",
            vocab_size, kByteTokens);
  RTX_CHECK(vocab_size <= kMaxVocabSize, ValueError, "[BpeTokenizer.train] vocab_size {} exceeds the limit of {}",
            vocab_size, kMaxVocabSize);
  constexpr size_t kMaxCorpusBytes = std::numeric_limits<int32_t>::max();
  RTX_CHECK(corpus.size() <= kMaxCorpusBytes, ValueError,
            "[BpeTokenizer.train] a corpus of {} bytes exceeds the limit of {} bytes", corpus.size(), kMaxCorpusBytes);
  return BpeTokenizer(detail::learn_merges(corpus, vocab_size - kByteTokens));
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 4);
  WordEncoder encoder(merges_, rank_of_pair_);
  // word -> (offset, count) of the ids its first occurrence produced.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> seen;
  detail::for_each_word(text, [&](std::string_view word) {
    if (word.size() == 1) {
      ids.push_back(static_cast<unsigned char>(word[0]));
      return;
    }
    if (word.size() > kCachedWordBytes) {
      encoder.encode(word, ids);
      return;
    }
    const auto [it, inserted] = seen.try_emplace(word, ids.size(), 0);
    if (inserted) {
      encoder.encode(word, ids);
      it->second.second = ids.size() - it->second.first;
      return;
    }
    const auto [offset, count] = it->second;
    const size_t end = ids.size();
    ids.resize(end + count);
    std::copy_n(ids.begin() + static_cast<std::ptrdiff_t>(offset), count, ids.begin() + static_cast<std::ptrdiff_t>(end));
  });
  return ids;
}

void BpeTokenizer::check_id(int64_t id, const char* op) const {
  RTX_CHECK(id >= 0 && id < vocab_size(), IndexError, "[{}] id {} out of range for a vocabulary of {} tokens", op, id,
            vocab_size());
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  std::vector<int32_t> pending;  // tokens still to expand, the next one last
  for (const int32_t id : ids) {
    check_id(id, "BpeTokenizer.decode");
    pending.push_back(id);
    while (!pending.empty()) {
      const int32_t token = pending.back();
      pending.pop_back();
      if (token < kByteTokens) {
        out.push_back(static_cast<char>(token));
      } else {
        const Merge& m = merges_[token - kByteTokens];
        pending.push_back(m.right);
        pending.push_back(m.left);
      }
    }
  }
  return out;
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  check_id(id, "BpeTokenizer.token_bytes");
  return decode({id});
}

}  // namespace rtx::text
