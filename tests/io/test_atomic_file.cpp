// Atomic file writes and ensure_directory: a target is replaced whole or not at all, a failed
// write leaves no temporary behind, and every error names the path, the OS error and a hint.
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>

#include "ganengine/error.h"
#include "io/atomic_file.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;
using doctest::Contains;
using ge::test::read_file_bytes;
using ge::test::TempDir;
using ge::test::write_file_bytes;

TEST_CASE("write_file_atomically: creates a file and replaces an existing one whole") {
  TempDir tmp("ge_atomic");
  const std::string path = tmp.file("out.bin");
  write_file_atomically(path, std::string("first version, rather long\n"));
  CHECK(read_file_bytes(path) == "first version, rather long\n");

  const std::string binary("a\0b\xff", 4);
  write_file_atomically(path, binary);
  CHECK(read_file_bytes(path) == binary);
  CHECK(tmp.entries() == std::vector<std::string>{"out.bin"});

  write_file_atomically(path, [](std::FILE* f) {
    for (int i = 0; i < 3; ++i) std::fprintf(f, "line %d\n", i);
  });
  CHECK(read_file_bytes(path) == "line 0\nline 1\nline 2\n");
  CHECK(tmp.entries() == std::vector<std::string>{"out.bin"});
}

TEST_CASE("write_file_atomically: a directory that cannot take the file fails clearly leaving nothing") {
  TempDir tmp("ge_atomic");

  SUBCASE("missing directory") {
    const std::string path = tmp.file("no_such_dir/out.bin");
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string("x")), Contains(path.c_str()), Error);
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string("x")), Contains("No such file or directory"), Error);
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string("x")), Contains("does the directory exist"), Error);
    CHECK(tmp.entries().empty());
  }
  SUBCASE("a regular file where the directory should be") {
    write_file_bytes(tmp.file("plain"), "not a directory");
    const std::string path = tmp.file("plain/out.bin");
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string("x")), Contains(path.c_str()), Error);
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string("x")), Contains("Not a directory"), Error);
    CHECK_THROWS_WITH_AS(AtomicFile{path}, Contains(path.c_str()), Error);
    CHECK(tmp.entries() == std::vector<std::string>{"plain"});
    CHECK(read_file_bytes(tmp.file("plain")) == "not a directory");
  }
  // A directory that cannot take the temporary, for root too (a read-only directory is no obstacle
  // to root, and CI runs as root): a directory already holds the temporary's name.
  SUBCASE("the temporary cannot be created in the directory") {
    const std::string path = tmp.file("out.bin");
    const std::string blocker = path + ".tmp." + std::to_string(::getpid());  // atomic_file.h's name
    std::filesystem::create_directory(blocker);
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string("x")), Contains(path.c_str()), Error);
    CHECK_THROWS_WITH_AS(write_file_atomically(path, std::string("x")), Contains("Is a directory"), Error);
    CHECK_THROWS_WITH_AS(AtomicFile{path}, Contains(blocker.c_str()), Error);
    CHECK(tmp.entries() == std::vector<std::string>{"out.bin.tmp." + std::to_string(::getpid())});
    CHECK(std::filesystem::is_empty(blocker));
  }
  SUBCASE("the target is a directory: the rename fails and the temporary goes") {
    const std::string dir = tmp.file("a_directory");
    std::filesystem::create_directory(dir);
    CHECK_THROWS_WITH_AS(write_file_atomically(dir, std::string("x")), Contains("renaming"), Error);
    CHECK(tmp.entries() == std::vector<std::string>{"a_directory"});
  }
}

// Root writes into a read-only directory, so as root (as CI runs) this case reports itself
// skipped; the case above covers a directory that cannot take the file for root too.
TEST_CASE("write_file_atomically: a read-only directory fails with Permission denied leaving nothing") {
  if (::geteuid() == 0) GE_SKIP_TEST("root writes into read-only directories");
  TempDir tmp("ge_atomic");
  const std::string dir = tmp.file("ro");
  REQUIRE(::mkdir(dir.c_str(), 0555) == 0);
  CHECK_THROWS_WITH_AS(write_file_atomically(dir + "/out.bin", std::string("x")), Contains("Permission denied"), Error);
  ::chmod(dir.c_str(), 0755);
  CHECK(std::filesystem::is_empty(dir));
}

TEST_CASE("write_file_atomically: a writer that throws midway leaves the old file intact") {
  TempDir tmp("ge_atomic");
  const std::string path = tmp.file("checkpoint.bin");
  write_file_atomically(path, std::string("the good old checkpoint"));

  auto failing_writer = [](std::FILE* f) {
    std::fputs("half of a new checkp", f);
    throw std::runtime_error("writer gave up");
  };
  // The writer's own exception comes through unchanged.
  CHECK_THROWS_WITH_AS(write_file_atomically(path, failing_writer), "writer gave up", std::runtime_error);
  CHECK(read_file_bytes(path) == "the good old checkpoint");
  CHECK(tmp.entries() == std::vector<std::string>{"checkpoint.bin"});
}

TEST_CASE("ensure_directory: mkdir -p with clear errors") {
  TempDir tmp("ge_atomic");
  const std::string nested = tmp.file("a/b/c");
  ensure_directory(nested);
  CHECK(std::filesystem::is_directory(nested));
  ensure_directory(nested);              // existing: fine
  ensure_directory(tmp.file("a/b/c/"));  // trailing slash: fine
  ensure_directory("");                  // the current directory
  write_file_atomically(nested + "/x", std::string("ok"));
  CHECK(read_file_bytes(nested + "/x") == "ok");

  write_file_bytes(tmp.file("a/file"), "x");
  CHECK_THROWS_WITH_AS(ensure_directory(tmp.file("a/file/d")), Contains("exists and is not a directory"), Error);
  CHECK_THROWS_WITH_AS(ensure_directory(tmp.file("a/file")), Contains(tmp.file("a/file").c_str()), Error);

  if (::geteuid() != 0) {  // root may write anywhere
    const std::string ro = tmp.file("ro");
    REQUIRE(::mkdir(ro.c_str(), 0555) == 0);
    CHECK_THROWS_WITH_AS(ensure_directory(ro), Contains("is not writable"), Error);
    CHECK_THROWS_WITH_AS(ensure_directory(ro + "/sub"), Contains("Permission denied"), Error);
    ::chmod(ro.c_str(), 0755);
  }
}
