// --download against a local HTTP server on 127.0.0.1 (never any other address): fake CIFAR
// tarballs and gzipped IDX files built here, served with right and wrong MD5s, HTTP errors,
// mirror fallback and the mirror overrides; after every failure nothing half-written is left.
// Also MD5 itself (RFC 1321's test suite) and the official tables.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "data/download.h"
#include "data/md5.h"
#include "ganengine/error.h"
#include "ganengine/mnist_dataset.h"
#include "support/dataset_fixtures.h"
#include "support/local_http_server.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;

namespace {

// The error message contains this text.
doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

using Names = std::vector<std::string>;

std::string batch_bytes(int b) {
  return "fake batch " + std::to_string(b) + std::string(size_t(700 + b), char('a' + b));
}

// A small stand-in for cifar-10-binary.tar.gz, laid out like the release.
std::string fake_cifar_tarball(int batches = 5) {
  test::TarBuilder tar;
  tar.add_directory("cifar-10-batches-bin/");
  for (int b = 1; b <= batches; ++b)
    tar.add_file("cifar-10-batches-bin/data_batch_" + std::to_string(b) + ".bin", batch_bytes(b));
  tar.add_file("cifar-10-batches-bin/test_batch.bin", "test");
  tar.add_file("cifar-10-batches-bin/batches.meta.txt", "airplane\nautomobile\n");
  tar.add_symlink("cifar-10-batches-bin/link", "/etc/passwd");  // skipped, never created
  return test::gzip_bytes(tar.bytes());
}

// The official cifar10 plan, its MD5 replaced by that of the bytes the test serves.
DownloadPlan cifar_plan_for(const std::string& served) {
  DownloadPlan plan = official_download_plan("cifar10");
  plan.files[0].md5 = md5_hex(served);
  return plan;
}

// A served directory and a destination directory, with the server on the first.
struct Fixture {
  test::TempDir served{"ge_served"};
  test::TempDir dataroot{"ge_dataroot"};
  test::LocalHttpServer server{served.dir.string()};
  Fixture() { ::unsetenv(kDatasetMirrorVariable); }
  ~Fixture() { ::unsetenv(kDatasetMirrorVariable); }
};

}  // namespace

TEST_CASE("md5: the RFC 1321 test suite and a real file") {
  const std::vector<std::pair<std::string, std::string>> suite = {
      {"", "d41d8cd98f00b204e9800998ecf8427e"},
      {"a", "0cc175b9c0f1b6a831c399e269772661"},
      {"abc", "900150983cd24fb0d6963f7d28e17f72"},
      {"message digest", "f96b697d7cb7938d525a2f31aaf161d0"},
      {"abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"},
      {"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"},
      {"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
       "57edf4a22be3c955ac49da2e2107b67a"}};
  for (const auto& entry : suite) {
    const std::string& text = entry.first;
    const std::string& digest = entry.second;
    CAPTURE(text);
    CHECK(md5_hex(text) == digest);
    Md5 pieces;  // the same bytes fed in uneven pieces
    for (size_t i = 0; i < text.size(); i += 7) pieces.update(text.data() + i, std::min<size_t>(7, text.size() - i));
    CHECK(pieces.hex_digest() == digest);
  }
  // md5sum of the Debian package's file (a different gzip than the upstream one).
  CHECK(md5_of_file("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz") ==
        "cf8536b0aa1a6ac5fa3f23001093305c");
  CHECK_THROWS_WITH_AS(md5_of_file("/nonexistent/file"), has("/nonexistent/file"), Error);
}

TEST_CASE("official download plans: the URLs and MD5s torchvision uses") {
  const DownloadPlan cifar = official_download_plan("cifar10");
  CHECK(cifar.mirrors == Names{"https://www.cs.toronto.edu/~kriz/"});
  REQUIRE(cifar.files.size() == 1);
  CHECK(cifar.files[0].name == "cifar-10-binary.tar.gz");
  CHECK(cifar.files[0].md5 == "c32a1d4ab5d03f1284b67883e8d87530");
  CHECK(cifar.extract);

  const DownloadPlan mnist = official_download_plan("mnist");
  CHECK(mnist.mirrors == Names{"https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"});
  CHECK(mnist.folder == "MNIST/raw");
  CHECK(mnist.files[0].name == "train-images-idx3-ubyte.gz");
  CHECK(mnist.files[0].md5 == "f68b3c2dcbeaaa9fbdd348bbdeb94873");
  CHECK_FALSE(mnist.extract);

  const DownloadPlan fashion = official_download_plan("fashion-mnist");
  CHECK(fashion.mirrors == Names{"http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"});
  CHECK(fashion.folder == "FashionMNIST/raw");
  CHECK(fashion.files[0].md5 == "8d4fb7e6c68d591d4c3dfef9ec88bf0d");

  CHECK(dataset_has_download("cifar10"));
  CHECK_FALSE(dataset_has_download("lsun"));
  CHECK_THROWS_WITH_AS(download_dataset("lsun", "/nonexistent"), has("no download for --dataset 'lsun'"), Error);
}

TEST_CASE("download cifar10: fetched and verified and unpacked then left alone") {
  Fixture f;
  const std::string tarball = fake_cifar_tarball();
  test::write_file_bytes(f.served.file("cifar-10-binary.tar.gz"), tarball);
  const std::string root = f.dataroot.file("data");  // created by the download

  download_dataset(cifar_plan_for(tarball), root, f.server.base_url());
  CHECK(f.server.requests() == 1);
  for (int b = 1; b <= 5; ++b)
    CHECK(test::read_file_bytes(root + "/cifar-10-batches-bin/data_batch_" + std::to_string(b) + ".bin") ==
          batch_bytes(b));
  CHECK(test::read_file_bytes(root + "/cifar-10-batches-bin/batches.meta.txt") == "airplane\nautomobile\n");
  CHECK_FALSE(std::filesystem::exists(root + "/cifar-10-batches-bin/link"));
  CHECK(test::read_file_bytes(root + "/cifar-10-binary.tar.gz") == tarball);  // kept, as torchvision keeps it
  // Nothing else: no .part, no scratch directory.
  Names entries;
  for (const auto& e : std::filesystem::directory_iterator(root)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  CHECK(entries == Names{"cifar-10-batches-bin", "cifar-10-binary.tar.gz"});

  download_dataset(cifar_plan_for(tarball), root, f.server.base_url());  // present: no request
  CHECK(f.server.requests() == 1);
}

TEST_CASE("download with a wrong md5: the error names both sums and nothing is left") {
  Fixture f;
  const std::string tarball = fake_cifar_tarball();
  test::write_file_bytes(f.served.file("cifar-10-binary.tar.gz"), tarball);
  DownloadPlan plan = cifar_plan_for(tarball);
  plan.files[0].md5 = "0123456789abcdef0123456789abcdef";
  const std::string root = f.dataroot.dir.string();
  const std::string expected = "MD5 mismatch: expected 0123456789abcdef0123456789abcdef, got " + md5_hex(tarball);
  CHECK_THROWS_WITH_AS(download_dataset(plan, root, f.server.base_url()), has(expected), Error);
  CHECK_THROWS_WITH_AS(download_dataset(plan, root, f.server.base_url()),
                       has(f.server.base_url() + "cifar-10-binary.tar.gz"), Error);
  CHECK(f.dataroot.entries().empty());
}

TEST_CASE("download HTTP errors: the status is named and nothing is left") {
  Fixture f;
  const DownloadPlan plan = cifar_plan_for("whatever");
  const std::string root = f.dataroot.dir.string();
  CHECK_THROWS_WITH_AS(download_dataset(plan, root, f.server.base_url()), has("HTTP status 404"), Error);
  CHECK_THROWS_WITH_AS(download_dataset(plan, root, f.server.base_url() + "status/500/"), has("HTTP status 500"),
                       Error);
  CHECK_THROWS_WITH_AS(download_dataset(plan, root, f.server.base_url()), has(kDatasetMirrorVariable), Error);
  CHECK(f.dataroot.entries().empty());
}

TEST_CASE("download mirrors: fallback in order and the environment and parameter overrides") {
  Fixture f;
  const std::string tarball = fake_cifar_tarball();
  test::write_file_bytes(f.served.file("cifar-10-binary.tar.gz"), tarball);
  DownloadPlan plan = cifar_plan_for(tarball);

  SUBCASE("the second mirror serves when the first fails") {
    plan.mirrors = {f.server.base_url() + "status/503/", f.server.base_url()};
    download_dataset(plan, f.dataroot.dir.string());
    CHECK(f.server.requests() == 2);
    CHECK(std::filesystem::exists(f.dataroot.file("cifar-10-batches-bin/data_batch_5.bin")));
  }
  SUBCASE("GANENGINE_DATASET_MIRROR replaces the plan's mirrors") {
    plan.mirrors = {f.server.base_url() + "status/410/"};
    ::setenv(kDatasetMirrorVariable, f.server.base_url().c_str(), 1);
    download_dataset(plan, f.dataroot.dir.string());
    CHECK(f.server.requests() == 1);
    CHECK(std::filesystem::exists(f.dataroot.file("cifar-10-batches-bin/data_batch_1.bin")));
  }
  SUBCASE("the mirror parameter wins over the environment") {
    ::setenv(kDatasetMirrorVariable, (f.server.base_url() + "status/410/").c_str(), 1);
    const std::string no_slash = f.server.base_url().substr(0, f.server.base_url().size() - 1);
    download_dataset(plan, f.dataroot.dir.string(), no_slash);
    CHECK(f.server.requests() == 1);
    CHECK(std::filesystem::exists(f.dataroot.file("cifar-10-batches-bin/data_batch_1.bin")));
  }
}

TEST_CASE("download cifar10 bad archives: nothing unpacked is left behind") {
  Fixture f;
  const std::string root = f.dataroot.dir.string();
  std::string tarball;
  std::string expected;
  SUBCASE("truncated gzip") {
    const std::string whole = fake_cifar_tarball();
    tarball = whole.substr(0, whole.size() * 2 / 3);
    expected = "the gzip data is corrupt or truncated";
  }
  SUBCASE("not a tar inside the gzip") {
    tarball = test::gzip_bytes(std::string(2048, 'x'));
    expected = "corrupt header";
  }
  SUBCASE("an entry climbing out of the target") {
    test::TarBuilder tar;
    tar.add_file("cifar-10-batches-bin/data_batch_1.bin", "one");
    tar.add_file("../escaped.bin", "evil");
    tarball = test::gzip_bytes(tar.bytes());
    expected = "refusing entry '../escaped.bin'";
  }
  SUBCASE("a batch missing from the archive") {
    tarball = fake_cifar_tarball(4);
    expected = "missing:\n  cifar-10-batches-bin/data_batch_5.bin";
  }
  test::write_file_bytes(f.served.file("cifar-10-binary.tar.gz"), tarball);
  CAPTURE(expected);
  CHECK_THROWS_WITH_AS(download_dataset(cifar_plan_for(tarball), root, f.server.base_url()), has(expected), Error);
  // The verified archive stays (its MD5 matched); no batch, no scratch directory.
  CHECK(f.dataroot.entries() == Names{"cifar-10-binary.tar.gz"});
  CHECK_FALSE(std::filesystem::exists(f.dataroot.dir.parent_path() / "escaped.bin"));
}

TEST_CASE("download mnist: the gz lands in MNIST/raw and the dataset reads it") {
  Fixture f;
  std::vector<uint8_t> pixels(2 * 28 * 28);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i % 251);
  const std::string gz = test::gzip_bytes(test::idx_images(2, 28, 28, pixels));
  test::write_file_bytes(f.served.file("train-images-idx3-ubyte.gz"), gz);
  DownloadPlan plan = official_download_plan("mnist");
  plan.files[0].md5 = md5_hex(gz);
  const std::string root = f.dataroot.dir.string();

  // Leftovers of an interrupted run: a stale .part and a damaged file are both replaced.
  std::filesystem::create_directories(f.dataroot.dir / "MNIST/raw");
  test::write_file_bytes(f.dataroot.file("MNIST/raw/train-images-idx3-ubyte.gz.part"), "stale");
  plan.present_when.clear();  // so that the damaged file is looked at, not taken as present
  test::write_file_bytes(f.dataroot.file("MNIST/raw/train-images-idx3-ubyte.gz"), "damaged");

  download_dataset(plan, root, f.server.base_url());
  CHECK(test::read_file_bytes(f.dataroot.file("MNIST/raw/train-images-idx3-ubyte.gz")) == gz);
  CHECK_FALSE(std::filesystem::exists(f.dataroot.file("MNIST/raw/train-images-idx3-ubyte.gz.part")));
  const MnistDataset ds(root, 28, MnistVariant::Mnist);
  CHECK(ds.size() == 2);

  download_dataset(plan, root, f.server.base_url());  // verified by its MD5: not fetched again
  CHECK(f.server.requests() == 1);
}

TEST_CASE("download fashion-mnist into a fresh dataroot with the official plan shape") {
  Fixture f;
  const std::string gz = test::gzip_bytes(test::idx_images(1, 28, 28, std::vector<uint8_t>(784, 9)));
  test::write_file_bytes(f.served.file("train-images-idx3-ubyte.gz"), gz);
  DownloadPlan plan = official_download_plan("fashion-mnist");
  plan.files[0].md5 = md5_hex(gz);
  download_dataset(plan, f.dataroot.file("new/root"), f.server.base_url());
  const MnistDataset ds(f.dataroot.file("new/root"), 28, MnistVariant::FashionMnist);
  CHECK(ds.path() == f.dataroot.file("new/root/FashionMNIST/raw/train-images-idx3-ubyte.gz"));
  download_dataset(plan, f.dataroot.file("new/root"), f.server.base_url());  // present: nothing fetched
  CHECK(f.server.requests() == 1);
}
