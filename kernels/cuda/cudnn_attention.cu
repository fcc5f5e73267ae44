// cuDNN fused attention forward through the backend graph API; see cudnn_attention.cuh for
// the graph and where its shape comes from.
#include "kernels/cuda/cudnn_attention.cuh"

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "kernels/cuda/check.cuh"

#if PTSIM_HAVE_CUDNN
#include <cudnn.h>

namespace ptsim::kernels::cuda {
namespace {

std::string cudnn_message(cudnnStatus_t st) {
  char last[1024] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  return std::string(cudnnGetErrorString(st)) + (last[0] ? std::string(" (") + last + ")" : std::string());
}

}  // namespace
}  // namespace ptsim::kernels::cuda

// Graph construction: any failure means this cuDNN/GPU cannot run the graph → CudnnUnsupported.
#define CUDNN_BUILD_CHECK(call)                                                                         \
  do {                                                                                                  \
    const cudnnStatus_t ptsim_cs_ = (call);                                                             \
    if (ptsim_cs_ != CUDNN_STATUS_SUCCESS)                                                              \
      throw ::ptsim::kernels::cuda::CudnnUnsupported(std::string(#call) + ": " +                        \
                                                     ::ptsim::kernels::cuda::cudnn_message(ptsim_cs_)); \
  } while (0)

// Execution: a failure after a plan finalised is a real error.
#define CUDNN_CHECK(call)                                                                                    \
  do {                                                                                                       \
    const cudnnStatus_t ptsim_cs_ = (call);                                                                  \
    if (ptsim_cs_ != CUDNN_STATUS_SUCCESS)                                                                   \
      ::ptsim::kernels::cuda::throw_error(#call, ::ptsim::kernels::cuda::cudnn_message(ptsim_cs_), __FILE__, \
                                          __LINE__);                                                         \
  } while (0)

namespace ptsim::kernels::cuda {
namespace {

// Owns one backend descriptor.
class Desc {
 public:
  explicit Desc(cudnnBackendDescriptorType_t type) { CUDNN_BUILD_CHECK(cudnnBackendCreateDescriptor(type, &d_)); }
  ~Desc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;
  Desc(Desc&& o) noexcept : d_(o.d_) { o.d_ = nullptr; }
  Desc& operator=(Desc&& o) noexcept {
    if (this != &o) {
      if (d_) cudnnBackendDestroyDescriptor(d_);
      d_ = o.d_;
      o.d_ = nullptr;
    }
    return *this;
  }
  cudnnBackendDescriptor_t get() const { return d_; }
  void reset() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
    d_ = nullptr;
  }
  template <typename T>
  Desc& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const T* values, std::int64_t n = 1) {
    CUDNN_BUILD_CHECK(cudnnBackendSetAttribute(d_, name, type, n, values));
    return *this;
  }
  Desc& set_desc(cudnnBackendAttributeName_t name, const Desc& other) {
    cudnnBackendDescriptor_t o = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &o);
  }
  void finalize() { CUDNN_BUILD_CHECK(cudnnBackendFinalize(d_)); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

using Dims = std::array<std::int64_t, 4>;

Dims packed_strides(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

}  // namespace

struct CudnnAttentionFwd::State {
  cudnnHandle_t handle = nullptr;
  // Tensors and operations, alive until the plan is built; a deque keeps references stable.
  std::deque<Desc> keep;
  Desc plan{CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR};
  std::int64_t engine_index = -1;
  std::int64_t workspace_bytes = 0;
  void* workspace = nullptr;
  // By-value scalars: the variant pack points at these host values.
  float scale = 1, lowest = std::numeric_limits<float>::lowest();
  std::int32_t seq_kv = 0, seq_q = 0;
  std::vector<std::int64_t> uids;
  std::vector<void*> pointers;
  std::int64_t next_virtual_uid = 100;
  bool have_pack = false;
  Desc pack{CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR};

  ~State() {
    // Descriptors first, the handle they were built with last.
    pack.reset();
    plan.reset();
    keep.clear();
    if (workspace) cudaFree(workspace);
    if (handle) cudnnDestroy(handle);
  }

  const Desc& tensor(std::int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides, bool is_virtual,
                     bool by_value = false) {
    Desc t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const std::int64_t alignment = 16;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(), 4)
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(), 4)
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    t.finalize();
    keep.push_back(std::move(t));
    return keep.back();
  }
  const Desc& virtual_tensor(cudnnDataType_t type, const Dims& dims) {
    return tensor(next_virtual_uid++, type, dims, packed_strides(dims), true);
  }
  const Desc& scalar(std::int64_t uid, cudnnDataType_t type) {
    return tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }

  // y = mode(x[, b][, t]) with math precision `prec`; `axis` for GEN_INDEX.
  void pointwise(std::vector<cudnnBackendDescriptor_t>& ops, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                 const Desc& x, const Desc* b, const Desc* t, const Desc& y, std::int64_t axis = -1) {
    Desc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &prec);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize();
    Desc op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw).set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    if (t) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y).finalize();
    keep.push_back(std::move(pw));
    keep.push_back(std::move(op));
    ops.push_back(keep.back().get());
  }
  void matmul(std::vector<cudnnBackendDescriptor_t>& ops, const Desc& a, const Desc& b, const Desc& c) {
    Desc mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32).finalize();
    Desc op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm)
        .finalize();
    keep.push_back(std::move(mm));
    keep.push_back(std::move(op));
    ops.push_back(keep.back().get());
  }
  void reduction(std::vector<cudnnBackendDescriptor_t>& ops, cudnnReduceTensorOp_t mode, const Desc& x, const Desc& y) {
    Desc red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &f32)
        .finalize();
    Desc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red)
        .finalize();
    keep.push_back(std::move(red));
    keep.push_back(std::move(op));
    ops.push_back(keep.back().get());
  }
};

namespace {
enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kLowest, kSeqKv, kSeqQ };
}

CudnnAttentionFwd::CudnnAttentionFwd(const AttentionDims& d, bool bf16, const void* q, const void* k, const void* v,
                                     void* o, float* lse)
    : s_(std::make_unique<State>()) {
  d.validate();
  State& s = *s_;
  CUDNN_BUILD_CHECK(cudnnCreate(&s.handle));
  s.scale = d.softmax_scale();
  s.seq_kv = static_cast<std::int32_t>(d.seq_kv);
  s.seq_q = static_cast<std::int32_t>(d.seq_q);

  const cudnnDataType_t io = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF, f32 = CUDNN_DATA_FLOAT,
                        i32 = CUDNN_DATA_INT32, boolean = CUDNN_DATA_BOOLEAN;
  // [batch_heads, seq, head_dim] seen as cuDNN's 4-d [b=1, h=batch_heads, seq, head_dim].
  const std::int64_t h = d.batch_heads, sq = d.seq_q, skv = d.seq_kv, hd = d.head_dim;
  const Dims q_dims{1, h, sq, hd}, kt_dims{1, h, hd, skv}, v_dims{1, h, skv, hd}, s_dims{1, h, sq, skv},
      row_dims{1, h, sq, 1};
  const Desc& tq = s.tensor(kQ, io, q_dims, packed_strides(q_dims), false);
  // Kᵀ is K read with swapped strides: element (d, j) at j·head_dim + d.
  const Desc& tkt = s.tensor(kK, io, kt_dims, {h * skv * hd, skv * hd, 1, hd}, false);
  const Desc& tv = s.tensor(kV, io, v_dims, packed_strides(v_dims), false);
  const Desc& to = s.tensor(kO, io, q_dims, packed_strides(q_dims), false);
  const Desc& tstats = s.tensor(kStats, f32, row_dims, packed_strides(row_dims), false);
  const Desc& tscale = s.scalar(kScale, f32);

  std::vector<cudnnBackendDescriptor_t> ops;
  const Desc& scores = s.virtual_tensor(f32, s_dims);
  s.matmul(ops, tq, tkt, scores);
  const Desc* last = &s.virtual_tensor(f32, s_dims);
  s.pointwise(ops, CUDNN_POINTWISE_MUL, f32, scores, &tscale, nullptr, *last);
  if (d.causal) {
    // Keep (i, j) iff j <= i + seq_kv − seq_q (bottom-right aligned, kernels/attention_cpu.h).
    const Desc* row = &s.virtual_tensor(i32, s_dims);
    s.pointwise(ops, CUDNN_POINTWISE_GEN_INDEX, i32, *last, nullptr, nullptr, *row, 2);
    if (sq != skv) {
      const Desc& shifted = s.virtual_tensor(i32, s_dims);
      s.pointwise(ops, CUDNN_POINTWISE_ADD, i32, *row, &s.scalar(kSeqKv, i32), nullptr, shifted);
      row = &s.virtual_tensor(i32, s_dims);
      s.pointwise(ops, CUDNN_POINTWISE_SUB, i32, shifted, &s.scalar(kSeqQ, i32), nullptr, *row);
    }
    const Desc& col = s.virtual_tensor(i32, s_dims);
    s.pointwise(ops, CUDNN_POINTWISE_GEN_INDEX, i32, *last, nullptr, nullptr, col, 3);
    const Desc& keep_mask = s.virtual_tensor(boolean, s_dims);
    s.pointwise(ops, CUDNN_POINTWISE_CMP_GE, boolean, *row, &col, nullptr, keep_mask);
    const Desc& masked = s.virtual_tensor(f32, s_dims);
    // BINARY_SELECT: y = t ? x : b.
    s.pointwise(ops, CUDNN_POINTWISE_BINARY_SELECT, f32, *last, &s.scalar(kLowest, f32), &keep_mask, masked);
    last = &masked;
  }
  // Softmax with stats (log-sum-exp) for the backward: m = max_j s, e = exp(s − m),
  // l = Σ_j e, lse = m + log l, P = e / l.
  const Desc& row_max = s.virtual_tensor(f32, row_dims);
  s.reduction(ops, CUDNN_REDUCE_TENSOR_MAX, *last, row_max);
  const Desc& centered = s.virtual_tensor(f32, s_dims);
  s.pointwise(ops, CUDNN_POINTWISE_SUB, f32, *last, &row_max, nullptr, centered);
  const Desc& e = s.virtual_tensor(f32, s_dims);
  s.pointwise(ops, CUDNN_POINTWISE_EXP, f32, centered, nullptr, nullptr, e);
  const Desc& row_sum = s.virtual_tensor(f32, row_dims);
  s.reduction(ops, CUDNN_REDUCE_TENSOR_ADD, e, row_sum);
  const Desc& log_sum = s.virtual_tensor(f32, row_dims);
  s.pointwise(ops, CUDNN_POINTWISE_LOG, f32, row_sum, nullptr, nullptr, log_sum);
  s.pointwise(ops, CUDNN_POINTWISE_ADD, f32, row_max, &log_sum, nullptr, tstats);
  // P in the input type: the second matmul's A operand must be the I/O type (cudnn-frontend,
  // "Requirement by cudnn backend to take in bmm2 aType as i/o type").
  const Desc& p = s.virtual_tensor(io, s_dims);
  s.pointwise(ops, CUDNN_POINTWISE_DIV, f32, e, &row_sum, nullptr, p);
  s.matmul(ops, p, tv, to);

  Desc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &s.handle);
#pragma GCC diagnostic pop
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ops.data(),
            static_cast<std::int64_t>(ops.size()));
  graph.finalize();

  // Heuristics mode A first, then the fallback list; the first configuration whose plan
  // finalises wins (the frontend's build_plans does the same walk).
  std::string last_error = "cuDNN heuristics returned no engine configuration";
  bool found = false;
  for (const cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (found) break;
    Desc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    try {
      heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
      heur.finalize();
    } catch (const CudnnUnsupported& ex) {
      last_error = ex.what();
      continue;
    }
    std::int64_t count = 0;
    if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                                 nullptr) != CUDNN_STATUS_SUCCESS ||
        count == 0)
      continue;
    std::vector<Desc> cfgs;
    std::vector<cudnnBackendDescriptor_t> raw;
    for (std::int64_t i = 0; i < count; ++i) {
      cfgs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
      raw.push_back(cfgs.back().get());
    }
    std::int64_t got = 0;
    CUDNN_BUILD_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                               count, &got, raw.data()));
    for (std::int64_t i = 0; i < got && !found; ++i) {
      try {
        Desc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
        plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &s.handle);
#pragma GCC diagnostic pop
        plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, cfgs[i]).finalize();
        std::int64_t n = 0;
        CUDNN_BUILD_CHECK(cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                                   CUDNN_TYPE_INT64, 1, &n, &s.workspace_bytes));
        Desc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
        cudnnBackendDescriptor_t eng = engine.get();
        if (cudnnBackendGetAttribute(cfgs[i].get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                     &eng) == CUDNN_STATUS_SUCCESS)
          cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &s.engine_index);
        s.plan = std::move(plan);
        found = true;
      } catch (const CudnnUnsupported& ex) {
        last_error = ex.what();
      }
    }
  }
  if (!found)
    throw CudnnUnsupported(str("cuDNN fused attention: no engine for bh=", d.batch_heads, " seq=", sq, "x", skv,
                               " d=", hd, d.causal ? " causal" : "", bf16 ? " bf16" : " fp16", ": ", last_error));
  if (s.workspace_bytes > 0) CUDA_CHECK(cudaMalloc(&s.workspace, static_cast<std::size_t>(s.workspace_bytes)));

  s.uids = {kQ, kK, kV, kO, kStats, kScale};
  s.pointers = {const_cast<void*>(q), const_cast<void*>(k), const_cast<void*>(v), o, lse, &s.scale};
  if (d.causal) {
    s.uids.push_back(kLowest);
    s.pointers.push_back(&s.lowest);
    if (sq != skv) {
      s.uids.insert(s.uids.end(), {kSeqKv, kSeqQ});
      s.pointers.insert(s.pointers.end(), {&s.seq_kv, &s.seq_q});
    }
  }
  const auto n_ptr = static_cast<std::int64_t>(s.uids.size());
  s.pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, s.uids.data(), n_ptr)
      .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, s.pointers.data(), n_ptr)
      .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &s.workspace);
  s.pack.finalize();
}

CudnnAttentionFwd::~CudnnAttentionFwd() = default;

void CudnnAttentionFwd::run() { CUDNN_CHECK(cudnnBackendExecute(s_->handle, s_->plan.get(), s_->pack.get())); }

std::string CudnnAttentionFwd::engine() const {
  return str("cuDNN engine ", s_->engine_index, ", workspace ", s_->workspace_bytes, " B");
}

bool cudnn_compiled_in() noexcept { return true; }

}  // namespace ptsim::kernels::cuda

#else  // no cuDNN at build time: the implementation compiles out, construction says so.

namespace ptsim::kernels::cuda {

struct CudnnAttentionFwd::State {};

CudnnAttentionFwd::CudnnAttentionFwd(const AttentionDims&, bool, const void*, const void*, const void*, void*, float*) {
  throw CudnnUnsupported("cuDNN fused attention: this ptsim was built without cuDNN (libcudnn not found)");
}
CudnnAttentionFwd::~CudnnAttentionFwd() = default;
void CudnnAttentionFwd::run() {}
std::string CudnnAttentionFwd::engine() const { return {}; }
bool cudnn_compiled_in() noexcept { return false; }

}  // namespace ptsim::kernels::cuda

#endif
