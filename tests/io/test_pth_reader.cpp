// Reading torch.save's .pth files: the goldens (tools/make_pth_goldens.py) against their
// safetensors twins, byte for byte; the same state_dict rezipped with deflate; every truncation
// and byte flip of a golden ending in a clean ge::Error; and the messages for files that are
// not state_dicts.
#include <zlib.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ganengine/error.h"
#include "ganengine/safetensors.h"
#include "ganengine/state_dict.h"
#include "io/pickle_reader.h"
#include "io/pth_reader.h"
#include "io/zip_reader.h"
#include "support/temp_dir.h"
#include "support/test_util.h"
#include "support/trainer_compare.h"

using namespace ge;

namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;

void put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>((v >> 8) & 0xff));
}
void put32(std::string& s, uint32_t v) {
  put16(s, v & 0xffff);
  put16(s, v >> 16);
}

std::string raw_deflate(const std::string& data) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(data.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A ZIP archive of the entries, stored or deflated (APPNOTE.TXT 4.3.7, 4.3.12, 4.3.16).
std::string zip_of(const Entries& entries, bool deflate = false) {
  std::string out, directory;
  for (const auto& entry : entries) {
    const std::string& name = entry.first;  // named, not bound: the lambda below captures them
    const std::string& data = entry.second;
    const uint32_t crc =
        static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
    const std::string packed = deflate ? raw_deflate(data) : data;
    const auto offset = static_cast<uint32_t>(out.size());
    auto common = [&](std::string& s) {
      put16(s, 20);               // version needed
      put16(s, 0);                // flags
      put16(s, deflate ? 8 : 0);  // method
      put32(s, 0);                // time, date
      put32(s, crc);
      put32(s, static_cast<uint32_t>(packed.size()));
      put32(s, static_cast<uint32_t>(data.size()));
      put16(s, static_cast<uint32_t>(name.size()));
      put16(s, 0);  // extra
    };
    put32(out, 0x04034b50);
    common(out);
    out += name + packed;
    put32(directory, 0x02014b50);
    put16(directory, 20);  // version made by
    common(directory);
    put16(directory, 0);  // comment
    put16(directory, 0);  // disk
    put16(directory, 0);  // internal attributes
    put32(directory, 0);  // external attributes
    put32(directory, offset);
    directory += name;
  }
  const auto directory_offset = static_cast<uint32_t>(out.size());
  out += directory;
  put32(out, 0x06054b50);
  put16(out, 0);
  put16(out, 0);
  put16(out, static_cast<uint32_t>(entries.size()));
  put16(out, static_cast<uint32_t>(entries.size()));
  put32(out, static_cast<uint32_t>(directory.size()));
  put32(out, directory_offset);
  put16(out, 0);
  return out;
}

// The golden's entries, in order, read back with our reader.
Entries entries_of(const std::string& bytes) {
  const ZipArchive zip(bytes, "golden");
  Entries out;
  for (const ZipEntry& e : zip.entries()) out.emplace_back(e.name, zip.read(e));
  return out;
}

std::string error_of(const std::string& bytes) {
  try {
    parse_pth_state_dict(bytes, "model.pth");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string b(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

// BINUNICODE: a 4-byte little-endian length, then the text.
std::string unicode(const std::string& text) {
  std::string out = "X";
  put32(out, static_cast<uint32_t>(text.size()));
  return out + text;
}

// A state_dict pickle whose only entry 'w' is a 1-D tensor of `numel` elements on a storage of
// `storage_type`, as torch.save pickles one.
std::string one_tensor_pickle(const std::string& storage_type, const std::string& key, int numel) {
  return b({0x80, 2}) + "ccollections\nOrderedDict\n" + b({'q', 0}) + ")R" + b({'q', 1}) + "(" + unicode("w") +
         "ctorch._utils\n_rebuild_tensor_v2\n" + b({'q', 2}) + "((" + unicode("storage") + "ctorch\n" + storage_type +
         "\n" + unicode(key) + unicode("cpu") + b({'K', numel}) + "tQ" +
         b({'K', 0, 'K', numel, 0x85, 'K', 1, 0x85, 0x89, 'h', 0}) + ")RtRu.";
}

}  // namespace

TEST_CASE("pth reader: the ZIP goldens hold their safetensors twins' tensors") {
  test::expect_same_tensors(load_pth_state_dict(test::data_path("pth_netG_nc1.pth")),
                            load_safetensors(test::data_path("pth_netG_nc1.safetensors")).tensors);
  test::expect_same_tensors(load_pth_state_dict(test::data_path("pth_netD_nc3.pth")),
                            load_safetensors(test::data_path("pth_netD_nc3.safetensors")).tensors);
  const auto sd = load_pth_state_dict(test::data_path("pth_netG_nc1.pth"));
  CHECK(sd.at("main.1.num_batches_tracked").dtype() == DType::I64);
  CHECK(sd.at("main.1.num_batches_tracked").rank() == 0);
  CHECK(sd.at("main.0.weight").shape() == Shape{8, 8, 4, 4});
}

TEST_CASE("pth reader: the legacy format golden holds its twin's tensors") {
  test::expect_same_tensors(load_pth_state_dict(test::data_path("pth_netG_nc3_legacy.pth")),
                            load_safetensors(test::data_path("pth_netG_nc3.safetensors")).tensors);
}

TEST_CASE("pth reader: DataParallel names lose their module prefix when loaded as a state_dict") {
  const auto raw = load_pth_state_dict(test::data_path("pth_netG_nc1_dataparallel.pth"));
  CHECK(raw.count("module.main.0.weight") == 1);
  test::expect_same_tensors(nn::load_state_dict_file(test::data_path("pth_netG_nc1_dataparallel.pth")),
                            load_safetensors(test::data_path("pth_netG_nc1.safetensors")).tensors);
}

TEST_CASE("pth reader: the goldens load into our generator and discriminator") {
  const PrecisionPolicy policy = resolve_policy(OptLevel::O0);
  const auto where = nn::Placement::for_device(Device::cpu(), policy.compute_dtype);
  nn::NetConfig cfg;
  cfg.image_size = 16;
  cfg.nz = 8;
  cfg.ngf = 4;
  cfg.ndf = 4;
  cfg.nc = 1;
  const std::string g_path = test::data_path("pth_netG_nc1.pth");
  const nn::StateDict g_file = nn::load_state_dict_file(g_path);
  const nn::NetConfig inferred = nn::infer_generator_config(g_file, g_path);
  CHECK(inferred.nz == 8);
  CHECK(inferred.ngf == 4);
  CHECK(inferred.nc == 1);
  CHECK(inferred.image_size == 16);
  auto G = nn::make_generator(cfg, policy, where);
  nn::load_state_dict(*G, g_file, g_path);
  test::expect_same_tensors(nn::state_dict(*G), load_safetensors(test::data_path("pth_netG_nc1.safetensors")).tensors);

  cfg.nc = 3;
  auto D = nn::make_discriminator(cfg, policy, where);
  nn::load_state_dict(*D, nn::load_state_dict_file(test::data_path("pth_netD_nc3.pth")), "netD");
  test::expect_same_tensors(nn::state_dict(*D), load_safetensors(test::data_path("pth_netD_nc3.safetensors")).tensors);
}

TEST_CASE("pth reader: a .pth rezipped with deflate reads the same") {
  const std::string golden = test::read_file_bytes(test::data_path("pth_netG_nc1.pth"));
  const std::string deflated = zip_of(entries_of(golden), /*deflate=*/true);
  CHECK(deflated.size() < golden.size());
  test::expect_same_tensors(parse_pth_state_dict(deflated, "deflated.pth"), parse_pth_state_dict(golden, "golden.pth"));
}

TEST_CASE("pth reader: every truncation of a golden is a clean error") {
  for (const char* name : {"pth_netG_nc1.pth", "pth_netG_nc3_legacy.pth"}) {
    const std::string golden = test::read_file_bytes(test::data_path(name));
    REQUIRE(!golden.empty());
    int errors = 0;
    std::string unnamed;
    for (size_t n = 0; n < golden.size(); ++n) {
      try {
        parse_pth_state_dict(std::string_view(golden).substr(0, n), "cut.pth");
      } catch (const Error& e) {
        ++errors;
        if (std::string(e.what()).find("cut.pth") == std::string::npos) unnamed = e.what();
      }
    }
    INFO(std::string(name));
    CHECK(errors == static_cast<int>(golden.size()));
    CHECK(unnamed.empty());
  }
}

TEST_CASE("pth reader: flipped bytes give a clean error or a state_dict and the CRC catches the ZIP's") {
  for (const char* name : {"pth_netG_nc1.pth", "pth_netG_nc3_legacy.pth"}) {
    const std::string golden = test::read_file_bytes(test::data_path(name));
    const bool zip = looks_like_zip(golden);
    // In the ZIP format every byte of the entries read is covered by a CRC-32: the pickle, the byte
    // order and the storages. torch.save's other entries ("version", ".format_version",
    // ".storage_alignment", ".data/serialization_id") are not read.
    auto is_read = [](const std::string& entry) {
      auto ends_with = [&](const std::string& tail) {
        return entry.size() >= tail.size() && entry.compare(entry.size() - tail.size(), tail.size(), tail) == 0;
      };
      return ends_with("/data.pkl") || ends_with("/byteorder") || entry.find("/data/") != std::string::npos;
    };
    std::vector<bool> in_data(golden.size(), false);
    if (zip) {
      const ZipArchive archive(golden, name);
      for (const ZipEntry& e : archive.entries())
        if (is_read(e.name))
          for (uint64_t i = 0; i < e.compressed_size; ++i) in_data[e.data_offset + i] = true;
    }
    int errors = 0;
    std::string unnoticed;
    for (size_t i = 0; i < golden.size(); ++i) {
      std::string bad = golden;
      bad[i] = static_cast<char>(bad[i] ^ 0x5a);
      bool failed = false;
      try {
        parse_pth_state_dict(bad, "flipped.pth");
      } catch (const Error&) {
        failed = true;
        ++errors;
      }
      if (in_data[i] && !failed) unnoticed += " " + std::to_string(i);
    }
    INFO(std::string(name), ": flips inside an entry's data that went unnoticed, at bytes", unnoticed);
    CHECK(unnoticed.empty());
    CHECK(errors > 0);
  }
}

TEST_CASE("pth reader: files that are not state_dicts say what they are") {
  CHECK(error_of("hello world") ==
        "model.pth: neither a ZIP archive nor a pickle; expected a file written by "
        "torch.save (a .pth)");
  CHECK(error_of(zip_of({{"readme.txt", "hi"}})).find("without '<name>/data.pkl'") != std::string::npos);
  // torch.save(net, path): a whole pickled module.
  const std::string model = b({0x80, 2}) + "c__main__\nGenerator\n" + b({'q', 0, ')', 0x81, '}', 'b', '.'});
  CHECK(error_of(zip_of({{"m/data.pkl", model}}))
            .find("holds an object made by __main__.Generator (a whole pickled "
                  "model?)") != std::string::npos);
  CHECK(error_of(zip_of({{"m/data.pkl", b({0x80, 2, ']', 'q', 0, '.'})}})) ==
        "model.pth: holds a list, not a state_dict (a dict of tensors)");
  CHECK(error_of(zip_of({{"m/data.pkl", b({0x80, 2, '}'}) + unicode("a") + b({'K', 5, 's', '.'})}})) ==
        "model.pth: entry 'a' is a int, not a tensor; expected a state_dict of tensors");
  CHECK(error_of(zip_of({{"m/data.pkl", b({0x80, 2, 0xff})}})).find("pickle opcode 0xff at byte 2") !=
        std::string::npos);
  CHECK(error_of(zip_of({{"m/data.pkl", b({0x80, 2, 'h', 5, '.'})}})).find("memo key 5 was never stored") !=
        std::string::npos);
  CHECK(error_of(zip_of({{"m/data.pkl", b({0x80, 2, '}'})}})).find("without its STOP opcode") != std::string::npos);
  CHECK(error_of(zip_of({{"m/data.pkl", b({0x80, 2, 'X', 0xff, 0xff, 0xff, 0x7f})}})).find("more bytes") !=
        std::string::npos);

  // A well-formed tensor, then the same with a missing storage, a wrong size and an unread dtype.
  const std::string floats(16, '\0');
  const auto ok = parse_pth_state_dict(
      zip_of({{"m/data.pkl", one_tensor_pickle("FloatStorage", "0", 4)}, {"m/data/0", floats}}), "ok.pth");
  REQUIRE(ok.count("w") == 1);
  CHECK(ok.at("w").shape() == Shape{4});
  CHECK(error_of(zip_of({{"m/data.pkl", one_tensor_pickle("FloatStorage", "0", 4)}}))
            .find("its storage 'm/data/0' is missing") != std::string::npos);
  CHECK(error_of(zip_of({{"m/data.pkl", one_tensor_pickle("FloatStorage", "0", 4)}, {"m/data/0", floats + "x"}}))
            .find("has 17 bytes; 4 elements of f32 need 16") != std::string::npos);
  CHECK(error_of(zip_of({{"m/data.pkl", one_tensor_pickle("IntStorage", "0", 4)}, {"m/data/0", floats}}))
            .find("a tensor stored as torch.IntStorage") != std::string::npos);
  CHECK(error_of(zip_of({{"m/data.pkl", one_tensor_pickle("FloatStorage", "0", 4)},
                         {"m/data/0", floats},
                         {"m/byteorder", "big"}}))
            .find("byte order 'big'") != std::string::npos);
}

TEST_CASE("pth reader: deep nesting and memo cycles end without a crash") {
  // [[[...]]] 200000 deep through the memo, and a list that contains itself.
  std::string deep = b({0x80, 2, ']', 'q', 0});
  for (int i = 0; i < 200000; ++i) deep += b({'0', ']', 'h', 0, 'a', 'q', 0});
  deep += ".";
  const PickleTree tree(deep, 0, "deep");
  CHECK(tree.root().is(PickleValue::Kind::List));
  CHECK(error_of(zip_of({{"m/data.pkl", deep}})) == "model.pth: holds a list, not a state_dict (a dict of tensors)");
  // Millions of values, or of stack entries, are refused before they take gigabytes.
  std::string many = b({0x80, 2});
  for (int i = 0; i < 3000000; ++i) many += "]0";
  CHECK(error_of(zip_of({{"m/data.pkl", many + "N."}})).find("values; not a state_dict") != std::string::npos);
  std::string tall = b({0x80, 2, 'N'});
  for (int i = 0; i < 3000000; ++i) tall += "2";
  CHECK(error_of(zip_of({{"m/data.pkl", tall + "."}})).find("a stack deeper than") != std::string::npos);
  const std::string cycle = b({0x80, 2, ']', 'q', 0, 'h', 0, 'a', '.'});
  const PickleTree self(cycle, 0, "cycle");
  REQUIRE(self.root().items.size() == 1);
  CHECK(self.root().items[0] == &self.root());
}
