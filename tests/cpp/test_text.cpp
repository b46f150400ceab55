// The byte-level BPE tokenizer: exact round trips of any bytes, merges checked by hand on tiny
// corpora, encoding against merges applied naively in rank order, word boundaries, determinism,
// the text format (save/load, and truncated, corrupt or hostile input), and argument errors.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <thread>

#include "test_utils.h"
#include "text/words.h"

namespace rtx::testing {
namespace {

using text::BpeTokenizer;
using text::Merge;
namespace fs = std::filesystem;

// Reproducible text: words of one to three syllables (letters, UTF-8, digits, punctuation) between
// spaces, tabs and newlines.
std::string sample_corpus(size_t words, uint32_t seed) {
  static const char* const kSyllables[] = {"the", "n", "re", "and", "s", "b", "LORD", "Grü", "ße", "世", "界", "16",
                                           "11", "42", "--", "...", ",", "!", "'s", "ing", "ed", "er", "qu", "x"};
  static const char* const kGaps[] = {" ", " ", " ", " ", "  ", "\n", "\n\n", "\t", ""};
  std::string out;
  uint32_t state = seed;
  const auto next = [&state](uint32_t n) {
    state = state * 1664525u + 1013904223u;
    return (state >> 16) % n;
  };
  for (size_t i = 0; i < words; ++i) {
    for (uint32_t k = 0, syllables = 1 + next(3); k < syllables; ++k)
      out += kSyllables[next(sizeof(kSyllables) / sizeof(kSyllables[0]))];
    out += kGaps[next(sizeof(kGaps) / sizeof(kGaps[0]))];
  }
  return out;
}

// Reproducible long words over a small alphabet: many merges apply within each word.
std::string letter_soup(size_t bytes, uint32_t seed) {
  std::string out;
  uint32_t state = seed;
  while (out.size() < bytes) {
    state = state * 1664525u + 1013904223u;
    const uint32_t r = state >> 16;
    out.push_back(r % 9 == 0 ? ' ' : static_cast<char>('a' + r % 4));
  }
  return out;
}

std::string all_bytes() {
  std::string s;
  for (int c = 0; c < 256; ++c) s.push_back(static_cast<char>(c));
  return s;
}

// The reference encoder: every merge in rank order, applied left to right to each word.
std::vector<int32_t> encode_naively(const BpeTokenizer& tokenizer, std::string_view text) {
  std::vector<int32_t> ids;
  text::detail::for_each_word(text, [&](std::string_view word) {
    std::vector<int32_t> symbols(word.begin(), word.end());
    for (int32_t& s : symbols) s &= 0xff;
    for (size_t rank = 0; rank < tokenizer.merges().size(); ++rank) {
      const Merge m = tokenizer.merges()[rank];
      std::vector<int32_t> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == m.left && symbols[i + 1] == m.right) {
          merged.push_back(BpeTokenizer::kByteTokens + static_cast<int32_t>(rank));
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      symbols.swap(merged);
    }
    ids.insert(ids.end(), symbols.begin(), symbols.end());
  });
  return ids;
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }
int byte_kind(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (std::isalpha(u) || u >= 0x80) return 0;
  if (std::isdigit(u)) return 1;
  return is_space(c) ? 2 : 3;
}

// Whether bytes could lie within one word: all whitespace, or an optional leading space followed by
// bytes of one kind (letters, digits or other non-space bytes).
bool within_one_word(std::string_view bytes) {
  if (std::all_of(bytes.begin(), bytes.end(), is_space)) return true;
  if (bytes[0] == ' ') bytes.remove_prefix(1);
  return std::all_of(bytes.begin(), bytes.end(), [&](char c) { return byte_kind(c) == byte_kind(bytes[0]); });
}

TEST(BpeTokenizer, RoundTripsAnyBytes) {
  const BpeTokenizer trained = BpeTokenizer::train(sample_corpus(3000, 1), 400);
  ASSERT_GT(trained.vocab_size(), 300);
  const std::string invalid_utf8 = "\xff\xfe\x80 abc \xc3 \xe4\xb8 \xed\xa0\x80 end\xf0";
  const BpeTokenizer bytes_only;
  for (const BpeTokenizer* tokenizer : {&trained, &bytes_only}) {
    for (const std::string& s : {std::string("In the beginning God created the heaven and the earth."),
                                 std::string("Grüße, 世界 🎉"), invalid_utf8, std::string(), all_bytes(),
                                 std::string("  leading\n\n\ttabs  and trailing  "), sample_corpus(500, 7)}) {
      const std::vector<int32_t> ids = tokenizer->encode(s);
      EXPECT_EQ(tokenizer->decode(ids), s);
      for (const int32_t id : ids) ASSERT_LT(id, tokenizer->vocab_size());
    }
  }
  EXPECT_TRUE(trained.encode("").empty());
  EXPECT_EQ(BpeTokenizer().encode("a\xff"), (std::vector<int32_t>{97, 255}));
}

TEST(BpeTokenizer, LearnsHandCheckedMerges) {
  // "aaab" and " aaab": (a,a) occurs 4 times; then (a,b) and (256,a) twice each, and the tie goes to
  // the smaller pair (97,98); then (256,257) twice; (' ',258) only once, so training stops.
  const BpeTokenizer tokenizer = BpeTokenizer::train("aaab aaab", 1000);
  EXPECT_EQ(tokenizer.merges(), (std::vector<Merge>{{97, 97}, {97, 98}, {256, 257}}));
  EXPECT_EQ(tokenizer.vocab_size(), 259);
  EXPECT_EQ(tokenizer.token_bytes(258), "aaab");
  EXPECT_EQ(tokenizer.encode("aaab aaab"), (std::vector<int32_t>{258, 32, 258}));
  EXPECT_EQ(tokenizer.encode("baaa"), (std::vector<int32_t>{98, 256, 97}));
  // The vocabulary size bounds the merges.
  EXPECT_EQ(BpeTokenizer::train("aaab aaab", 258).merges(), (std::vector<Merge>{{97, 97}, {97, 98}}));
  EXPECT_EQ(BpeTokenizer::train("aaab aaab", 256).vocab_size(), 256);
  // No pair occurs twice: nothing to learn.
  EXPECT_EQ(BpeTokenizer::train("abcdef", 1000).vocab_size(), 256);
}

TEST(BpeTokenizer, OverlappingPairsMergeLeftToRight) {
  // "aaa" holds (a,a) twice but merges once, into [256, a]; (256, a) then occurs twice.
  const BpeTokenizer tokenizer = BpeTokenizer::train("aaa aaa", 1000);
  EXPECT_EQ(tokenizer.merges(), (std::vector<Merge>{{97, 97}, {256, 97}}));
  EXPECT_EQ(tokenizer.encode("aaaa"), (std::vector<int32_t>{256, 256}));
  EXPECT_EQ(tokenizer.encode("aaaaa"), (std::vector<int32_t>{256, 257}));
  EXPECT_EQ(tokenizer.encode("aaaaaaa"), (std::vector<int32_t>{256, 256, 257}));
}

TEST(BpeTokenizer, SplitsWordsLikeGpt2) {
  std::vector<std::string> words;
  text::detail::for_each_word("Hello, world!  42 times\n\n  x\t y 3.5é ", [&](std::string_view w) { words.emplace_back(w); });
  EXPECT_EQ(words, (std::vector<std::string>{"Hello", ",", " world", "!", " ", " 42", " times", "\n\n ", " x", "\t",
                                             " y", " 3", ".", "5", "é", " "}));
}

TEST(BpeTokenizer, MergesNeverCrossWords) {
  const BpeTokenizer tokenizer = BpeTokenizer::train(sample_corpus(5000, 3), 600);
  ASSERT_GT(tokenizer.vocab_size(), 400);
  for (int32_t id = BpeTokenizer::kByteTokens; id < tokenizer.vocab_size(); ++id) {
    const std::string bytes = tokenizer.token_bytes(id);
    EXPECT_TRUE(within_one_word(bytes)) << "token " << id << " '" << bytes << "'";
  }
  // "the" and "," are words of their own, so "the," never becomes one token.
  const std::vector<int32_t> ids = tokenizer.encode("the,");
  EXPECT_EQ(tokenizer.decode({ids.back()}), ",");
}

TEST(BpeTokenizer, EncodeMatchesMergesAppliedInRankOrder) {
  const BpeTokenizer tokenizer = BpeTokenizer::train(sample_corpus(4000, 5), 500);
  for (const std::string& s : {sample_corpus(800, 11), std::string("thethen sandband LORD's 16114242 ..."),
                               std::string(300, 'a') + " " + std::string(301, 'e'), all_bytes()})
    EXPECT_EQ(tokenizer.encode(s), encode_naively(tokenizer, s));
  const BpeTokenizer soup = BpeTokenizer::train(letter_soup(20000, 1), 400);
  ASSERT_EQ(soup.vocab_size(), 400);
  const std::string text = letter_soup(5000, 2);
  EXPECT_EQ(soup.encode(text), encode_naively(soup, text));
}

TEST(BpeTokenizer, TrainingIsDeterministic) {
  const std::string corpus = sample_corpus(20000, 9);
  const BpeTokenizer a = BpeTokenizer::train(corpus, 700);
  const BpeTokenizer b = BpeTokenizer::train(corpus, 700);
  EXPECT_EQ(a.serialize(), b.serialize());
  // A smaller vocabulary learns a prefix of the same merges.
  ASSERT_EQ(a.vocab_size(), 700);
  const std::vector<Merge> fewer = BpeTokenizer::train(corpus, 500).merges();
  ASSERT_EQ(fewer.size(), 244u);
  EXPECT_TRUE(std::equal(fewer.begin(), fewer.end(), a.merges().begin()));
}

TEST(BpeTokenizer, LongWordsTrainAndEncodeQuickly) {
  // One 1 MiB word: training visits only the merged positions, encoding uses a heap per word. Tokens
  // double (aa, aaaa, ...) up to the 64 KiB limit.
  const std::string word(size_t{1} << 20, 'a');
  const BpeTokenizer tokenizer = BpeTokenizer::train(word, 300);
  EXPECT_EQ(tokenizer.vocab_size(), 256 + 16);
  EXPECT_EQ(tokenizer.token_bytes(271), std::string(size_t{1} << 16, 'a'));
  const std::vector<int32_t> ids = tokenizer.encode(word);
  EXPECT_EQ(ids, std::vector<int32_t>(16, 271));
  EXPECT_EQ(tokenizer.decode(ids), word);
}

TEST(BpeTokenizer, EncodesConcurrently) {
  const BpeTokenizer tokenizer = BpeTokenizer::train(sample_corpus(3000, 2), 400);
  const std::string text = sample_corpus(3000, 4);
  const std::vector<int32_t> expected = tokenizer.encode(text);
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = tokenizer.encode(text); });
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, expected);
}

TEST(BpeTokenizer, DecodeRejectsIdsOutOfRange) {
  const BpeTokenizer tokenizer = BpeTokenizer::train("aaab aaab", 1000);
  EXPECT_TRUE(throws<IndexError>([&] { tokenizer.decode({97, 5000}); },
                                 "[BpeTokenizer.decode] id 5000 out of range for a vocabulary of 259 tokens"));
  EXPECT_TRUE(throws<IndexError>([&] { tokenizer.decode({259}); }, "id 259 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { tokenizer.decode({-1}); }, "id -1 out of range"));
  EXPECT_TRUE(throws<IndexError>([&] { tokenizer.token_bytes(300); }, "[BpeTokenizer.token_bytes] id 300"));
  EXPECT_EQ(tokenizer.decode({258}), "aaab");
}

TEST(BpeTokenizer, RejectsBadVocabularySizes) {
  EXPECT_TRUE(throws<ValueError>([] { BpeTokenizer::train("abc", 255); },
                                 "[BpeTokenizer.train] vocab_size 255 is below the 256 byte tokens"));
  EXPECT_TRUE(throws<ValueError>([] { BpeTokenizer::train("abc", -1); }, "vocab_size -1"));
  EXPECT_TRUE(throws<ValueError>([] { BpeTokenizer::train("abc", (int64_t{1} << 20) + 1); },
                                 "[BpeTokenizer.train] vocab_size 1048577 exceeds the limit of 1048576"));
  EXPECT_EQ(BpeTokenizer::train("abab abab", int64_t{1} << 20).vocab_size(), 258);
}

TEST(BpeTokenizer, SerializesToTheDocumentedFormat) {
  const BpeTokenizer tokenizer = BpeTokenizer::train("aaab aaab", 1000);
  EXPECT_EQ(tokenizer.serialize(), "rtx-bpe 1 3\n97 97\n97 98\n256 257\n");
  EXPECT_EQ(BpeTokenizer().serialize(), "rtx-bpe 1 0\n");
  EXPECT_EQ(BpeTokenizer::deserialize(tokenizer.serialize()).merges(), tokenizer.merges());
}

// The message deserialize gives for text (empty when it succeeds).
std::string deserialize_error(const std::string& text) {
  try {
    BpeTokenizer::deserialize(text);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(BpeTokenizer, RejectsCorruptText) {
  std::string doubling = "rtx-bpe 1 20\n97 97\n";
  for (int t = 256; t < 275; ++t) doubling += std::to_string(t) + " " + std::to_string(t) + "\n";
  const std::pair<std::string, std::string> cases[] = {
      {"", "<string> line 1: not an rtx-bpe tokenizer"},
      {"garbage\n", "line 1: not an rtx-bpe tokenizer"},
      {std::string("\0\x01\xff\n\n", 5), "line 1: not an rtx-bpe tokenizer"},
      {"rtx-bpe 1\n", "line 1: not an rtx-bpe tokenizer"},
      {"rtx-bpe 2 0\n", "line 1: unsupported format version"},
      {"rtx-bpe 1 -3\n", "line 1: the number of merges"},
      {"rtx-bpe 1 99999999\n", "line 1: the number of merges"},
      {"rtx-bpe 1 1048321\n", "line 1: the number of merges must be a decimal number of at most 1048320"},
      {"rtx-bpe 1 1048320\n", "line 2: the text ends after 0 of its 1048320 merges"},
      {"rtx-bpe 1 2\n97 97\n", "line 3: the text ends after 1 of its 2 merges"},
      {"rtx-bpe 1 1\n97 9", "line 2: the last line has no line end"},
      {"rtx-bpe 1 1\r\n97 97\r\n", "line 1"},
      {"rtx-bpe 1 1\n97 256\n", "line 2: merge refers to token 256, which is not defined before token 256"},
      {"rtx-bpe 1 2\n97 97\n258 1\n", "line 3: merge refers to token 258, which is not defined before token 257"},
      {"rtx-bpe 1 1\n-1 97\n", "line 2: a merge must be two token ids"},
      {"rtx-bpe 1 1\n97  97\n", "line 2: a merge must be two token ids"},
      {"rtx-bpe 1 1\n97 97 97\n", "line 2: a merge must be two token ids"},
      {"rtx-bpe 1 1\n097 97\n", "line 2: a merge must be two token ids"},
      {"rtx-bpe 1 1\n99999999999999999999 97\n", "line 2: a merge must be two token ids"},
      {"rtx-bpe 1 2\n97 97\n97 97\n", "line 3: merge (97, 97) repeats line 2"},
      {"rtx-bpe 1 1\n97 97\nextra\n", "line 3: unexpected text after the 1 merges"},
      {"rtx-bpe 1 1\n97 97\n\n", "line 3: unexpected text"},
      {doubling, "line 18: token 272 would be 131072 bytes long, over the limit of 65536"},
  };
  for (const auto& [text, message] : cases) {
    const std::string error = deserialize_error(text);
    EXPECT_NE(error.find(message), std::string::npos) << "'" << error << "' lacks '" << message << "'";
    EXPECT_EQ(error.rfind("[BpeTokenizer.deserialize] <string> line ", 0), 0u) << error;
  }
  // Every truncation of a valid text is refused (none ends at a line end after all its merges).
  const std::string valid = BpeTokenizer::train(sample_corpus(300, 8), 300).serialize();
  for (size_t n = 0; n < valid.size(); ++n) EXPECT_NE(deserialize_error(valid.substr(0, n)), "") << n;
  EXPECT_EQ(deserialize_error(valid), "");
}

class BpeTokenizerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rtx_bpe_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  fs::path dir_;
};

TEST_F(BpeTokenizerFiles, SaveLoadRoundTrip) {
  const BpeTokenizer tokenizer = BpeTokenizer::train(sample_corpus(4000, 6), 500);
  tokenizer.save(path("tok.bpe"));
  tokenizer.save(path("tok.bpe"));  // replaces the file
  const BpeTokenizer loaded = BpeTokenizer::load(path("tok.bpe"));
  EXPECT_EQ(loaded.serialize(), tokenizer.serialize());
  const std::string text = sample_corpus(1000, 12) + "Grüße, 世界 🎉\xff";
  EXPECT_EQ(loaded.encode(text), tokenizer.encode(text));
  // Only the file itself remains: no temporary files.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  EXPECT_EQ(fs::status(path("tok.bpe")).permissions() & fs::perms::others_read, fs::perms::others_read);
}

TEST_F(BpeTokenizerFiles, LoadRejectsBadFilesNamingThem) {
  write("truncated.bpe", "rtx-bpe 1 3\n97 97\n97 98\n");
  EXPECT_TRUE(throws<CheckpointError>([&] { BpeTokenizer::load(path("truncated.bpe")); },
                                      "[BpeTokenizer.load] " + path("truncated.bpe") +
                                          " line 4: the text ends after 2 of its 3 merges"));
  write("garbage.bpe", "\x89PNG\r\n\x1a\n");
  EXPECT_TRUE(throws<CheckpointError>([&] { BpeTokenizer::load(path("garbage.bpe")); },
                                      path("garbage.bpe") + " line 1: not an rtx-bpe tokenizer"));
  EXPECT_TRUE(throws<CheckpointError>([&] { BpeTokenizer::load(path("missing.bpe")); },
                                      path("missing.bpe") + ": cannot open"));
  EXPECT_TRUE(throws<CheckpointError>([&] { BpeTokenizer::load(dir_.string()); }, dir_.string() + ": cannot read"));
  write("huge.bpe", "rtx-bpe 1 1\n" + std::string(size_t{20} << 20, '1'));
  EXPECT_TRUE(throws<CheckpointError>([&] { BpeTokenizer::load(path("huge.bpe")); },
                                      path("huge.bpe") + ": larger than any tokenizer file"));
  EXPECT_TRUE(throws<CheckpointError>([&] { BpeTokenizer().save(path("no/such/dir/tok.bpe")); },
                                      "[BpeTokenizer.save] " + path("no/such/dir/tok.bpe") +
                                          ": cannot create a temporary file"));
}

}  // namespace
}  // namespace rtx::testing
