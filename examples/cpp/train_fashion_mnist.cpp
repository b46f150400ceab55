// Trains an MLP or a small CNN on Fashion-MNIST with the public C++ API, then reports the test
// accuracy and the confusion matrix. The models, the input normalization and the schedule (Adam,
// linear warm-up, cosine decay to zero) are those of the Python trainer.
//
//   train_fashion_mnist [--model mlp|cnn] [--device cpu|cuda] [--epochs N] [--max-steps N]
//                       [--batch-size N] [--lr X] [--seed S] [--data-dir DIR] [--deterministic]
//                       [--target-accuracy X] [--help]
//
// The data are the gzip-compressed IDX files of Debian's dataset-fashion-mnist package. Exit status:
// 0 on success, 1 when the test accuracy is below --target-accuracy, 2 on an error (a bad option,
// missing data, a failing op).
#include <rtx/rtx.h>

#include "example_cli.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using example_cli::resolve_device;
using example_cli::UsageError;

constexpr const char* kProgram = "train_fashion_mnist";
constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";
constexpr double kPixelMean = 0.2860;
constexpr double kPixelStd = 0.3530;
constexpr int64_t kImageSize = 28;
constexpr size_t kNumClasses = 10;
constexpr std::array<const char*, kNumClasses> kClassNames = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
constexpr int64_t kLogEvery = 100;
constexpr int64_t kMaxWarmupSteps = 100;
constexpr int64_t kEvalBatchSize = 1000;
constexpr double kPi = 3.14159265358979323846;

constexpr const char* kUsage =
    "usage: train_fashion_mnist [options]\n"
    "  --model mlp|cnn        model to train (default cnn)\n"
    "  --device cpu|cuda      where to train (default cuda when available, else cpu)\n"
    "  --epochs N             passes over the 60000 training images (default 2 for cnn, 3 for mlp)\n"
    "  --max-steps N          stop after N optimizer steps (default: every step of the epochs)\n"
    "  --batch-size N         images per step (default 128)\n"
    "  --lr X                 peak learning rate of Adam (default 1e-3)\n"
    "  --seed S               seed of the initialization, dropout and shuffling (default 0)\n"
    "  --data-dir DIR         directory of the IDX files (default /usr/share/datasets/fashion-mnist)\n"
    "  --deterministic        use deterministic algorithms only\n"
    "  --target-accuracy X    exit with status 1 when the test accuracy (0 to 1) is below X\n"
    "  --help                 print this help\n";

// ---- command line -------------------------------------------------------------------------------

struct Options {
  std::string model = "cnn";
  std::string device;   // empty: cuda when available, else cpu
  int64_t epochs = 0;   // 0: the model's default
  int64_t max_steps = 0;  // 0: no limit
  int64_t batch_size = 128;
  double lr = 1e-3;
  uint64_t seed = 0;
  std::string data_dir = kDefaultDataDir;
  bool deterministic = false;
  double target_accuracy = 0.0;
  bool help = false;
};

Options parse_options(int argc, char** argv) {
  Options o;
  example_cli::Flags flags;
  flags.text("--model", o.model);
  flags.text("--device", o.device);
  flags.integer("--epochs", o.epochs, 1);
  flags.integer("--max-steps", o.max_steps, 1);
  flags.integer("--batch-size", o.batch_size, 1);
  flags.positive_number("--lr", o.lr);
  flags.integer("--seed", o.seed, 0);
  flags.text("--data-dir", o.data_dir);
  flags.toggle("--deterministic", o.deterministic);
  flags.positive_number("--target-accuracy", o.target_accuracy);
  o.help = !flags.parse(argc, argv);
  if (o.model != "mlp" && o.model != "cnn") throw UsageError("--model expects mlp or cnn, got '" + o.model + "'");
  if (o.epochs == 0) o.epochs = o.model == "cnn" ? 2 : 3;
  return o;
}

// ---- data -----------------------------------------------------------------------------------------

struct Split {
  rtx::Tensor images;  // float32 [N, 1, 28, 28], normalized
  rtx::Tensor labels;  // int64 [N]
};

std::string shape_text(const rtx::Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void require_file(const std::string& path) {
  if (!std::ifstream(path)) {
    throw std::runtime_error("Fashion-MNIST: " + path +
                             " is missing; install the dataset with `sudo apt-get install dataset-fashion-mnist`"
                             " (or pass --data-dir DIR)");
  }
}

// One split ("train" or "t10k") of the dataset in data_dir, on device.
Split load_split(const std::string& data_dir, const std::string& split, rtx::Device device) {
  const std::string images_path = data_dir + "/" + split + "-images-idx3-ubyte.gz";
  const std::string labels_path = data_dir + "/" + split + "-labels-idx1-ubyte.gz";
  require_file(images_path);
  require_file(labels_path);
  const rtx::Tensor images = rtx::data::read_idx(images_path);
  const rtx::Tensor labels = rtx::data::read_idx(labels_path);
  const bool fits = images.dim() == 3 && images.size(1) == kImageSize && images.size(2) == kImageSize &&
                    labels.dim() == 1 && labels.size(0) == images.size(0);
  if (!fits) {
    throw std::runtime_error("Fashion-MNIST in " + data_dir + ": " + split + " images " + shape_text(images.sizes()) +
                             " and labels " + shape_text(labels.sizes()) +
                             " do not fit together; reinstall the dataset with "
                             "`sudo apt-get install --reinstall dataset-fashion-mnist`");
  }
  const rtx::Tensor normalized = (images.to(rtx::kFloat32) / 255.0 - kPixelMean) / kPixelStd;
  return {normalized.unsqueeze(1).to(device), labels.to(rtx::kInt64).to(device)};
}

// The training images' order in one epoch: a permutation that depends on the seed and the epoch only.
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

// The indices order[start, start + batch_size) (fewer at the end) as an int64 tensor on device.
rtx::Tensor batch_indices(const std::vector<int64_t>& order, int64_t start, int64_t batch_size, rtx::Device device) {
  const auto first = order.begin() + start;
  const auto last = order.begin() + std::min<int64_t>(start + batch_size, static_cast<int64_t>(order.size()));
  return rtx::tensor(std::vector<int64_t>(first, last), rtx::TensorOptions(device));
}

// ---- models -----------------------------------------------------------------------------------------

using ModulePtr = std::shared_ptr<rtx::nn::Module>;

// The layers are listed in a braced list, which C++ evaluates left to right, so that they draw their
// initial values from the generator in order.
ModulePtr make_mlp() {
  using namespace rtx::nn;
  return std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Flatten>(), std::make_shared<Linear>(784, 512), std::make_shared<ReLU>(),
      std::make_shared<Dropout>(0.2), std::make_shared<Linear>(512, 256), std::make_shared<ReLU>(),
      std::make_shared<Dropout>(0.2), std::make_shared<Linear>(256, 10)});
}

ModulePtr make_cnn() {
  using namespace rtx::nn;
  return std::make_shared<Sequential>(std::initializer_list<ModulePtr>{
      std::make_shared<Conv2d>(1, 32, 3, 1, 1), std::make_shared<BatchNorm2d>(32), std::make_shared<ReLU>(),
      std::make_shared<MaxPool2d>(2), std::make_shared<Conv2d>(32, 64, 3, 1, 1), std::make_shared<BatchNorm2d>(64),
      std::make_shared<ReLU>(), std::make_shared<MaxPool2d>(2), std::make_shared<Flatten>(),
      std::make_shared<Linear>(64 * 7 * 7, 128), std::make_shared<ReLU>(), std::make_shared<Dropout>(0.25),
      std::make_shared<Linear>(128, 10)});
}

// ---- training -----------------------------------------------------------------------------------------

// Linear warm-up over min(100, total / 10) steps, then cosine decay to zero.
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
    return peak_lr * 0.5 * (1.0 + std::cos(kPi * progress));
  }
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct TrainingRun {
  int64_t steps_per_epoch;
  int64_t total_steps;
};

TrainingRun plan_training(const Options& o, int64_t train_size) {
  const int64_t steps_per_epoch = (train_size + o.batch_size - 1) / o.batch_size;
  int64_t total_steps = o.epochs * steps_per_epoch;
  if (o.max_steps > 0) total_steps = std::min(total_steps, o.max_steps);
  return {steps_per_epoch, total_steps};
}

// Trains model with Adam; returns the number of images it saw.
int64_t train(rtx::nn::Module& model, const Split& data, const Options& o, const TrainingRun& plan,
              rtx::Device device) {
  rtx::optim::Adam optimizer(model.parameters(), {o.lr});
  const Schedule schedule(o.lr, plan.total_steps);
  const int64_t train_size = data.images.size(0);
  std::vector<int64_t> order;
  int64_t images_seen = 0, images_since_log = 0;
  auto log_start = Clock::now();
  model.train();
  for (int64_t step = 0; step < plan.total_steps; ++step) {
    const int64_t epoch = step / plan.steps_per_epoch, position = step % plan.steps_per_epoch;
    if (position == 0) order = epoch_order(o.seed, epoch, train_size);
    const rtx::Tensor index = batch_indices(order, position * o.batch_size, o.batch_size, device);
    const double lr = schedule.lr_at(step);
    optimizer.set_lr(lr);
    const rtx::Tensor loss =
        rtx::cross_entropy(model(data.images.index_select(0, index)), data.labels.index_select(0, index));
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    images_since_log += index.numel();
    images_seen += index.numel();
    if ((step + 1) % kLogEvery == 0 || step + 1 == plan.total_steps) {
      const double loss_value = loss.item<double>();  // waits for the device, so the timing below is right
      std::printf("step %5lld/%lld  epoch %lld  loss %.4f  lr %.2e  %.0f images/s\n",
                  static_cast<long long>(step + 1), static_cast<long long>(plan.total_steps),
                  static_cast<long long>(epoch + 1), loss_value, lr,
                  static_cast<double>(images_since_log) / seconds_since(log_start));
      std::fflush(stdout);
      images_since_log = 0;
      log_start = Clock::now();
    }
  }
  return images_seen;
}

// ---- evaluation ---------------------------------------------------------------------------------------

using ConfusionMatrix = std::array<std::array<int64_t, kNumClasses>, kNumClasses>;  // [true][predicted]

struct Evaluation {
  double loss = 0.0;
  double accuracy = 0.0;
  ConfusionMatrix confusion{};
};

Evaluation evaluate(rtx::nn::Module& model, const Split& data) {
  rtx::NoGradGuard no_grad;
  model.eval();
  Evaluation result;
  const int64_t n = data.images.size(0);
  int64_t correct = 0;
  for (int64_t start = 0; start < n; start += kEvalBatchSize) {
    const int64_t length = std::min(kEvalBatchSize, n - start);
    const rtx::Tensor labels = data.labels.narrow(0, start, length);
    const rtx::Tensor logits = model(data.images.narrow(0, start, length));
    result.loss += rtx::cross_entropy(logits, labels, {}, -100, rtx::Reduction::Sum).item<double>();
    const std::vector<int64_t> predicted = logits.argmax(1).tolist<int64_t>();
    const std::vector<int64_t> truth = labels.tolist<int64_t>();
    for (size_t i = 0; i < truth.size(); ++i) {
      ++result.confusion[static_cast<size_t>(truth[i])][static_cast<size_t>(predicted[i])];
      correct += truth[i] == predicted[i];
    }
  }
  result.loss /= static_cast<double>(n);
  result.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  return result;
}

// Rows are the true classes, columns the predicted ones, then each class's accuracy.
void print_confusion_matrix(const ConfusionMatrix& confusion) {
  constexpr int kNameWidth = 11;  // "T-shirt/top"
  std::printf("%*s ", kNameWidth, "");
  for (size_t j = 0; j < kNumClasses; ++j) std::printf(" %5zu", j);
  std::printf("\n");
  for (size_t i = 0; i < kNumClasses; ++i) {
    std::printf("%*s ", kNameWidth, kClassNames[i]);
    int64_t row_total = 0;
    for (size_t j = 0; j < kNumClasses; ++j) {
      std::printf(" %5lld", static_cast<long long>(confusion[i][j]));
      row_total += confusion[i][j];
    }
    std::printf("   %5.1f%%\n", 100.0 * static_cast<double>(confusion[i][i]) /
                                     static_cast<double>(std::max<int64_t>(1, row_total)));
  }
}

// ---- main ----------------------------------------------------------------------------------------------

int run(const Options& o) {
  const rtx::Device device = resolve_device(o.device);
  rtx::manual_seed(o.seed);
  rtx::use_deterministic_algorithms(o.deterministic);

  std::printf("loading Fashion-MNIST from %s\n", o.data_dir.c_str());
  const Split train_data = load_split(o.data_dir, "train", device);
  const Split test_data = load_split(o.data_dir, "t10k", device);

  const ModulePtr model = o.model == "cnn" ? make_cnn() : make_mlp();
  model->to(device);
  const TrainingRun plan = plan_training(o, train_data.images.size(0));
  std::printf("training the %s (%lld parameters) on %s: %lld steps (%lld per epoch), batch size %lld, lr %.2e, seed %llu\n",
              o.model.c_str(), static_cast<long long>(model->num_parameters()), device.str().c_str(),
              static_cast<long long>(plan.total_steps), static_cast<long long>(plan.steps_per_epoch),
              static_cast<long long>(o.batch_size), o.lr, static_cast<unsigned long long>(o.seed));
  std::fflush(stdout);

  const auto start = Clock::now();
  const int64_t images_seen = train(*model, train_data, o, plan, device);
  const double train_seconds = seconds_since(start);
  std::printf("trained in %.1f s (%.0f images/s)\n", train_seconds, static_cast<double>(images_seen) / train_seconds);

  const Evaluation result = evaluate(*model, test_data);
  std::printf("test loss %.4f  test accuracy %.2f%% (%lld images)\n", result.loss, 100.0 * result.accuracy,
              static_cast<long long>(test_data.images.size(0)));
  print_confusion_matrix(result.confusion);
  if (result.accuracy < o.target_accuracy) {
    std::printf("test accuracy %.4f is below the target %.4f\n", result.accuracy, o.target_accuracy);
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options options = parse_options(argc, argv);
    if (options.help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    return run(options);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: %s\nrun %s --help for the options\n", kProgram, e.what(), kProgram);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
  }
  return 2;
}
