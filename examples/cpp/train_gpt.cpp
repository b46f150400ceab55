// Trains a small GPT-2-style language model on the King James Bible with the public C++ API: a
// byte-level BPE tokenizer trained on the text, token and learned position embeddings, pre-LayerNorm
// blocks of causal multi-head self-attention and a GELU MLP, an output head tied to the token
// embedding, GPT-2's initialization, and AdamW with warm-up, cosine decay and gradient clipping.
// Every --eval-every steps it prints the validation loss and a sample continuing "In the beginning".
//
//   train_gpt [--device cpu|cuda] [--layers N] [--heads N] [--embd N] [--context N] [--batch-size N]
//             [--max-steps N] [--lr X] [--seed S] [--vocab N] [--eval-every N] [--text FILE] [--help]
//
// Without --text the text is the output of `bible gen1:1-rev22:21` (Debian's bible-kjv package)
// with the chapter headings and verse numbers removed: one verse per line, a blank line between
// chapters. Exit status: 0 on success, 2 on an error (a bad option, a missing text, a failing op).
#include <rtx/rtx.h>

#include "example_cli.h"

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using example_cli::resolve_device;
using example_cli::UsageError;

using rtx::Tensor;

constexpr const char* kProgram = "train_gpt";
constexpr const char* kBibleCommand = "bible gen1:1-rev22:21";
constexpr size_t kMinBibleChars = 1000000;
constexpr double kTrainFraction = 0.9;
constexpr int64_t kLogEvery = 50;
constexpr int64_t kMaxWarmupSteps = 100;
constexpr double kMinLrFraction = 0.1;  // the cosine decays to this fraction of the peak
constexpr double kWeightDecay = 0.1;
constexpr double kMaxGradNorm = 1.0;
constexpr double kInitStd = 0.02;
constexpr int64_t kEvalBatches = 20;
constexpr const char* kPrompt = "In the beginning";
constexpr int64_t kSampleTokens = 200;
constexpr double kSampleTemperature = 0.8;
constexpr int64_t kSampleTopK = 40;
constexpr double kPi = 3.14159265358979323846;

constexpr const char* kUsage =
    "usage: train_gpt [options]\n"
    "  --device cpu|cuda   where to train (default cuda when available, else cpu)\n"
    "  --layers N          transformer blocks (default 4)\n"
    "  --heads N           attention heads per block (default 4)\n"
    "  --embd N            embedding width, a multiple of --heads (default 128)\n"
    "  --context N         tokens per training sequence (default 128)\n"
    "  --batch-size N      sequences per step (default 16)\n"
    "  --max-steps N       optimizer steps (default 500)\n"
    "  --lr X              peak learning rate of AdamW (default 1e-3)\n"
    "  --seed S            seed of the initialization, batches and samples (default 0)\n"
    "  --vocab N           tokenizer vocabulary size, more than 256 (default 2048)\n"
    "  --eval-every N      steps between validation losses and samples (default 100)\n"
    "  --text FILE         train on FILE instead of the King James Bible from `bible`\n"
    "  --help              print this help\n";

// ---- command line -------------------------------------------------------------------------------

struct Options {
  std::string device;  // empty: cuda when available, else cpu
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t embd = 128;
  int64_t context = 128;
  int64_t batch_size = 16;
  int64_t max_steps = 500;
  double lr = 1e-3;
  uint64_t seed = 0;
  int64_t vocab = 2048;
  int64_t eval_every = 100;
  std::string text_file;  // empty: the King James Bible
  bool help = false;
};

void check_model_shape(const Options& o) {
  if (o.embd % o.heads != 0) {
    throw UsageError("--embd " + std::to_string(o.embd) + " is not a multiple of --heads " + std::to_string(o.heads));
  }
}

Options parse_options(int argc, char** argv) {
  Options o;
  example_cli::Flags flags;
  flags.text("--device", o.device);
  flags.integer("--layers", o.layers, 1);
  flags.integer("--heads", o.heads, 1);
  flags.integer("--embd", o.embd, 1);
  flags.integer("--context", o.context, 1);
  flags.integer("--batch-size", o.batch_size, 1);
  flags.integer("--max-steps", o.max_steps, 1);
  flags.positive_number("--lr", o.lr);
  flags.integer("--seed", o.seed, 0);
  flags.integer("--vocab", o.vocab, rtx::text::BpeTokenizer::kByteTokens + 1);
  flags.integer("--eval-every", o.eval_every, 1);
  flags.text("--text", o.text_file);
  o.help = !flags.parse(argc, argv);
  if (!o.help) check_model_shape(o);
  return o;
}

// ---- text ---------------------------------------------------------------------------------------------

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The text of a line that starts a verse ("  12 And God said, ..."), or nothing for any other line.
std::optional<std::string> verse_start(const std::string& line) {
  const size_t number = line.find_first_not_of(" \t");
  if (number == 0 || number == std::string::npos) return std::nullopt;
  size_t end = number;
  while (end < line.size() && std::isdigit(static_cast<unsigned char>(line[end]))) ++end;
  if (end == number || end >= line.size() || line[end] != ' ') return std::nullopt;
  return trimmed(line.substr(end + 1));
}

std::string joined(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
  return out;
}

// The output of `bible` as plain text. It prints, for each chapter, a blank line, a heading ("1 Samuel 3"),
// a blank line, then the verses: "  N text" wrapped onto unindented continuation lines. The headings
// and verse numbers are dropped; each verse goes on one line and a blank line separates chapters.
std::string clean_bible(const std::string& raw) {
  std::vector<std::string> chapters, verses;
  bool heading_next = true;
  std::istringstream lines(raw);
  for (std::string line; std::getline(lines, line);) {
    if (trimmed(line).empty()) {
      if (!verses.empty()) chapters.push_back(joined(verses, "\n"));
      verses.clear();
      heading_next = true;
    } else if (heading_next) {
      heading_next = false;
    } else if (const auto verse = verse_start(line)) {
      verses.push_back(*verse);
    } else if (!verses.empty()) {
      verses.back() += " " + trimmed(line);
    }
  }
  if (!verses.empty()) chapters.push_back(joined(verses, "\n"));
  return joined(chapters, "\n\n") + "\n";
}

// What `bible gen1:1-rev22:21` prints, or an error telling how to install it.
std::string run_bible() {
  FILE* pipe = popen((std::string(kBibleCommand) + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error(std::string("could not run `") + kBibleCommand + "`");
  std::string raw;
  std::array<char, 1 << 16> buffer;
  for (size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) raw.append(buffer.data(), n);
  const int status = pclose(pipe);
  const int exit_code = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (exit_code == 127) {
    throw std::runtime_error(
        "the `bible` program is missing; install the King James Bible with `sudo apt-get install bible-kjv` "
        "(or pass --text FILE)");
  }
  if (exit_code != 0) {
    throw std::runtime_error(std::string("`") + kBibleCommand + "` failed (exit status " + std::to_string(exit_code) +
                             "); reinstall it with `sudo apt-get install --reinstall bible-kjv bible-kjv-text`");
  }
  return raw;
}

std::string king_james_bible() {
  const std::string text = clean_bible(run_bible());
  if (text.size() < kMinBibleChars) {
    throw std::runtime_error(std::string("`") + kBibleCommand + "` printed only " + std::to_string(text.size()) +
                             " characters of verses; reinstall it with "
                             "`sudo apt-get install --reinstall bible-kjv bible-kjv-text`");
  }
  return text;
}

std::string read_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("--text " + path + ": cannot open the file");
  std::ostringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// ---- batches ------------------------------------------------------------------------------------------

struct Batch {
  Tensor inputs;   // int64 [B, T]
  Tensor targets;  // int64 [B, T]: the inputs shifted by one token
};

// The windows of context + 1 tokens at starts, on device.
Batch make_batch(const std::vector<int32_t>& tokens, const std::vector<int64_t>& starts, int64_t context,
                 rtx::Device device) {
  std::vector<int64_t> windows;
  windows.reserve(starts.size() * static_cast<size_t>(context + 1));
  for (const int64_t start : starts) {
    windows.insert(windows.end(), tokens.begin() + start, tokens.begin() + start + context + 1);
  }
  const Tensor all = rtx::tensor(windows, rtx::TensorOptions(device)).view({-1, context + 1});
  return {all.slice(1, 0, context), all.slice(1, 1, context + 1)};
}

// A permutation of 0..n-1 that depends on the seed and the epoch only.
std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int64_t n) {
  std::seed_seq seeds{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), static_cast<uint32_t>(epoch)};
  std::mt19937_64 engine(seeds);
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  for (int64_t i = n - 1; i > 0; --i) {
    std::swap(order[static_cast<size_t>(i)], order[engine() % static_cast<uint64_t>(i + 1)]);
  }
  return order;
}

// ---- model --------------------------------------------------------------------------------------------

struct GptConfig {
  int64_t vocab, context, layers, heads, embd;
};

class CausalSelfAttention : public rtx::nn::Module {
 public:
  explicit CausalSelfAttention(const GptConfig& c) : heads_(c.heads) {
    c_attn = register_module("c_attn", std::make_shared<rtx::nn::Linear>(c.embd, 3 * c.embd));
    c_proj = register_module("c_proj", std::make_shared<rtx::nn::Linear>(c.embd, c.embd));
  }

  // x [B, T, C] -> [B, T, C]: causal softmax(q k^T / sqrt(d)) v per head (the library's fused
  // attention), then the projection.
  Tensor forward(const Tensor& x) override {
    const int64_t batch = x.size(0), length = x.size(1), width = x.size(2), head_width = width / heads_;
    const rtx::TensorList qkv = rtx::split((*c_attn)(x), width, 2);
    const auto per_head = [&](const Tensor& t) { return t.reshape({batch, length, heads_, head_width}).transpose(1, 2); };
    const Tensor q = per_head(qkv[0]), k = per_head(qkv[1]), v = per_head(qkv[2]);
    const Tensor attended = rtx::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);  // [B, heads, T, d]
    return (*c_proj)(attended.transpose(1, 2).reshape({batch, length, width}));
  }

  std::shared_ptr<rtx::nn::Linear> c_attn, c_proj;

 private:
  int64_t heads_;
};

class Mlp : public rtx::nn::Module {
 public:
  explicit Mlp(const GptConfig& c) {
    c_fc = register_module("c_fc", std::make_shared<rtx::nn::Linear>(c.embd, 4 * c.embd));
    c_proj = register_module("c_proj", std::make_shared<rtx::nn::Linear>(4 * c.embd, c.embd));
  }
  Tensor forward(const Tensor& x) override { return (*c_proj)(rtx::gelu((*c_fc)(x), "tanh")); }

  std::shared_ptr<rtx::nn::Linear> c_fc, c_proj;
};

// Pre-LayerNorm transformer block: x + attn(ln_1(x)), then + mlp(ln_2(x)).
class Block : public rtx::nn::Module {
 public:
  explicit Block(const GptConfig& c) {
    ln_1 = register_module("ln_1", std::make_shared<rtx::nn::LayerNorm>(c.embd));
    attn = register_module("attn", std::make_shared<CausalSelfAttention>(c));
    ln_2 = register_module("ln_2", std::make_shared<rtx::nn::LayerNorm>(c.embd));
    mlp = register_module("mlp", std::make_shared<Mlp>(c));
  }
  Tensor forward(const Tensor& x) override {
    const Tensor attended = x + (*attn)((*ln_1)(x));
    return attended + (*mlp)((*ln_2)(attended));
  }

  std::shared_ptr<rtx::nn::LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Mlp> mlp;
};

// Token ids [B, T] (T <= context) -> next-token logits [B, T, vocab]. Parameter names follow GPT-2's
// (wte, wpe, h.0.attn.c_attn, ..., ln_f); the output head is the token embedding, transposed.
class Gpt : public rtx::nn::Module {
 public:
  explicit Gpt(const GptConfig& c) : config(c) {
    wte = register_module("wte", std::make_shared<rtx::nn::Embedding>(c.vocab, c.embd));
    wpe = register_module("wpe", std::make_shared<rtx::nn::Embedding>(c.context, c.embd));
    h = register_module("h", std::make_shared<rtx::nn::Sequential>());
    for (int64_t i = 0; i < c.layers; ++i) h->push_back(std::make_shared<Block>(c));
    ln_f = register_module("ln_f", std::make_shared<rtx::nn::LayerNorm>(c.embd));
    init_like_gpt2();
  }

  Tensor forward(const Tensor& ids) override {
    const Tensor positions = wpe->weight.slice(0, 0, ids.size(1));
    const Tensor x = (*h)((*wte)(ids) + positions);
    return rtx::matmul((*ln_f)(x), wte->weight.t());
  }

  GptConfig config;
  std::shared_ptr<rtx::nn::Embedding> wte, wpe;
  std::shared_ptr<rtx::nn::Sequential> h;
  std::shared_ptr<rtx::nn::LayerNorm> ln_f;

 private:
  static bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
  }

  // Biases zero, matrices normal with std 0.02, the projections into the residual stream (c_proj)
  // scaled down by 1/sqrt(2 * layers); LayerNorm keeps its ones and zeros.
  void init_like_gpt2() {
    rtx::NoGradGuard no_grad;
    const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config.layers));
    for (const auto& [name, parameter] : named_parameters()) {
      Tensor p = parameter;
      if (ends_with(name, "bias")) {
        p.zero_();
      } else if (p.dim() == 2) {
        rtx::normal_(p, 0.0, ends_with(name, "c_proj.weight") ? residual_std : kInitStd);
      }
    }
  }
};

Tensor language_model_loss(Gpt& model, const Batch& batch) {
  const Tensor logits = model(batch.inputs);
  return rtx::cross_entropy(logits.reshape({-1, logits.size(-1)}), batch.targets.reshape({-1}));
}

// ---- optimization -------------------------------------------------------------------------------------

// AdamW with betas (0.9, 0.95); weight decay on the matrices only (not on biases and LayerNorm).
rtx::optim::AdamW make_optimizer(const rtx::nn::Module& model, double lr) {
  rtx::optim::AdamOptions decayed;
  decayed.lr = lr;
  decayed.betas = {0.9, 0.95};
  decayed.eps = 1e-8;
  decayed.weight_decay = kWeightDecay;
  rtx::optim::AdamOptions not_decayed = decayed;
  not_decayed.weight_decay = 0.0;
  rtx::TensorList matrices, others;
  for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? matrices : others).push_back(p);
  std::vector<rtx::optim::ParamGroup<rtx::optim::AdamOptions>> groups{{matrices, decayed}, {others, not_decayed}};
  return rtx::optim::AdamW(std::move(groups));
}

// Linear warm-up over min(100, total / 10) steps, then cosine decay to a tenth of the peak.
struct Schedule {
  double peak_lr;
  int64_t warmup_steps;
  int64_t total_steps;

  Schedule(double peak, int64_t total)
      : peak_lr(peak), warmup_steps(std::min(kMaxWarmupSteps, total / 10)), total_steps(total) {}

  double lr_at(int64_t step) const {
    if (step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    const double progress =
        static_cast<double>(step - warmup_steps) / static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
    return peak_lr * (kMinLrFraction + (1.0 - kMinLrFraction) * 0.5 * (1.0 + std::cos(kPi * progress)));
  }
};

// ---- evaluation and sampling --------------------------------------------------------------------------

// Mean loss over up to kEvalBatches batches of consecutive validation windows.
double validation_loss(Gpt& model, const std::vector<int32_t>& tokens, int64_t batch_size, rtx::Device device) {
  rtx::NoGradGuard no_grad;
  model.eval();
  const int64_t context = model.config.context;
  const int64_t windows = std::min((static_cast<int64_t>(tokens.size()) - 1) / context, kEvalBatches * batch_size);
  double total = 0.0;
  for (int64_t first = 0; first < windows; first += batch_size) {
    std::vector<int64_t> starts;
    for (int64_t w = first; w < std::min(windows, first + batch_size); ++w) starts.push_back(w * context);
    total += language_model_loss(model, make_batch(tokens, starts, context, device)).item<double>() *
             static_cast<double>(starts.size());
  }
  model.train();
  return total / static_cast<double>(std::max<int64_t>(1, windows));
}

// The next token after ids [1, T]: sampled from the top-k logits of the last position at a temperature.
Tensor sample_next_token(Gpt& model, const Tensor& ids) {
  const Tensor logits = model(ids).select(1, ids.size(1) - 1) / kSampleTemperature;  // [1, vocab]
  const Tensor kth_largest = rtx::topk(logits, std::min(kSampleTopK, logits.size(-1))).values.slice(1, -1);
  const Tensor top_k = logits.masked_fill(logits < kth_largest, -std::numeric_limits<double>::infinity());
  return rtx::multinomial(rtx::softmax(top_k, -1), 1);
}

// The prompt and kSampleTokens sampled tokens, as text. The generator is reseeded for the sample and
// restored afterwards, so sampling changes nothing about the training run.
std::string generate(Gpt& model, const rtx::text::BpeTokenizer& tokenizer, uint64_t seed, rtx::Device device) {
  const std::vector<int32_t> prompt = tokenizer.encode(kPrompt);
  Tensor ids = rtx::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), rtx::TensorOptions(device)).view({1, -1});
  const rtx::GeneratorState saved = rtx::get_rng_state();
  rtx::manual_seed(seed);
  {
    rtx::NoGradGuard no_grad;
    model.eval();
    for (int64_t i = 0; i < kSampleTokens; ++i) {
      const int64_t length = ids.size(1);
      const Tensor window = ids.slice(1, std::max<int64_t>(0, length - model.config.context));
      ids = rtx::cat({ids, sample_next_token(model, window)}, 1);
    }
    model.train();
  }
  rtx::set_rng_state(saved);
  const std::vector<int64_t> generated = ids.tolist<int64_t>();
  return tokenizer.decode(std::vector<int32_t>(generated.begin(), generated.end()));
}

// ---- main ---------------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Corpus {
  std::vector<int32_t> train, val;
};

std::string load_text(const Options& o) {
  if (!o.text_file.empty()) return read_file(o.text_file);
  std::printf("reading the King James Bible from `%s`\n", kBibleCommand);
  return king_james_bible();
}

Corpus tokenize(const rtx::text::BpeTokenizer& tokenizer, const std::string& text) {
  std::vector<int32_t> tokens = tokenizer.encode(text);
  const auto split = tokens.begin() + static_cast<int64_t>(kTrainFraction * static_cast<double>(tokens.size()));
  return {std::vector<int32_t>(tokens.begin(), split), std::vector<int32_t>(split, tokens.end())};
}

// Training samples are the non-overlapping windows of context + 1 tokens; an epoch visits each once.
int64_t count_windows(const Corpus& corpus, const Options& o) {
  const int64_t windows = (static_cast<int64_t>(corpus.train.size()) - 1) / o.context;
  const int64_t val_windows = (static_cast<int64_t>(corpus.val.size()) - 1) / o.context;
  if (windows < o.batch_size || val_windows < 1) {
    throw std::runtime_error("the text has " + std::to_string(corpus.train.size()) + " training and " +
                             std::to_string(corpus.val.size()) + " validation tokens: too few for --batch-size " +
                             std::to_string(o.batch_size) + " windows of --context " + std::to_string(o.context) +
                             " + 1 tokens; use a longer text or smaller sizes");
  }
  return windows;
}

void print_evaluation(Gpt& model, const rtx::text::BpeTokenizer& tokenizer, const Corpus& corpus, const Options& o,
                      int64_t step, rtx::Device device) {
  const double loss = validation_loss(model, corpus.val, o.batch_size, device);
  std::printf("step %lld: val loss %.4f  perplexity %.2f\n--- sample ---\n%s\n--------------\n",
              static_cast<long long>(step), loss, std::exp(std::min(loss, 50.0)),
              generate(model, tokenizer, o.seed, device).c_str());
  std::fflush(stdout);
}

void train(Gpt& model, const rtx::text::BpeTokenizer& tokenizer, const Corpus& corpus, int64_t windows,
           const Options& o, rtx::Device device) {
  const int64_t steps_per_epoch = windows / o.batch_size;
  const rtx::TensorList parameters = model.parameters();
  rtx::optim::AdamW optimizer = make_optimizer(model, o.lr);
  const Schedule schedule(o.lr, o.max_steps);
  std::vector<int64_t> order;
  int64_t tokens_seen = 0, tokens_since_log = 0;
  double eval_seconds = 0.0;
  const auto start = Clock::now();
  auto log_start = start;
  model.train();
  for (int64_t step = 0; step < o.max_steps; ++step) {
    const int64_t position = step % steps_per_epoch;
    if (position == 0) order = epoch_order(o.seed, step / steps_per_epoch, windows);
    std::vector<int64_t> starts(order.begin() + position * o.batch_size, order.begin() + (position + 1) * o.batch_size);
    for (int64_t& s : starts) s *= o.context;
    const double lr = schedule.lr_at(step);
    optimizer.set_lr(lr);
    const Tensor loss = language_model_loss(model, make_batch(corpus.train, starts, o.context, device));
    optimizer.zero_grad();
    loss.backward();
    rtx::nn::utils::clip_grad_norm_(parameters, kMaxGradNorm);
    optimizer.step();
    tokens_since_log += o.batch_size * o.context;
    tokens_seen += o.batch_size * o.context;
    if ((step + 1) % kLogEvery == 0 || step + 1 == o.max_steps) {
      const double loss_value = loss.item<double>();  // waits for the device, so the timing below is right
      std::printf("step %5lld/%lld  loss %.4f  lr %.2e  %.0f tokens/s\n", static_cast<long long>(step + 1),
                  static_cast<long long>(o.max_steps), loss_value, lr,
                  static_cast<double>(tokens_since_log) / seconds_since(log_start));
      std::fflush(stdout);
      tokens_since_log = 0;
      log_start = Clock::now();
    }
    if ((step + 1) % o.eval_every == 0 || step + 1 == o.max_steps) {
      const auto eval_start = Clock::now();
      print_evaluation(model, tokenizer, corpus, o, step + 1, device);
      eval_seconds += seconds_since(eval_start);
      log_start = Clock::now();  // the throughput counts training only
    }
  }
  const double train_seconds = seconds_since(start) - eval_seconds;
  std::printf("trained %lld steps in %.1f s (%.0f tokens/s), evaluations and samples took %.1f s\n",
              static_cast<long long>(o.max_steps), train_seconds, static_cast<double>(tokens_seen) / train_seconds,
              eval_seconds);
}

void run(const Options& o) {
  const rtx::Device device = resolve_device(o.device);
  rtx::manual_seed(o.seed);

  const std::string text = load_text(o);
  auto clock = Clock::now();
  const auto tokenizer = rtx::text::BpeTokenizer::train(text, o.vocab);
  std::printf("trained a BPE tokenizer of %d tokens on %zu bytes in %.1f s\n", tokenizer.vocab_size(), text.size(),
              seconds_since(clock));
  clock = Clock::now();
  const Corpus corpus = tokenize(tokenizer, text);
  std::printf("encoded the text in %.1f s: %zu training and %zu validation tokens\n", seconds_since(clock),
              corpus.train.size(), corpus.val.size());
  const int64_t windows = count_windows(corpus, o);

  Gpt model({tokenizer.vocab_size(), o.context, o.layers, o.heads, o.embd});
  model.to(device);
  std::printf("training a GPT (%lld layers, %lld heads, width %lld, context %lld; %lld parameters) on %s: "
              "%lld steps of %lld sequences, lr %.2e, seed %llu\n",
              static_cast<long long>(o.layers), static_cast<long long>(o.heads), static_cast<long long>(o.embd),
              static_cast<long long>(o.context), static_cast<long long>(model.num_parameters()),
              device.str().c_str(), static_cast<long long>(o.max_steps), static_cast<long long>(o.batch_size), o.lr,
              static_cast<unsigned long long>(o.seed));
  std::fflush(stdout);
  train(model, tokenizer, corpus, windows, o, device);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    if (options.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    run(options);
    return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\nrun %s --help for the options\n", kProgram, e.what(), kProgram);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
  }
  return 2;
}
