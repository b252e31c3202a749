// TensorBoard event files written without TensorFlow: Event protobufs (tensorflow/core/util/
// event.proto, summary.proto) framed as TFRecords (tfrecord_writer.h). Only the fields TensorBoard
// reads for scalars and images are written:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//             SessionLog session_log = 6; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; Image image = 4; }
//   Image   { int32 height = 1; int32 width = 2; int32 colorspace = 3; bytes encoded_image_string = 4; }
//   SessionLog { SessionStatus status = 1; }  (START = 1)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/tfrecord_writer.h"

namespace ge {

// The serialized Event messages.
std::string file_version_event(double wall_time);  // "brain.Event:2": the first event of every file
std::string scalars_event(double wall_time, int64_t step, const std::vector<std::pair<std::string, float>>& values);
// An encoded image (PNG bytes) of height x width with `channels` channels (1 grey, 3 RGB, 4 RGBA).
std::string image_event(double wall_time, int64_t step, const std::string& tag, const std::string& png, int height,
                        int width, int channels);
// A restart at `step`: TensorBoard drops what earlier files logged from this step on (a resumed
// run logs those steps again).
std::string restart_event(double wall_time, int64_t step);

// Seconds since the Unix epoch, as Event::wall_time holds them.
double wall_time_now();

// One event file, events.out.tfevents.<seconds>.<host>, in `dir` (created if missing).
class TensorBoardWriter {
 public:
  // resumed_at >= 0: the run continues from that step (restart_event).
  TensorBoardWriter(const std::string& dir, int64_t resumed_at);
  void add_scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values, double wall_time);
  // A PNG file as written (its size read from its header), so the image is byte for byte the file.
  void add_png_file(int64_t step, const std::string& tag, const std::string& png_path, double wall_time);
  void flush() { file_->flush(); }
  const std::string& path() const { return file_->path(); }

 private:
  std::unique_ptr<TfRecordWriter> file_;
};

}  // namespace ge
