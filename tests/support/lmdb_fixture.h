// Writes LMDB databases for the LSUN and cache tests.
#pragma once
#include <doctest/doctest.h>
#include <lmdb.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace ge::test {

// Adds key/value pairs to the LMDB database in dir (created if needed).
inline void write_lmdb(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& items) {
  std::filesystem::create_directories(dir);
  MDB_env* env = nullptr;
  REQUIRE(mdb_env_create(&env) == 0);
  REQUIRE(mdb_env_set_mapsize(env, size_t(64) << 20) == 0);
  REQUIRE(mdb_env_open(env, dir.c_str(), 0, 0644) == 0);
  MDB_txn* txn = nullptr;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
  MDB_dbi dbi = 0;
  REQUIRE(mdb_dbi_open(txn, nullptr, 0, &dbi) == 0);
  for (const auto& [k, v] : items) {
    MDB_val key{k.size(), const_cast<char*>(k.data())}, value{v.size(), const_cast<char*>(v.data())};
    REQUIRE(mdb_put(txn, dbi, &key, &value, 0) == 0);
  }
  REQUIRE(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

}  // namespace ge::test
