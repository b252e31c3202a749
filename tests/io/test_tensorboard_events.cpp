// TensorBoard event files: CRC-32C against published check values, TFRecord framing, the Event
// protobufs of scalars, images and restarts, and the writer's file as a reader sees it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "ganengine/image_grid.h"
#include "io/tensorboard_events.h"
#include "io/test_tensorboard_reader.h"
#include "support/temp_dir.h"

using namespace ge;
using namespace ge::test;

TEST_CASE("tensorboard: crc32c matches the published check values") {
  const std::string check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xE3069283u);  // the CRC catalogue's check value
  // RFC 3720 (iSCSI), appendix B.4.
  const std::string zeros(32, '\0'), ones(32, '\xff');
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  CHECK(crc32c(zeros.data(), zeros.size()) == 0x8A9136AAu);
  CHECK(crc32c(ones.data(), ones.size()) == 0x62A8AB43u);
  CHECK(crc32c(ascending.data(), ascending.size()) == 0x46DD794Eu);
  CHECK(crc32c(descending.data(), descending.size()) == 0x113FDB5Cu);
  // Continuing from a partial CRC gives the CRC of the whole.
  CHECK(crc32c(check.data() + 4, 5, crc32c(check.data(), 4)) == 0xE3069283u);
  CHECK(crc32c("", 0) == 0u);
}

TEST_CASE("tensorboard: masked crc32c rotates and offsets the crc") {
  const std::string check = "123456789";
  const uint32_t crc = 0xE3069283u;
  CHECK(masked_crc32c(check.data(), check.size()) == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST_CASE("tensorboard: a tfrecord frame is the length and its crc then the data and its crc") {
  const std::string data = "hello, events";
  const std::string frame = tfrecord_frame(data);
  REQUIRE(frame.size() == 8 + 4 + data.size() + 4);
  CHECK(read_le(frame, 0, 8) == data.size());
  CHECK(read_le(frame, 8, 4) == masked_crc32c(frame.data(), 8));
  CHECK(frame.substr(12, data.size()) == data);
  CHECK(read_le(frame, 12 + data.size(), 4) == masked_crc32c(data.data(), data.size()));
  // A flipped bit anywhere fails the reader's checks.
  std::string damaged = frame;
  damaged[14] ^= 1;
  CHECK_THROWS(read_tfrecords(damaged));
  CHECK_THROWS(read_tfrecords(frame.substr(0, frame.size() - 1)));
  CHECK(read_tfrecords(frame + tfrecord_frame("")).size() == 2);
}

TEST_CASE("tensorboard: events hold the file version and scalars and images and restarts") {
  const TbEvent version = parse_tb_event(file_version_event(1234.5));
  CHECK(version.file_version == "brain.Event:2");
  CHECK(version.wall_time == 1234.5);

  const TbEvent scalars = parse_tb_event(scalars_event(1700000000.25, 42, {{"Loss_D", 1.25f}, {"lr/G", 2e-4f}}));
  CHECK(scalars.wall_time == 1700000000.25);
  CHECK(scalars.step == 42);
  REQUIRE(scalars.values.size() == 2);
  CHECK(scalars.values[0].tag == "Loss_D");
  CHECK(scalars.values[0].has_simple_value);
  CHECK(scalars.values[0].simple_value == 1.25f);
  CHECK(scalars.values[1].tag == "lr/G");
  CHECK(scalars.values[1].simple_value == 2e-4f);

  const std::string png = "\x89PNG not really";
  const TbEvent image = parse_tb_event(image_event(1.0, 7, "fake_samples", png, 20, 146, 3));
  CHECK(image.step == 7);
  REQUIRE(image.values.size() == 1);
  CHECK(image.values[0].tag == "fake_samples");
  CHECK(image.values[0].has_image);
  CHECK(image.values[0].height == 20);
  CHECK(image.values[0].width == 146);
  CHECK(image.values[0].colorspace == 3);
  CHECK(image.values[0].encoded_image == png);

  const TbEvent restart = parse_tb_event(restart_event(2.0, 300));
  CHECK(restart.step == 300);
  CHECK(restart.log_status == 1);

  // Steps beyond 2^31 and negative values survive as int64 varints.
  CHECK(parse_tb_event(scalars_event(0, int64_t{1} << 40, {})).step == int64_t{1} << 40);
}

TEST_CASE("tensorboard: the writer's file starts with the version and holds whole records") {
  TempDir tmp("ge_tb");
  const std::string grid = tmp.file("grid.png");
  save_image_grid(Tensor::from_doubles({-1, 0, 1, 0.5, -0.5, 0.25, 0, 1, -1, 0.5, 0.5, 0.5}, {1, 3, 2, 2}, DType::F32),
                  grid);
  std::string path;
  {
    TensorBoardWriter writer(tmp.file("tb"), /*resumed_at=*/-1);
    path = writer.path();
    writer.add_scalars(0, {{"Loss_G", 3.5f}}, 10.0);
    writer.flush();
    // Flushed records are on disk whole, before the writer goes.
    CHECK(read_tb_events(read_file_bytes(path)).size() == 2);
    writer.add_png_file(0, "fake_samples", grid, 11.0);
    writer.add_scalars(1, {{"Loss_G", 2.5f}}, 12.0);
  }  // the destructor flushes the rest
  const std::string name = std::filesystem::path(path).filename().string();
  CHECK(name.rfind("events.out.tfevents.", 0) == 0);
  CHECK(std::filesystem::path(path).parent_path() == tmp.dir / "tb");
  const std::vector<TbEvent> events = read_tb_events(read_file_bytes(path));
  REQUIRE(events.size() == 4);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[1].values.at(0).simple_value == 3.5f);
  CHECK(events[1].wall_time == 10.0);
  CHECK(events[2].values.at(0).encoded_image == read_file_bytes(grid));
  CHECK(events[2].values.at(0).height == 2);
  CHECK(events[2].values.at(0).width == 2);
  CHECK(events[2].values.at(0).colorspace == 3);
  CHECK(events[3].step == 1);

  // A resumed run's file says where it restarted, and a second file in the same second gets a
  // name of its own.
  TensorBoardWriter resumed(tmp.file("tb"), 5);
  CHECK(resumed.path() != path);
  resumed.flush();
  const std::vector<TbEvent> again = read_tb_events(read_file_bytes(resumed.path()));
  REQUIRE(again.size() == 2);
  CHECK(again[1].log_status == 1);
  CHECK(again[1].step == 5);
}

TEST_CASE("tensorboard: a file that is not a png is refused with its name") {
  TempDir tmp("ge_tb");
  write_file_bytes(tmp.file("not.png"), "plain text");
  TensorBoardWriter writer(tmp.file("tb"), -1);
  CHECK_THROWS_WITH_AS(writer.add_png_file(0, "x", tmp.file("not.png"), 0), doctest::Contains("not.png"), Error);
}
