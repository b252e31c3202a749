// Seed files for each fuzz target: small valid files written by the same encoders and writers
// the tests use, so the fuzzer starts inside each format rather than at its magic bytes.
#include <lmdb.h>
#include <zlib.h>

#include <filesystem>
#include <map>

#include "data/cache_file_format.h"
#include "data/dataset_cache.h"
#include "fuzz/fuzz_readers.h"
#include "ganengine/data.h"
#include "ganengine/error.h"
#include "ganengine/safetensors.h"
#include "support/dataset_fixtures.h"
#include "support/image_files.h"
#include "support/temp_dir.h"

namespace ge::fuzz {
namespace {

namespace fs = std::filesystem;

// A scratch directory removed when the seeds are made.
struct Scratch {
  std::string dir = make_scratch_dir();
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

std::string safetensors_seed(const std::map<std::string, Tensor>& tensors,
                             const std::map<std::string, std::string>& metadata) {
  Scratch s;
  save_safetensors(s.dir + "/t.safetensors", tensors, metadata);
  return test::read_file_bytes(s.dir + "/t.safetensors");
}

std::string training_state_seed() {
  Scratch s;
  save_training_state(s.dir + "/state.safetensors", fuzz_trainer(), Tensor::zeros({2, 4, 1, 1}, DType::F32), {1, 2, 3},
                      fuzz_run_identity());
  return test::read_file_bytes(s.dir + "/state.safetensors");
}

// An LMDB data file of `count` keys, every `big_every`-th value large enough for overflow pages.
std::string lmdb_seed(int count, int big_every) {
  Scratch s;
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
  bool ok = mdb_env_create(&env) == 0 && mdb_env_set_mapsize(env, size_t(16) << 20) == 0 &&
            mdb_env_open(env, s.dir.c_str(), 0, 0644) == 0 && mdb_txn_begin(env, nullptr, 0, &txn) == 0 &&
            mdb_dbi_open(txn, nullptr, 0, &dbi) == 0;
  for (int i = 0; ok && i < count; ++i) {
    std::string key = "key" + std::to_string(1000 + i);
    std::string value(big_every > 0 && i % big_every == 0 ? 5000 : 16, static_cast<char>('a' + i % 26));
    MDB_val k{key.size(), key.data()}, v{value.size(), value.data()};
    ok = mdb_put(txn, dbi, &k, &v, 0) == 0;
  }
  ok = ok && mdb_txn_commit(txn) == 0;
  if (env) mdb_env_close(env);
  if (!ok) fail("fuzz seeds: liblmdb could not write a database");
  return test::read_file_bytes(s.dir + "/data.mdb");
}

// A numpy uint8 array of shape (2, 3) under b'data' in a protocol-2 pickle, laid out as
// Python 2's cPickle writes a CIFAR-10 batch.
std::string pickle_seed() {
  static const char kBytes[] =
      "\x80\x02}q\x00U\x04"
      "dataq\x01"
      "cnumpy.core.multiarray\n_reconstruct\nq\x02"
      "cnumpy\nndarray\nq\x03K\x00\x85U\x01"
      "b\x87Rq\x04(K\x01K\x02K\x03\x86"
      "cnumpy\ndtype\nU\x02u1K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb\x89U\x06"
      "abcdeftbs.";
  return std::string(kBytes, sizeof kBytes - 1);
}

// A TIFF of the pattern as the tests write one, and a PNG with an alpha channel.
std::vector<std::string> image_seeds(const std::string& format) {
  const DecodedImage rgb = test::pattern_image(12, 9, 3), grey = test::pattern_image(12, 9, 1);
  if (format == "jpeg")
    return {test::jpeg_bytes(rgb), test::jpeg_bytes(grey), test::jpeg_bytes(rgb, 80, /*progressive=*/true)};
  if (format == "png")
    return {test::png_bytes(rgb), test::png_bytes(grey), test::png_bytes(test::pattern_image(5, 4, 4))};
  if (format == "webp") return {test::webp_bytes(rgb, true), test::webp_bytes(rgb, false)};
  if (format == "tiff") return {test::tiff_bytes(rgb)};
  if (format == "bmp") return {test::bmp_bytes(rgb), test::bmp_bytes(grey)};
  if (format == "pnm") return {test::pnm_bytes(rgb), test::pnm_bytes(grey)};
  if (format == "gif") return {test::grey_gif_bytes(12, 9), test::grey_gif_bytes(30, 20)};
  return {};
}

// The cache file the dataset_cache target's source builds for itself.
std::string dataset_cache_seed() {
  Scratch s;
  const CachedDataset cached(std::make_unique<FakeDataset>(3, 4, 3, 7), s.dir, 1);
  return test::read_file_bytes(cached.path());
}

}  // namespace

std::vector<std::string> seed_files(const Target& t) {
  const std::string name = t.name;
  if (name == "safetensors") {
    std::map<std::string, Tensor> tensors;
    tensors["w"] = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3}, DType::F32);
    tensors["h"] = Tensor::from_floats({0.5f, -1}, {2}, DType::F16);
    tensors["n"] = Tensor::zeros({}, DType::I64);
    return {safetensors_seed(tensors, {{"format", "pt"}}), safetensors_seed({}, {}), training_state_seed()};
  }
  if (name == "training_state") return {training_state_seed()};
  // torch.save's own files (tools/make_pth_goldens.py): the ZIP format, its DataParallel names,
  // the legacy format.
  if (name == "pth") {
    std::vector<std::string> goldens;
    for (const char* golden :
         {"pth_netG_nc1.pth", "pth_netG_nc1_dataparallel.pth", "pth_netG_nc3_legacy.pth", "pth_netD_nc3.pth"})
      goldens.push_back(test::read_file_bytes(std::string(GE_TEST_DATA_DIR) + "/" + golden));
    return goldens;
  }
  if (name == "json")
    return {"{\"a\": [1, 2.5e3, -0, true, false, null], \"b\": {\"c\": \"\\u00e9\\n\"}}", "[]", "\"x\"", "-12"};
  if (name == "idx") {
    std::vector<uint8_t> pixels(2 * 3 * 4);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 9);
    const std::string raw = test::idx_images(2, 3, 4, pixels);
    return {raw, test::gzip_bytes(raw)};
  }
  if (name == "idx_gz") return {test::idx_images(2, 3, 4, std::vector<uint8_t>(24, 7))};
  if (name == "cifar10_binary") return {std::string(3073, '\x01')};
  if (name == "cifar10_pickle") return {pickle_seed()};
  if (name == "lmdb") return {lmdb_seed(5, 0), lmdb_seed(150, 40)};
  if (name == "dataset_cache") return {dataset_cache_seed()};
  if (name == "conv_algo_cache")
    return {
        "# ganengine cuDNN algorithm cache 1: <key> <algo> <math type> <workspace bytes> [<engine>]\n"
        "k 1 0 4096\nfwd|f32|nchw 6 1 0 eng0_k2=1\n"};
  if (name == "metrics")
    return {
        "{\"step\": 0, \"epoch\": 0, \"Loss_D\": 1.38629436, \"Loss_G\": 0.693147182}\n"
        "{\"step\": 1, \"epoch\": 0, \"Loss_D\": 1.2, \"Loss_G\": 0.7}\n",
        "{\"step\": 7}\nnot a record\n{\"step\": -3}\n"};
  if (name == "cli_flags")  // valid command lines; tests/fuzz_regressions/cli_flags/ holds refused ones
    return {cli_flags_input({{"batchSize", "64"}, {"imageSize", "64"}, {"nz", "100"}, {"lr", "0.0002"}}, false),
            cli_flags_input({{"batch-size", "128"},
                             {"image-size", "0x20"},
                             {"ngf", "32"},
                             {"ndf", "48"},
                             {"beta1", "0.9"},
                             {"manualSeed", "18446744073709551615"},
                             {"niter", "3"}},
                            true),
            cli_flags_input({{"workers", "0"},
                             {"threads", "4"},
                             {"ngpu", "1"},
                             {"loss-scale", "128"},
                             {"min-loss-scale", "1e-3"},
                             {"log-interval", "10"},
                             {"sample-interval", "500"}},
                            true),
            cli_flags_input({{"max-steps", "-1"},
                             {"checkpoint-every", "90s"},
                             {"ema-decay", ".999"},
                             {"debug-force-overflow", "3:0,5:2"},
                             {"profile-steps", "10:14"},
                             {"manual-seed", "7"},
                             {"loss-scale", "dynamic"}},
                            false),
            cli_flags_input({{"batchSize", "16777216"},
                             {"nz", "1"},
                             {"imageSize", "16"},
                             {"max-steps", "0"},
                             {"checkpoint-every", "2h"},
                             {"lr", "1"},
                             {"beta1", "0"}},
                            true)};
  return image_seeds(name);
}

}  // namespace ge::fuzz
