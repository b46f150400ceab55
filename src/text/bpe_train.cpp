// Learns BPE merges. The corpus's distinct words, weighted by how often they occur, are laid out as
// linked lists of symbols; each pair of adjacent tokens keeps its weighted count and the positions
// where it may occur. A merge visits only those positions and updates the counts of the pairs
// around them, and a lazily updated priority queue finds the next most frequent pair.
#include <queue>
#include <unordered_map>

#include "text/bpe_internal.h"
#include "text/words.h"

namespace rtx::text::detail {
namespace {

// Every distinct word of a corpus, in order of first occurrence, and how often it occurs.
struct WordCounts {
  std::vector<std::string_view> words;
  std::vector<int64_t> counts;
};

WordCounts count_words(std::string_view corpus) {
  WordCounts result;
  std::unordered_map<std::string_view, size_t> index_of;
  for_each_word(corpus, [&](std::string_view word) {
    const auto [it, inserted] = index_of.try_emplace(word, result.words.size());
    if (inserted) {
      result.words.push_back(word);
      result.counts.push_back(0);
    }
    ++result.counts[it->second];
  });
  return result;
}

// A pair's count (summed over occurrences, each weighted by its word's count) and the positions of
// its left symbol, ascending. Positions go stale when merges change the symbols there.
struct PairStats {
  int64_t count = 0;
  std::vector<int32_t> positions;
};

// A queue entry: the pair's count when it was queued.
struct Candidate {
  int64_t count;
  uint64_t key;
};

// Highest count first; among equal counts the smallest (left, right).
struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.count != b.count ? a.count < b.count : a.key > b.key;
  }
};

class MergeLearner {
 public:
  explicit MergeLearner(const WordCounts& words) : token_bytes_(BpeTokenizer::kByteTokens, 1) {
    for (size_t w = 0; w < words.words.size(); ++w) {
      const std::string_view word = words.words[w];
      if (word.size() < 2) continue;
      const auto first = static_cast<int32_t>(token_.size());
      const auto last = static_cast<int32_t>(first + word.size() - 1);
      for (int32_t p = first; p <= last; ++p) {
        token_.push_back(static_cast<unsigned char>(word[p - first]));
        prev_.push_back(p == first ? -1 : p - 1);
        next_.push_back(p == last ? -1 : p + 1);
        weight_.push_back(words.counts[w]);
      }
      for (int32_t p = first; p < last; ++p) add_pair(token_[p], token_[p + 1], words.counts[w], p);
    }
    queue_new_pairs();
  }

  std::vector<Merge> learn(int64_t max_merges) {
    std::vector<Merge> merges;
    uint64_t key = 0;
    while (static_cast<int64_t>(merges.size()) < max_merges && pop_most_frequent(key)) {
      const auto left = static_cast<int32_t>(key >> 32);
      const auto right = static_cast<int32_t>(key & 0xffffffffu);
      const int64_t bytes = token_bytes_[left] + token_bytes_[right];
      if (bytes > BpeTokenizer::kMaxTokenBytes) {
        pairs_.erase(key);
        continue;
      }
      const auto token = static_cast<int32_t>(BpeTokenizer::kByteTokens + merges.size());
      merges.push_back({left, right});
      token_bytes_.push_back(bytes);
      merge(key, left, right, token);
    }
    return merges;
  }

 private:
  // The pair to merge next, false when no pair occurs twice. Queued counts are never below the
  // current ones (only pairs with the newest token ever gain occurrences, and those are queued
  // after their merge), so an entry whose count is current is the true maximum.
  bool pop_most_frequent(uint64_t& key) {
    while (!queue_.empty()) {
      const Candidate top = queue_.top();
      queue_.pop();
      const auto it = pairs_.find(top.key);
      if (it == pairs_.end()) continue;
      if (it->second.count == top.count) {
        key = top.key;
        return true;
      }
      if (it->second.count >= 2) queue_.push({it->second.count, top.key});
    }
    return false;
  }

  // Replaces every occurrence of (left, right), left to right within each word, by token.
  void merge(uint64_t key, int32_t left, int32_t right, int32_t token) {
    const auto it = pairs_.find(key);
    const std::vector<int32_t> positions = std::move(it->second.positions);
    pairs_.erase(it);
    for (const int32_t p : positions) {
      const int32_t q = next_[p];
      if (token_[p] != left || q < 0 || token_[q] != right) continue;
      const int64_t weight = weight_[p];
      const int32_t before = prev_[p];
      const int32_t after = next_[q];
      if (before >= 0) {
        remove_pair(token_[before], left, weight);
        add_pair(token_[before], token, weight, before);
      }
      if (after >= 0) {
        remove_pair(right, token_[after], weight);
        add_pair(token, token_[after], weight, p);
      }
      token_[p] = token;
      token_[q] = -1;
      next_[p] = after;
      if (after >= 0) prev_[after] = p;
    }
    queue_new_pairs();
  }

  void add_pair(int32_t left, int32_t right, int64_t weight, int32_t position) {
    const uint64_t key = pair_key(left, right);
    PairStats& stats = pairs_[key];
    if (stats.positions.empty()) new_pairs_.push_back(key);
    stats.count += weight;
    stats.positions.push_back(position);
  }

  // The merged pair itself is gone from pairs_ already; its count no longer matters.
  void remove_pair(int32_t left, int32_t right, int64_t weight) {
    const auto it = pairs_.find(pair_key(left, right));
    if (it != pairs_.end()) it->second.count -= weight;
  }

  void queue_new_pairs() {
    for (const uint64_t key : new_pairs_) {
      const int64_t count = pairs_[key].count;
      if (count >= 2) queue_.push({count, key});
    }
    new_pairs_.clear();
  }

  // The symbols of all words, one after another: token (-1 once merged into its left neighbour),
  // the neighbours within the word (-1 at its ends) and the word's count.
  std::vector<int32_t> token_, prev_, next_;
  std::vector<int64_t> weight_;
  std::vector<int64_t> token_bytes_;
  std::unordered_map<uint64_t, PairStats> pairs_;
  std::vector<uint64_t> new_pairs_;  // pairs that appeared since the queue was last updated
  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue_;
};

}  // namespace

std::vector<Merge> learn_merges(std::string_view corpus, int64_t max_merges) {
  return MergeLearner(count_words(corpus)).learn(max_merges);
}

}  // namespace rtx::text::detail
