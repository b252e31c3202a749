#include "io/tensorboard_events.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "ganengine/error.h"
#include "io/atomic_file.h"
#include "io/protobuf_writer.h"

namespace ge {

namespace {

enum EventField { kWallTime = 1, kStep = 2, kFileVersion = 3, kSummary = 5, kSessionLog = 6 };
enum ValueField { kTag = 1, kSimpleValue = 2, kImage = 4 };
enum ImageField { kHeight = 1, kWidth = 2, kColorspace = 3, kEncoded = 4 };
constexpr int kSessionStatus = 1;
constexpr int kSessionStart = 1;

ProtobufWriter event_header(double wall_time, int64_t step) {
  ProtobufWriter event;
  event.float64(kWallTime, wall_time);
  event.int64(kStep, step);
  return event;
}

std::string with_summary(ProtobufWriter event, const ProtobufWriter& summary) {
  event.message(kSummary, summary);
  return event.str();
}

uint32_t big_endian32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

std::string file_version_event(double wall_time) {
  ProtobufWriter event = event_header(wall_time, 0);
  event.string(kFileVersion, "brain.Event:2");
  return event.str();
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  ProtobufWriter summary;
  for (const auto& [tag, value] : values) {
    ProtobufWriter v;
    v.string(kTag, tag);
    v.float32(kSimpleValue, value);
    summary.message(1, v);
  }
  return with_summary(event_header(wall_time, step), summary);
}

std::string image_event(double wall_time, int64_t step, const std::string& tag, const std::string& png, int height,
                        int width, int channels) {
  ProtobufWriter image;
  image.int64(kHeight, height);
  image.int64(kWidth, width);
  image.int64(kColorspace, channels);
  image.string(kEncoded, png);
  ProtobufWriter v;
  v.string(kTag, tag);
  v.message(kImage, image);
  ProtobufWriter summary;
  summary.message(1, v);
  return with_summary(event_header(wall_time, step), summary);
}

std::string restart_event(double wall_time, int64_t step) {
  ProtobufWriter log;
  log.varint(kSessionStatus, kSessionStart);
  ProtobufWriter event = event_header(wall_time, step);
  event.message(kSessionLog, log);
  return event.str();
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, int64_t resumed_at) {
  ensure_directory(dir);
  const double now = wall_time_now();
  const std::string base = (dir.empty() || dir.back() == '/' ? dir : dir + "/") + "events.out.tfevents." +
                           std::to_string(static_cast<long long>(now)) + "." + host_name();
  // Two runs started within a second into one folder must not share a file.
  std::string path = base;
  for (int k = 1; std::ifstream(path).good(); ++k) path = base + "." + std::to_string(k);
  file_ = std::make_unique<TfRecordWriter>(path);
  file_->write(file_version_event(now));
  if (resumed_at >= 0) file_->write(restart_event(now, resumed_at));
  file_->flush();
}

void TensorBoardWriter::add_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values,
                                    double wall_time) {
  file_->write(scalars_event(wall_time, step, values));
}

void TensorBoardWriter::add_png_file(int64_t step, const std::string& tag, const std::string& png_path,
                                     double wall_time) {
  std::ifstream in(png_path, std::ios::binary);
  const std::string png((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // PNG: 8-byte signature, then the IHDR chunk (length, "IHDR", width, height, bit depth, colour type).
  const auto* p = reinterpret_cast<const unsigned char*>(png.data());
  if (png.size() < 26 || png.compare(12, 4, "IHDR") != 0)
    fail(png_path, ": not a PNG file (expected an IHDR chunk first), cannot log it to TensorBoard");
  const int colour_type = p[25];
  const int channels = colour_type == 0 ? 1 : colour_type == 2 ? 3 : colour_type == 4 ? 2 : colour_type == 6 ? 4 : 3;
  file_->write(image_event(wall_time, step, tag, png, static_cast<int>(big_endian32(p + 20)),
                           static_cast<int>(big_endian32(p + 16)), channels));
}

}  // namespace ge
