// Training data: a Dataset hands out u8 images one by one; a Loader shuffles them per epoch,
// decodes a batch on worker threads, normalises it to [-1, 1] as the reference's
// transforms.ToTensor() + Normalize((0.5,)*3, (0.5,)*3) do, and prefetches the next batch.
#pragma once
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ganengine/batch_source.h"
#include "ganengine/tensor.h"

namespace ge {

// A fixed, indexable set of square images, already resized and cropped to image_size().
// read() must be safe to call from several threads at once: the Loader's workers do.
class Dataset {
 public:
  virtual ~Dataset();
  virtual int64_t size() const = 0;
  virtual int channels() const = 0;
  virtual int image_size() const = 0;
  // Writes image `index` (0 <= index < size()) as image_size() x image_size() x channels()
  // bytes, row-major HWC.
  virtual void read(int64_t index, uint8_t* hwc_out) const = 0;
  virtual std::string name() const = 0;
  // A description of the source that changes whenever the images read() serves could change
  // (files edited, added or removed; another image size), so that a cache of decoded images
  // (dataset_cache.h) knows when it is stale. File-backed datasets record paths, sizes and
  // modification times rather than contents. This default, name() + size + image_size +
  // channels, suits only datasets without files.
  virtual std::string fingerprint() const;
};

// torchvision's FakeData: `size` random images that exist without any files. Image i is a
// function of (seed, i) only, whatever order or thread reads it: its bytes, in HWC order, are
// floor(256 u) for the Philox uniforms u of ops::fill_uniform at (seed, offset = i << 32).
class FakeDataset : public Dataset {
 public:
  FakeDataset(int64_t size, int image_size, int channels, uint64_t seed);
  int64_t size() const override { return size_; }
  int channels() const override { return channels_; }
  int image_size() const override { return image_size_; }
  void read(int64_t index, uint8_t* hwc_out) const override;
  std::string name() const override { return "fake"; }
  // The images are a function of the seed too.
  std::string fingerprint() const override { return Dataset::fingerprint() + " seed=" + std::to_string(seed_); }

 private:
  int64_t size_;
  int image_size_;
  int channels_;
  uint64_t seed_;
};

// The dataset named by --dataset, built by its entry in the dataset registry
// (src/data/dataset_registry.h): the reference's names (cifar10, lsun, mnist, imagenet, folder,
// lfw, fake) and fashion-mnist. "fake" gives FakeDataset(1000, image_size, 3, seed); the others
// read their files under dataroot (lsun takes --classes). skip_bad_images: lsun and the
// folder-like datasets skip and count undecodable images instead of failing on them. An unknown
// name throws ge::Error listing the known ones.
std::unique_ptr<Dataset> open_dataset(const std::string& name, const std::string& dataroot, int image_size,
                                      const std::string& classes, uint64_t seed, bool skip_bad_images = false);

// The image channels of a dataset, known from its name alone (mnist and fashion-mnist 1, the
// others 3); an unknown name throws as open_dataset does.
int dataset_channels(const std::string& name);

// Batches of a dataset, in an order that is a pure function of (seed, epoch): a resumed run
// sees exactly the batches an uninterrupted one would have. Like the reference's DataLoader
// (shuffle=True, drop_last=False) every image appears once per epoch and the last batch may
// be smaller. One caller thread at a time; the dataset must outlive the Loader.
class ReplicaPool;

class Loader : public BatchSource {
 public:
  // workers: threads decoding the items of one batch (0 or 1: the calling thread), started
  // once with the Loader and kept (starting them for each batch cost more than half the rate).
  // pinned: batches are built in page-locked memory, the fast source of a copy to the GPU.
  Loader(const Dataset& ds, int64_t batch_size, uint64_t seed, int workers, bool pinned = false);
  ~Loader() override;  // waits for a prefetch still in flight
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  const Dataset& dataset() const { return ds_; }
  int64_t batch_size() const { return batch_size_; }
  int64_t batches_per_epoch() const override;  // ceil(size / batch_size); floor with drop_last

  // The dataset indices of epoch `epoch` in the order they are served: a permutation of
  // [0, size) drawn by Fisher-Yates from a Philox stream keyed by (seed, epoch), i.e.
  // epoch_order(size, seed, epoch).
  std::vector<int64_t> order(int64_t epoch) const;

  // Batch `index` (0 <= index < batches_per_epoch()) of epoch `epoch`: an f32 CPU NCHW
  // tensor (n, C, S, S), n = batch_size except perhaps for the last batch, holding
  // (float(u8) / 255.0f - 0.5f) / 0.5f. After returning, the following batch (the next
  // epoch's first after the last) is prepared in the background; asking for any other batch
  // is still correct, only not faster.
  Tensor batch(int64_t epoch, int64_t index) override;
  std::string describe() const override;

 private:
  std::vector<int64_t> indices_of(int64_t epoch, int64_t index);  // one batch's slice of order()
  Tensor assemble(const std::vector<int64_t>& indices) const;     // read + normalise, on workers
  void start_prefetch(int64_t epoch, int64_t index);
  void drop_prefetch();

  const Dataset& ds_;
  int64_t batch_size_;
  uint64_t seed_;
  int workers_;
  bool pinned_;

  int64_t cached_epoch_ = -1;  // order(cached_epoch_), kept because every batch of an epoch needs it
  std::vector<int64_t> cached_order_;

  std::pair<int64_t, int64_t> prefetched_key_{-1, -1};  // (epoch, index) of prefetched_
  std::future<Tensor> prefetched_;
  std::unique_ptr<ReplicaPool> pool_;  // the workers (none for one, or where no thread could be had)
};

// torchvision's ImageFolder, which the reference uses for --dataset imagenet | folder | lfw:
// dataroot/<class>/.../<image>. Classes are the sorted names of dataroot's subdirectories
// (symlinks followed); each class directory is searched recursively and its files ordered as
// torchvision's make_dataset orders them (by directory path, then by name); files with the
// extensions .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp (any case) are images. Item i is
// decode -> RGB -> Resize(image_size) -> CenterCrop(image_size): 3-channel u8, byte-exact
// with torchvision on Pillow 13 (image_transform.h).
//
// A tree without class directories, or a class without images, is refused at construction
// with a message that shows the expected layout and what was found. A file that does not
// decode makes read() throw ge::Error naming it, unless skip_bad_images is set: then every
// file's header is checked at construction (probe_image, in parallel) and bad files are left
// out, so size() never changes afterwards; a file whose damage only decoding finds is
// replaced, at read time, by the next good item (index + 1, + 2, ... wrapping around) and
// remembered, so it is not tried again.
class ImageFolderDataset : public Dataset {
 public:
  ImageFolderDataset(const std::string& dataroot, int image_size, bool skip_bad_images = false,
                     const std::string& name = "folder");
  ~ImageFolderDataset() override;
  int64_t size() const override { return static_cast<int64_t>(items_.size()); }
  int channels() const override { return 3; }
  int image_size() const override { return image_size_; }
  void read(int64_t index, uint8_t* hwc_out) const override;
  std::string name() const override { return name_; }
  // An MD5 over every served file's (path relative to dataroot, size, mtime_ns), in order:
  // stats each file once, so it costs about what the directory scan did.
  std::string fingerprint() const override;

  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(int64_t index) const;
  int target(int64_t index) const;  // the class index, torchvision's target

  // skip_bad_images only: the files left out at construction, as "path: reason" lines, and
  // the files found bad later by read() (each counted once).
  const std::vector<std::string>& excluded_at_scan() const { return excluded_; }
  int64_t failed_at_read() const;

 private:
  struct Item {
    std::string path;
    int target;
  };
  struct ReadFailures;  // the bad files read() found, shared by its threads

  std::string name_;
  std::string root_;
  int image_size_;
  bool skip_bad_images_;
  std::vector<std::string> classes_;
  std::vector<Item> items_;
  std::vector<std::string> excluded_;
  std::unique_ptr<ReadFailures> read_failures_;
};

}  // namespace ge
