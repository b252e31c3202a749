// The fuzz targets' reads. Each mirrors what training does with such a file: open it, then
// touch every record the open promised (LMDB values, cached images), since a reader that
// only fails late must fail cleanly too.
#include "fuzz/fuzz_readers.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

#include "cli/train_flags.h"
#include "core/conv_algo_cache.h"
#include "data/cifar10_pickle.h"
#include "data/dataset_cache.h"
#include "data/idx_images.h"
#include "data/image_decode.h"
#include "data/lmdb_reader.h"
#include "data/read_only_file.h"
#include "ganengine/cifar10_dataset.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/safetensors.h"
#include "ganengine/trainer.h"
#include "ganengine/training_state.h"
#include "io/json.h"
#include "io/pth_reader.h"
#include "support/dataset_fixtures.h"
#include "support/temp_dir.h"
#include "train/metrics_file.h"

namespace ge::fuzz {
namespace {

namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("fuzz: cannot write ", path);
}

void read_safetensors(const std::string&, const std::string& path) { load_safetensors(path); }

void read_pth(const std::string&, const std::string& path) { load_pth_state_dict(path); }

void read_json(const std::string&, const std::string& path) { json::parse(test::read_file_bytes(path)); }

void read_idx(const std::string&, const std::string& path) { read_idx_images(path); }

// The input is the IDX file itself, gzipped here, so mutations reach the IDX layout behind a
// valid gzip layer (the ratio bound and the streamed reads).
void read_idx_gz(const std::string&, const std::string& path) {
  write_text(path, test::gzip_bytes(test::read_file_bytes(path)));
  read_idx_images(path);
}

void read_pickle(const std::string&, const std::string& path) {
  const ReadOnlyFile file(path);
  locate_pickled_cifar_data(file, 2, 3);  // small shapes, so small valid seeds exist
}

void read_cifar10_binary(const std::string& dir, const std::string& path) {
  for (int b = 2; b <= 5; ++b) {  // the other four batches: the same file
    const fs::path other = fs::path(path).parent_path() / ("data_batch_" + std::to_string(b) + ".bin");
    if (!fs::exists(fs::symlink_status(other))) fs::create_symlink(fs::path(path).filename(), other);
  }
  const Cifar10Dataset data(dir, 32);
  std::vector<uint8_t> image(32 * 32 * 3);
  data.read(0, image.data());
  data.read(data.size() - 1, image.data());
}

void read_lmdb(const std::string&, const std::string& path) {
  const LmdbReader reader(path);
  for (int64_t i = 0; i < reader.size(); ++i) {
    reader.printable_key(i);
    reader.value(i);
  }
}

void read_image(const std::string&, const std::string& path) {
  probe_image(path);
  decode_image(path);
}

// The cache of a fixed small source: the input stands where that source's cache file goes;
// the open either trusts it (then every image is read, each checked against its checksum)
// or rebuilds it.
void read_dataset_cache(const std::string& dir, const std::string& path) {
  auto source = std::make_unique<FakeDataset>(3, 4, 3, 7);
  const std::string cache_dir = dir + "/cache";
  fs::create_directories(cache_dir);
  const std::string name = CachedDataset::file_name(source->name(), source->image_size(), source->fingerprint());
  fs::rename(path, cache_dir + "/" + name);
  const CachedDataset cached(std::move(source), cache_dir, 1);
  std::vector<uint8_t> image(4 * 4 * 3);
  for (int64_t i = 0; i < cached.size(); ++i) cached.read(i, image.data());
}

void read_conv_algo_cache(const std::string&, const std::string& path) {
  ConvAlgoCache cache(path);
  cache.find("k");
}

// metrics.jsonl as a resume reads it: every record kept (its step below any state's count).
void read_metrics(const std::string&, const std::string& path) {
  keep_metrics_records(test::read_file_bytes(path), std::numeric_limits<int64_t>::max());
}

// `ganengine train`'s flag parsing on the command line the input encodes (cli_flags_input):
// "train", then for each value word its flag, as "--flag=value" or as "--flag" "value".
void read_cli_flags(const std::string&, const std::string& path) {
  const std::string bytes = test::read_file_bytes(path);
  std::vector<std::string> words;
  size_t start = 0;
  for (size_t i = 0; i <= bytes.size(); ++i)
    if (i == bytes.size() || bytes[i] == '\n' || bytes[i] == '\0') {
      words.push_back(bytes.substr(start, i - start));
      start = i + 1;
    }
  const std::vector<std::string>& flags = cli_numeric_flags();
  const std::string& chooser = words[0];
  std::vector<std::string> args = {"train"};
  for (size_t i = 1; i < words.size(); ++i) {
    const size_t c = chooser.empty() ? i : static_cast<unsigned char>(chooser[(i - 1) % chooser.size()]);
    const std::string flag = "--" + flags[c % flags.size()];
    if ((c / flags.size()) % 2 == 0) {
      args.push_back(flag + "=" + words[i]);
    } else {
      args.push_back(flag);
      args.push_back(words[i]);
    }
  }
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  cli::parse_train_flags(static_cast<int>(argv.size()), argv.data());
}

void read_training_state(const std::string&, const std::string& path) {
  DcganTrainer& trainer = fuzz_trainer();
  Tensor noise = Tensor::zeros({2, 4, 1, 1}, DType::F32);
  load_training_state(path, trainer, noise, fuzz_run_identity());
}

}  // namespace

const std::vector<std::string>& cli_numeric_flags() {
  // Every flag of `train` that takes a number or numbers, and the other spellings of some.
  static const std::vector<std::string> all = {"workers",
                                               "batchSize",
                                               "batch-size",
                                               "imageSize",
                                               "image-size",
                                               "nz",
                                               "ngf",
                                               "ndf",
                                               "niter",
                                               "lr",
                                               "beta1",
                                               "ngpu",
                                               "manualSeed",
                                               "manual-seed",
                                               "threads",
                                               "loss-scale",
                                               "min-loss-scale",
                                               "log-interval",
                                               "sample-interval",
                                               "max-steps",
                                               "checkpoint-every",
                                               "ema-decay",
                                               "debug-force-overflow",
                                               "profile-steps"};
  return all;
}

std::string cli_flags_input(const std::vector<std::pair<std::string, std::string>>& flags, bool equals) {
  const std::vector<std::string>& names = cli_numeric_flags();
  std::string chooser, values;
  for (const auto& [flag, value] : flags) {
    const auto it = std::find(names.begin(), names.end(), flag);
    if (it == names.end()) fail("fuzz: '", flag, "' is no numeric flag of train");
    size_t c = static_cast<size_t>(it - names.begin()) + (equals ? 0 : names.size());
    if (c == '\n' || c == 0) c += 2 * names.size();  // the separators cannot choose
    chooser += static_cast<char>(c);
    values += "\n" + value;
  }
  return chooser + values;
}

DcganTrainer& fuzz_trainer() {
  static DcganTrainer* trainer = [] {
    TrainerConfig cfg;
    cfg.net.image_size = 16;
    cfg.net.nz = 4;
    cfg.net.ngf = cfg.net.ndf = 2;
    return new DcganTrainer(cfg);  // lives for the process, as the fuzzer does
  }();
  return *trainer;
}

RunIdentity fuzz_run_identity() { return RunIdentity{"fuzz", "O0", "f16", 2, 16, 4, 2, 2, 3, 1}; }

const std::vector<Target>& targets() {
  static const std::vector<Target> all = {
      {"safetensors", "model.safetensors", read_safetensors},
      {"pth", "netG.pth", read_pth},
      {"training_state", "training_state.safetensors", read_training_state},
      {"json", "doc.json", read_json},
      {"idx", "train-images-idx3-ubyte", read_idx},
      {"idx_gz", "train-images-idx3-ubyte.gz", read_idx_gz},
      {"cifar10_binary", "cifar-10-batches-bin/data_batch_1.bin", read_cifar10_binary},
      {"cifar10_pickle", "data_batch_1", read_pickle},
      {"lmdb", "data.mdb", read_lmdb},
      {"jpeg", "image.jpg", read_image},
      {"png", "image.png", read_image},
      {"webp", "image.webp", read_image},
      {"tiff", "image.tif", read_image},
      {"bmp", "image.bmp", read_image},
      {"pnm", "image.ppm", read_image},
      {"gif", "image.gif", read_image},
      {"dataset_cache", "input.gecache", read_dataset_cache},
      {"conv_algo_cache", "cudnn_algos.txt", read_conv_algo_cache},
      {"metrics", "metrics.jsonl", read_metrics},
      {"cli_flags", "flags.txt", read_cli_flags},
  };
  return all;
}

const Target& target(const std::string& name) {
  for (const Target& t : targets())
    if (name == t.name) return t;
  fail("fuzz: no target named '", name, "'");
}

std::string make_scratch_dir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/ge_fuzz_XXXXXX";
  if (!::mkdtemp(pattern.data())) fail("fuzz: cannot create a directory like ", pattern);
  return pattern;
}

std::string run_target(const Target& t, const std::string& dir, const uint8_t* data, size_t size) {
  // Each input starts from an empty directory: nothing a previous input left can matter.
  for (const auto& entry : fs::directory_iterator(dir)) fs::remove_all(entry.path());
  const std::string path = dir + "/" + t.file_name;
  fs::create_directories(fs::path(path).parent_path());
  write_text(path, std::string(reinterpret_cast<const char*>(data), size));
  try {
    t.read(dir, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace ge::fuzz
