// cuDNN's algorithm choices kept across runs. The first use of a convolution shape times
// candidate algorithms on the real buffers (conv_search.cu), which delays the first training
// step. A run that finds its choices in this file skips the timing (docs/performance.md), and
// every process of an mpirun job on one machine then uses the same algorithms.
//
// The file holds one line per choice, "<key> <algo> <math type> <workspace bytes> [<engine>]",
// after a header line (<engine>: cudnn_engine.h's name of a backend configuration, no blanks).
// The key names the GPU model, the cuDNN version, the algorithm preference and the convolution
// (pass, dtype, layouts, sizes, stride, padding, TF32, determinism); it has no spaces. New
// choices are merged with what other processes wrote meanwhile and the file is replaced
// atomically. It is a cache: lines it cannot read are ignored (with one warning) and rewritten,
// and a file or directory that cannot be written only costs the next run its searches (one
// warning); training never fails because of it.
//
// Which file: $GANENGINE_CUDNN_CACHE (a path, or "off"), else $XDG_CACHE_HOME/ganengine/
// cudnn_algos.txt, else $HOME/.cache/ganengine/cudnn_algos.txt.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace ge {

struct ConvAlgoChoice {
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  int math = 0;  // the cudnnMathType_t it was timed with
  uint64_t workspace_bytes = 0;
  std::string engine;  // a cuDNN backend engine configuration for beta == 0 runs, "" for none
  bool operator==(const ConvAlgoChoice& o) const {
    return algo == o.algo && math == o.math && workspace_bytes == o.workspace_bytes && engine == o.engine;
  }
};

class ConvAlgoCache {
 public:
  // An empty path keeps choices in memory only.
  explicit ConvAlgoCache(std::string path);
  const std::string& path() const { return path_; }
  // The stored choice for key (the file is read on first use).
  std::optional<ConvAlgoChoice> find(const std::string& key);
  // Keeps a new choice and writes it to the file.
  void store(const std::string& key, const ConvAlgoChoice& choice);
  // Choices this process took from the cache, and searched itself.
  int hits() const;
  int searches() const;

 private:
  void load_locked();
  void merge_file_locked(std::map<std::string, ConvAlgoChoice>& into, int* bad_lines) const;
  void warn_once_locked(const std::string& message);

  std::string path_;
  mutable std::mutex mu_;
  bool loaded_ = false;
  bool warned_ = false;
  std::map<std::string, ConvAlgoChoice> choices_;
  int hits_ = 0, searches_ = 0;
};

// The file this process uses ("" when disabled or when there is no home directory).
std::string default_conv_algo_cache_path();
// The process's cache on that file, made on first use.
ConvAlgoCache& process_conv_algo_cache();

}  // namespace ge
