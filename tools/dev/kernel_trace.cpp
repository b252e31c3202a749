// A CUPTI injection library that records when every kernel, memset and memcpy ran on the GPU,
// graph replays included, and writes them as CSV at process exit. Nsight Systems cannot make
// reports on the GPU host; this gives the same timeline for one program run:
//
//   CUDA_INJECTION64_PATH=kernel_trace.so GE_TRACE_OUT=trace.csv ganengine bench ...
//
// It also writes every instantiated graph's edges (trace.csv.edges: graph, from and to node ids
// as the activity records name them, edge type), from which trace_steps.py finds each replay's
// critical path.
//
// Build: tools/dev/build_kernel_trace.sh. Analyse: tools/dev/trace_steps.py trace.csv.
// A development tool only: not built by CMake, not linked into ganengine.
#include <cuda.h>
#include <cupti.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct Record {
  char kind;  // K kernel, S memset, C memcpy
  uint64_t start, end;
  uint32_t stream, correlation;
  uint32_t graph;
  uint64_t graph_node;
  std::string name;
};

struct Edge {
  uint32_t graph;
  uint64_t from, to;
  int type;
};

std::mutex records_mutex;
std::vector<Record> records;
std::vector<Edge> edges;
constexpr size_t kBufferBytes = 8u << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* activity = nullptr;
  std::vector<Record> batch;
  while (cuptiActivityGetNextRecord(buffer, valid, &activity) == CUPTI_SUCCESS) {
    if (activity->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || activity->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(activity);
      batch.push_back(
          {'K', k->start, k->end, k->streamId, k->correlationId, k->graphId, k->graphNodeId, k->name ? k->name : "?"});
    } else if (activity->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<CUpti_ActivityMemset4*>(activity);
      batch.push_back({'S', m->start, m->end, m->streamId, m->correlationId, m->graphId, m->graphNodeId,
                       "memset " + std::to_string(m->bytes)});
    } else if (activity->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(activity);
      batch.push_back({'C', m->start, m->end, m->streamId, m->correlationId, m->graphId, m->graphNodeId,
                       "memcpy " + std::to_string(m->bytes)});
    }
  }
  free(buffer);
  std::lock_guard<std::mutex> lock(records_mutex);
  records.insert(records.end(), batch.begin(), batch.end());
}

// Kernel names hold commas (template arguments): quoted, with quotes doubled.
std::string csv_field(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void write_trace() {
  cuptiActivityFlushAll(1);
  const char* path = getenv("GE_TRACE_OUT");
  std::string target = path ? path : "kernel_trace.csv";
  std::string temp = target + ".tmp";
  FILE* f = fopen(temp.c_str(), "w");
  if (!f) {
    fprintf(stderr, "kernel_trace: cannot write %s\n", temp.c_str());
    return;
  }
  std::lock_guard<std::mutex> lock(records_mutex);
  fprintf(f, "kind,start_ns,end_ns,stream,correlation,graph,graph_node,name\n");
  for (const Record& r : records)
    fprintf(f, "%c,%llu,%llu,%u,%u,%u,%llu,%s\n", r.kind, static_cast<unsigned long long>(r.start),
            static_cast<unsigned long long>(r.end), r.stream, r.correlation, r.graph,
            static_cast<unsigned long long>(r.graph_node), csv_field(r.name).c_str());
  fclose(f);
  rename(temp.c_str(), target.c_str());
  fprintf(stderr, "kernel_trace: %zu records in %s\n", records.size(), target.c_str());
  const std::string edges_path = target + ".edges", edges_temp = edges_path + ".tmp";
  if (FILE* e = fopen(edges_temp.c_str(), "w")) {
    fprintf(e, "graph,from,to,type\n");
    for (const Edge& x : edges)
      fprintf(e, "%u,%llu,%llu,%d\n", x.graph, static_cast<unsigned long long>(x.from),
              static_cast<unsigned long long>(x.to), x.type);
    fclose(e);
    rename(edges_temp.c_str(), edges_path.c_str());
  }
}

// Before a graph is instantiated: its edges, by the node ids the activity records carry.
void CUPTIAPI on_resource(void*, CUpti_CallbackDomain, CUpti_CallbackId id, const void* data) {
  if (id != CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING) return;
  const auto* graph_data = static_cast<const CUpti_GraphData*>(static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor);
  CUgraph graph = graph_data->graph;
  uint32_t graph_id = 0;
  if (!graph || cuptiGetGraphId(graph, &graph_id) != CUPTI_SUCCESS) return;
  size_t n = 0;
  if (cuGraphGetEdges(graph, nullptr, nullptr, nullptr, &n) != CUDA_SUCCESS) return;
  std::vector<CUgraphNode> from(n), to(n);
  std::vector<CUgraphEdgeData> edge_data(n);
  if (n && cuGraphGetEdges(graph, from.data(), to.data(), edge_data.data(), &n) != CUDA_SUCCESS) return;
  std::lock_guard<std::mutex> lock(records_mutex);
  for (size_t i = 0; i < n; ++i) {
    uint64_t a = 0, b = 0;
    if (cuptiGetGraphNodeId(from[i], &a) != CUPTI_SUCCESS || cuptiGetGraphNodeId(to[i], &b) != CUPTI_SUCCESS)
      continue;
    edges.push_back({graph_id, a, b, edge_data[i].type});
  }
}

bool check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return true;
  const char* message = nullptr;
  cuptiGetResultString(result, &message);
  fprintf(stderr, "kernel_trace: %s failed: %s\n", what, message ? message : "?");
  return false;
}

}  // namespace

extern "C" int InitializeInjection(void) {
  if (!check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "register callbacks")) return 0;
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL), "enable kernels");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMSET), "enable memsets");
  check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enable memcpys");
  CUpti_SubscriberHandle subscriber;
  if (check(cuptiSubscribe(&subscriber, on_resource, nullptr), "subscribe"))
    check(cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATE_STARTING),
          "enable graph callbacks");
  atexit(write_trace);
  return 1;
}
