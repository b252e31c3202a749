// LmdbReader on databases liblmdb writes, then damaged the ways partial copies and corrupt
// downloads damage them: a file one page short, a zero page size, a page of the wrong kind, a
// branch that points back at itself, duplicate-value databases, and every cut and many bit
// flips. Each ends in a ge::Error naming the file, or reads values that are within the file.
#include <lmdb.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "data/lmdb_reader.h"
#include "ganengine/error.h"
#include "support/lmdb_fixture.h"
#include "support/temp_dir.h"
#include "support/test_util.h"

using namespace ge;

namespace {

doctest::Contains has(const std::string& text) { return doctest::Contains(text.c_str()); }

// 600 keys: small values inline, every 7th value a large one on overflow pages, enough
// entries for a tree of depth 2.
std::vector<std::pair<std::string, std::string>> sample_items() {
  std::vector<std::pair<std::string, std::string>> items;
  for (int i = 0; i < 600; ++i) {
    char key[16];
    std::snprintf(key, sizeof key, "img%05d", i);
    const size_t size = i % 7 == 0 ? 9000 + size_t(i) : 20 + size_t(i % 50);
    std::string value(size, '\0');
    for (size_t b = 0; b < size; ++b) value[b] = static_cast<char>((b * 31 + size_t(i)) & 0xff);
    items.emplace_back(key, value);
  }
  return items;
}

std::string as_string(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Opens path and reads every value; "" on success, else the error's message.
std::string open_and_read_all(const std::string& path) {
  try {
    const LmdbReader reader(path);
    for (int64_t i = 0; i < reader.size(); ++i) reader.value(i);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

uint32_t page_size_of(const std::string& bytes) {
  uint32_t ps = 0;
  std::memcpy(&ps, bytes.data() + 40, 4);
  return ps;
}

}  // namespace

TEST_CASE("lmdb reader: keys in order and values inline and on overflow pages as liblmdb wrote them") {
  test::TempDir root("ge_lmdb");
  const auto items = sample_items();
  test::write_lmdb(root.file("db"), items);
  for (const std::string& path : {root.file("db"), root.file("db/data.mdb")}) {
    const LmdbReader reader(path);
    REQUIRE(reader.size() == int64_t(items.size()));
    for (size_t i = 0; i < items.size(); ++i) {
      CHECK(reader.key(int64_t(i)) == items[i].first);
      CHECK(as_string(reader.value(int64_t(i))) == items[i].second);
    }
  }
  test::write_lmdb(root.file("empty"), {});
  CHECK(LmdbReader(root.file("empty")).size() == 0);
}

TEST_CASE("lmdb reader: a file one page short or with a zero page size is an error naming it") {
  test::TempDir root("ge_lmdb");
  test::write_lmdb(root.file("db"), sample_items());
  const std::string data = root.file("db/data.mdb");
  const std::string good = test::read_file_bytes(data);
  const uint32_t ps = page_size_of(good);
  REQUIRE(ps >= 512);

  test::write_file_bytes(data, good.substr(0, good.size() - ps));
  CHECK_THROWS_WITH_AS(LmdbReader(root.file("db")), has(data + ": the database uses pages 0 to"), Error);

  std::string zero = good;
  std::memset(&zero[40], 0, 4);
  std::memset(&zero[ps + 40], 0, 4);
  test::write_file_bytes(data, zero);
  CHECK_THROWS_WITH_AS(LmdbReader(root.file("db")), has(data + ": meta page 0 gives a page size of 0 bytes"), Error);

  test::write_file_bytes(data, good.substr(0, 100));
  CHECK_THROWS_WITH_AS(LmdbReader(root.file("db")), has("too short for LMDB meta page 0"), Error);
}

TEST_CASE("lmdb reader: pages of the wrong kind a branch loop and duplicate values are errors naming the file") {
  test::TempDir root("ge_lmdb");
  test::write_lmdb(root.file("db"), sample_items());
  const std::string data = root.file("db/data.mdb");
  const std::string good = test::read_file_bytes(data);
  const uint32_t ps = page_size_of(good);
  // The current meta page names the root (offset 128 of a meta page); the root is a branch
  // page at this size.
  uint64_t txn0 = 0, txn1 = 0, root_page = 0;
  std::memcpy(&txn0, good.data() + 144, 8);
  std::memcpy(&txn1, good.data() + ps + 144, 8);
  std::memcpy(&root_page, good.data() + (txn1 > txn0 ? ps : 0) + 128, 8);
  const size_t root_at = size_t(root_page) * ps;
  REQUIRE((good[root_at + 10] & 0x01) != 0);

  std::string leaf_flags = good;
  leaf_flags[root_at + 10] = 0x02;  // the branch claims to be a leaf (liblmdb's IS_LEAF assertion)
  test::write_file_bytes(data, leaf_flags);
  CHECK_THROWS_WITH_AS(LmdbReader(root.file("db")), has(data + ": page " + std::to_string(root_page)), Error);

  std::string loop = good;  // the first child of the root becomes the root itself
  uint16_t first_node = 0;
  std::memcpy(&first_node, good.data() + root_at + 16, 2);
  std::memcpy(&loop[root_at + first_node], &root_page, 4);
  std::memset(&loop[root_at + first_node + 4], 0, 2);
  test::write_file_bytes(data, loop);
  CHECK_THROWS_WITH_AS(LmdbReader(root.file("db")), has("is reached twice in the B-tree"), Error);

  // A database of duplicate values (liblmdb's mdb_xcursor_init1 writes through NULL on a
  // damaged one): refused as a kind LSUN never uses.
  const std::string dups = root.file("dups");
  std::filesystem::create_directories(dups);
  MDB_env* env = nullptr;
  REQUIRE(mdb_env_create(&env) == 0);
  REQUIRE(mdb_env_open(env, dups.c_str(), 0, 0644) == 0);
  MDB_txn* txn = nullptr;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
  MDB_dbi dbi = 0;
  REQUIRE(mdb_dbi_open(txn, nullptr, MDB_DUPSORT, &dbi) == 0);
  for (const char* v : {"a", "b"}) {
    MDB_val key{1, const_cast<char*>("k")}, value{1, const_cast<char*>(v)};
    REQUIRE(mdb_put(txn, dbi, &key, &value, 0) == 0);
  }
  REQUIRE(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
  CHECK_THROWS_WITH_AS(LmdbReader{dups}, has(dups + "/data.mdb: the main database keeps duplicate values"), Error);
}

TEST_CASE("lmdb reader: every cut and random bit flips end in an error naming the file or in reads") {
  test::TempDir root("ge_lmdb");
  test::write_lmdb(root.file("db"), sample_items());
  const std::string data = root.file("db/data.mdb");
  const std::string good = test::read_file_bytes(data);
  const uint32_t ps = page_size_of(good);
  int errors = 0, opened = 0;
  auto attempt = [&](const std::string& bytes) {
    test::write_file_bytes(data, bytes);
    const std::string message = open_and_read_all(root.file("db"));
    if (message.empty()) {
      ++opened;
    } else {
      CHECK(message.find(root.file("db")) != std::string::npos);
      ++errors;
    }
  };
  for (size_t cut = 0; cut < good.size(); cut += cut < 2 * ps ? 97 : ps / 2) attempt(good.substr(0, cut));
  std::mt19937_64& random = test::rng();
  for (int trial = 0; trial < 400; ++trial) {
    std::string flipped = good;
    const size_t page = random() % (good.size() / ps);
    // Most flips land in page headers and node headers, where a parser goes wrong.
    const size_t within = random() % 2 ? random() % 64 : random() % ps;
    flipped[page * ps + within] ^= static_cast<char>(1 << (random() % 8));
    attempt(flipped);
  }
  CHECK(errors > 0);
  CHECK(opened > 0);  // flips in value bytes leave a readable database
}
