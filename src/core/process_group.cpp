#include "core/process_group.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "core/process_clock.h"
#include "ganengine/error.h"
#include "io/atomic_file.h"

namespace ge {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1000000) fail("environment variable ", name, "='", v, "' is not a count");
  return static_cast<int>(x);
}

// Open MPI's C API through dlsym. MPI_COMM_WORLD and MPI_BYTE are, in Open MPI, the addresses
// of the global objects ompi_mpi_comm_world and ompi_mpi_byte.
struct Mpi {
  int (*initialized)(int*) = nullptr;
  int (*init)(int*, char***) = nullptr;
  int (*bcast)(void*, int, void*, int, void*) = nullptr;
  int (*finalize)() = nullptr;
  void* comm_world = nullptr;
  void* byte = nullptr;
};

const Mpi& mpi() {
  static const Mpi loaded = [] {
    // Global: Open MPI's own plugins resolve libmpi's symbols when they load.
    void* lib = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
      fail("launched by Open MPI's mpirun, but libmpi.so.40 cannot be loaded (", dlerror(),
           "): install Open MPI (Debian: apt-get install openmpi-bin) on every node");
    Mpi m;
    m.initialized = reinterpret_cast<int (*)(int*)>(dlsym(lib, "MPI_Initialized"));
    m.init = reinterpret_cast<int (*)(int*, char***)>(dlsym(lib, "MPI_Init"));
    m.bcast = reinterpret_cast<int (*)(void*, int, void*, int, void*)>(dlsym(lib, "MPI_Bcast"));
    m.finalize = reinterpret_cast<int (*)()>(dlsym(lib, "MPI_Finalize"));
    m.comm_world = dlsym(lib, "ompi_mpi_comm_world");
    m.byte = dlsym(lib, "ompi_mpi_byte");
    if (!m.initialized || !m.init || !m.bcast || !m.finalize || !m.comm_world || !m.byte)
      fail("libmpi.so.40 is not Open MPI's (MPI_Init, MPI_Bcast, ompi_mpi_comm_world or ompi_mpi_byte missing)");
    int done = 0;
    m.initialized(&done);
    if (!done && m.init(nullptr, nullptr) != 0) fail("MPI_Init failed");
    std::atexit([] { mpi().finalize(); });
    return m;
  }();
  return loaded;
}

NcclUniqueId via_mpi(const ProcessGroupInfo& pg, const std::function<NcclUniqueId()>& make) {
  const Mpi& m = mpi();
  NcclUniqueId id{};
  if (pg.rank == 0) id = make();
  if (m.bcast(id.data(), static_cast<int>(id.size()), m.byte, 0, m.comm_world) != 0)
    fail("MPI_Bcast of the NCCL id failed");
  return id;
}

NcclUniqueId via_file(const ProcessGroupInfo& pg, const std::function<NcclUniqueId()>& make) {
  const char* path = std::getenv("GANENGINE_RENDEZVOUS_FILE");
  if (!path || !*path)
    fail("GANENGINE_WORLD_SIZE=", pg.size,
         " but GANENGINE_RENDEZVOUS_FILE is not set: give every process the same "
         "fresh path on storage they all see (rank 0 writes the NCCL id there), or launch with mpirun");
  if (pg.rank == 0) {
    struct stat st;
    if (::stat(path, &st) == 0)
      fail("GANENGINE_RENDEZVOUS_FILE ", path, " already exists (from an earlier run?): remove it or use a fresh path");
    const NcclUniqueId id = make();
    write_file_atomically(path, std::string(id.data(), id.size()));
    return id;
  }
  // A file older than this process belongs to an earlier run.
  const double started_ago = seconds_since_process_start();
  const auto now = std::chrono::system_clock::now();
  const double started_at = std::chrono::duration<double>(now.time_since_epoch()).count() - std::max(0.0, started_ago);
  const int timeout_s = env_int("GANENGINE_RENDEZVOUS_TIMEOUT", 300);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    struct stat st;
    if (::stat(path, &st) == 0 && static_cast<double>(st.st_mtime) + 5.0 >= started_at) {
      std::ifstream in(path, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      NcclUniqueId id{};
      if (bytes.size() != id.size()) fail(path, " holds ", bytes.size(), " bytes, not an NCCL id of ", id.size());
      std::memcpy(id.data(), bytes.data(), id.size());
      return id;
    }
    if (std::chrono::steady_clock::now() > deadline)
      fail("rank ", pg.rank, " waited ", timeout_s, " s for rank 0 to write the NCCL id to ", path,
           " (GANENGINE_RENDEZVOUS_TIMEOUT): is rank 0 running, and does it see the same path?");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

ProcessGroupInfo detect_process_group() {
  ProcessGroupInfo pg;
  if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
    pg.launcher = "mpi";
    pg.size = env_int("OMPI_COMM_WORLD_SIZE", 1);
    pg.rank = env_int("OMPI_COMM_WORLD_RANK", 0);
    pg.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
  } else if (std::getenv("GANENGINE_WORLD_SIZE")) {
    pg.launcher = "env";
    pg.size = env_int("GANENGINE_WORLD_SIZE", 1);
    pg.rank = env_int("GANENGINE_RANK", -1);
    if (pg.rank < 0) fail("GANENGINE_WORLD_SIZE is set but GANENGINE_RANK is not");
    pg.local_rank = env_int("GANENGINE_LOCAL_RANK", pg.rank);
  }
  if (pg.size < 1 || pg.rank >= pg.size)
    fail("process rank ", pg.rank, " of a world of ", pg.size, " (from the ", pg.launcher, " launcher's environment)");
  return pg;
}

NcclUniqueId share_unique_id(const ProcessGroupInfo& pg, const std::function<NcclUniqueId()>& make) {
  if (pg.size == 1) return make();
  return pg.launcher == "mpi" ? via_mpi(pg, make) : via_file(pg, make);
}

}  // namespace ge
