// Fused CPU kernels for sparse optimizer steps, COO coalesce and masked mean.
//
// Registered as torch.library operators in the internal namespace
// `conformance_kernels_cpu`; the public, autograd- and torch.compile-aware
// operators live in Python (conformance/kernels/_ops.py) and call these.
//
// Common scheme for sparse COO inputs (indices: int64 [sparse_dim, nnz],
// values: [nnz, *dense_shape]):
//   1. linearize the sparse indices into row keys (validating their range),
//   2. stable-sort (key, position) pairs (parallel LSD radix sort; skipped
//      when the keys are already sorted),
//   3. split the sorted keys into segments of equal keys,
//   4. in parallel over segments: sum the duplicate value rows in the
//      accumulation type (float for half/bfloat16/float, double for double)
//      and apply the fused update / write the coalesced row.

#include <ATen/core/Tensor.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/EmptyTensor.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>
#include <vector>

namespace conformance_kernels {
namespace {

constexpr int64_t kGrain = 2048;

// ---------------------------------------------------------------------------
// Validation helpers
// ---------------------------------------------------------------------------

void check_floating(const at::Tensor& t, const char* what) {
  auto dt = t.scalar_type();
  TORCH_CHECK_TYPE(
      dt == at::kFloat || dt == at::kDouble || dt == at::kHalf ||
          dt == at::kBFloat16,
      what, " must be float16, bfloat16, float32 or float64, got ", dt);
}

void check_cpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), what,
              " must be a CPU tensor for the C++ kernels, got device ",
              t.device());
}

// Checks indices/values of a COO tensor against the full shape `size`.
// Returns the number of sparse dims.
int64_t check_coo(const at::Tensor& indices, const at::Tensor& values,
                  at::IntArrayRef size) {
  check_cpu(indices, "indices");
  check_cpu(values, "values");
  TORCH_CHECK_TYPE(indices.scalar_type() == at::kLong,
                   "indices must be int64, got ", indices.scalar_type());
  TORCH_CHECK_VALUE(indices.dim() == 2,
                    "indices must be 2-D [sparse_dim, nnz], got shape ",
                    indices.sizes());
  const int64_t sparse_dim = indices.size(0);
  const int64_t nnz = indices.size(1);
  TORCH_CHECK_VALUE(values.dim() >= 1 && values.size(0) == nnz,
                    "values must have shape [nnz=", nnz,
                    ", *dense_shape], got ", values.sizes());
  const int64_t dense_dim = values.dim() - 1;
  TORCH_CHECK_VALUE(
      sparse_dim + dense_dim == static_cast<int64_t>(size.size()),
      "sparse_dim (", sparse_dim, ") + dense_dim (", dense_dim,
      ") does not match the number of dimensions of size ", size);
  for (int64_t d = 0; d < dense_dim; ++d) {
    TORCH_CHECK_VALUE(values.size(d + 1) == size[sparse_dim + d],
                      "values dense shape ", values.sizes().slice(1),
                      " does not match size ", size);
  }
  for (int64_t d = 0; d < sparse_dim; ++d) {
    TORCH_CHECK_VALUE(size[d] >= 0, "negative size ", size);
  }
  return sparse_dim;
}

// ---------------------------------------------------------------------------
// Sorting and segmentation
// ---------------------------------------------------------------------------

// Scratch vectors of one kernel call. The calling thread keeps them between
// calls (thread_local) so that repeated steps neither allocate nor page-fault
// fresh memory; buffers beyond kScratchKeep elements are released after use.
struct Segments {
  std::vector<int64_t> perm;   // original nnz positions in sorted key order
  std::vector<int64_t> keys;   // one key per segment
  std::vector<int64_t> start;  // segment s covers perm[start[s]:start[s+1]]
  std::vector<int64_t> words;  // linearized (packed) keys, sorted in place
  std::vector<int64_t> tmp;    // radix sort ping-pong buffer
  std::vector<int64_t> tmp2;   // radix sort payload buffer (unpacked keys)
  std::vector<int64_t> hist;   // radix sort histograms
  int64_t count() const { return static_cast<int64_t>(keys.size()); }
};

constexpr size_t kScratchKeep = size_t{1} << 18;

// Thread-local Segments, reset on construction and trimmed on destruction.
class SegmentsLease {
 public:
  SegmentsLease() : seg_(storage()) {
    TORCH_CHECK(!in_use(), "internal error: nested use of kernel scratch");
    in_use() = true;
    seg_.keys.clear();
    seg_.start.clear();
  }
  ~SegmentsLease() {
    for (auto* v : {&seg_.perm, &seg_.keys, &seg_.start, &seg_.words,
                    &seg_.tmp, &seg_.tmp2, &seg_.hist}) {
      if (v->capacity() > kScratchKeep) std::vector<int64_t>().swap(*v);
    }
    in_use() = false;
  }
  SegmentsLease(const SegmentsLease&) = delete;
  SegmentsLease& operator=(const SegmentsLease&) = delete;
  Segments& get() { return seg_; }

 private:
  static Segments& storage() {
    static thread_local Segments s;
    return s;
  }
  static bool& in_use() {
    static thread_local bool flag = false;
    return flag;
  }
  Segments& seg_;
};

int bit_width(int64_t v) {
  int bits = 0;
  while (bits < 63 && (v >> bits) != 0) ++bits;
  return bits;
}

// Raises ValueError naming the first index that is negative or not smaller
// than its dimension's size (called only once a bad index has been seen).
[[noreturn]] void raise_bad_index(const int64_t* ip, int64_t sparse_dim,
                                  int64_t nnz, at::IntArrayRef sparse_size) {
  for (int64_t d = 0; d < sparse_dim; ++d) {
    for (int64_t i = 0; i < nnz; ++i) {
      const int64_t v = ip[d * nnz + i];
      TORCH_CHECK_VALUE(v >= 0 && v < sparse_size[d], "index ", v,
                        " at position ", i, " of sparse dimension ", d,
                        " is out of range for size ", sparse_size[d]);
    }
  }
  TORCH_CHECK(false, "internal error: bad index not found");
}

// Stable parallel LSD radix sort of non-negative `words` by their bits
// [low_bit, low_bit + bits), moving `payload` (if not null) along. `tmp`,
// `payload_tmp` and `hist` are scratch.
void radix_sort(std::vector<int64_t>& words, std::vector<int64_t>* payload,
                int low_bit, int bits, int max_digit_bits,
                std::vector<int64_t>& tmp, std::vector<int64_t>& payload_tmp,
                std::vector<int64_t>& hist) {
  const int64_t n = static_cast<int64_t>(words.size());
  if (n <= 1 || bits == 0) return;
  const int passes = (bits + max_digit_bits - 1) / max_digit_bits;
  const int digit_bits = (bits + passes - 1) / passes;
  const int64_t radix = int64_t{1} << digit_bits;
  const int64_t mask = radix - 1;
  const int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>(at::get_num_threads(), n / 65536));

  tmp.resize(n);
  if (payload) payload_tmp.resize(n);
  hist.resize(chunks * radix);
  int64_t* win = words.data();
  int64_t* wout = tmp.data();
  int64_t* pin = payload ? payload->data() : nullptr;
  int64_t* pout = payload ? payload_tmp.data() : nullptr;
  auto chunk_begin = [&](int64_t c) { return n * c / chunks; };

  for (int pass = 0; pass < passes; ++pass) {
    const int shift = low_bit + pass * digit_bits;
    std::fill(hist.begin(), hist.end(), 0);
    at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t* h = hist.data() + c * radix;
        const int64_t end = chunk_begin(c + 1);
        for (int64_t i = chunk_begin(c); i < end; ++i) {
          ++h[(win[i] >> shift) & mask];
        }
      }
    });
    int64_t offset = 0;
    for (int64_t d = 0; d < radix; ++d) {
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t cnt = hist[c * radix + d];
        hist[c * radix + d] = offset;
        offset += cnt;
      }
    }
    at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
      for (int64_t c = cb; c < ce; ++c) {
        int64_t* h = hist.data() + c * radix;
        const int64_t end = chunk_begin(c + 1);
        for (int64_t i = chunk_begin(c); i < end; ++i) {
          const int64_t pos = h[(win[i] >> shift) & mask]++;
          wout[pos] = win[i];
          if (pin) pout[pos] = pin[i];
        }
      }
    });
    std::swap(win, wout);
    std::swap(pin, pout);
  }
  if (win != words.data()) {
    words.swap(tmp);
    if (payload) payload->swap(payload_tmp);
  }
}

// Validates and linearizes the sparse indices, sorts them stably and splits
// them into runs of equal keys, filling `seg`. When key and position fit in
// 63 bits together, linearization writes packed words (key << pos_bits |
// position) in the same pass that validates the indices, so one radix sort of
// single words orders them (and the sort is skipped when already sorted).
void sort_and_segment(const at::Tensor& indices, at::IntArrayRef sparse_size,
                      Segments& seg) {
  const int64_t sparse_dim = indices.size(0);
  const int64_t n = indices.size(1);
  std::vector<int64_t> strides(sparse_dim, 1);
  int64_t total = 1;
  for (int64_t d = sparse_dim - 1; d >= 0; --d) {
    strides[d] = total;
    if (sparse_size[d] != 0) {
      TORCH_CHECK_VALUE(total <= std::numeric_limits<int64_t>::max() /
                                     sparse_size[d],
                        "sparse shape ", sparse_size,
                        " has more elements than fit in int64");
    }
    total *= sparse_size[d];
  }
  const int64_t max_key = total > 0 ? total - 1 : 0;
  const int key_bits = bit_width(max_key);
  const int pos_bits = bit_width(std::max<int64_t>(n - 1, 0));
  const bool packed = key_bits + pos_bits <= 63;
  const int shift = packed ? pos_bits : 0;
  const int64_t pos_mask = packed ? (int64_t{1} << pos_bits) - 1 : 0;

  const at::Tensor idx = indices.contiguous();
  const int64_t* ip = idx.const_data_ptr<int64_t>();
  std::vector<int64_t>& words = seg.words;
  words.resize(n);
  int64_t* wp = words.data();
  std::atomic<bool> bad{false};
  at::parallel_for(0, n, 16 * kGrain, [&](int64_t b, int64_t e) {
    bool local_bad = false;
    if (sparse_dim == 1) {
      const int64_t limit = sparse_size[0];
      for (int64_t i = b; i < e; ++i) {
        const int64_t v = ip[i];
        local_bad |= (v < 0) | (v >= limit);
        wp[i] = (v << shift) | (i & pos_mask);
      }
    } else {
      for (int64_t i = b; i < e; ++i) {
        int64_t key = 0;
        for (int64_t d = 0; d < sparse_dim; ++d) {
          const int64_t v = ip[d * n + i];
          local_bad |= (v < 0) | (v >= sparse_size[d]);
          key += v * strides[d];
        }
        wp[i] = (key << shift) | (i & pos_mask);
      }
    }
    if (local_bad) bad.store(true, std::memory_order_relaxed);
  });
  if (bad.load()) raise_bad_index(ip, sparse_dim, n, sparse_size);

  seg.perm.resize(n);
  int64_t* pp = seg.perm.data();
  if (std::is_sorted(words.begin(), words.end())) {
    std::iota(seg.perm.begin(), seg.perm.end(), 0);
    if (packed) {
      for (int64_t i = 0; i < n; ++i) wp[i] >>= shift;
    }
  } else if (packed) {
    if (n <= 512) {
      std::sort(words.begin(), words.end());  // packed words are unique: stable
    } else {
      radix_sort(words, nullptr, pos_bits, key_bits, 12, seg.tmp, seg.tmp2,
                 seg.hist);
      wp = words.data();
    }
    at::parallel_for(0, n, 16 * kGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        pp[i] = wp[i] & pos_mask;
        wp[i] >>= shift;
      }
    });
  } else {
    std::iota(seg.perm.begin(), seg.perm.end(), 0);
    radix_sort(words, &seg.perm, 0, key_bits, 11, seg.tmp, seg.tmp2,
               seg.hist);
    wp = words.data();
  }
  // words now holds the sorted keys; record where each run of equal keys starts.
  seg.keys.reserve(n);
  seg.start.reserve(n + 1);
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || wp[i] != wp[i - 1]) {
      seg.keys.push_back(wp[i]);
      seg.start.push_back(i);
    }
  }
  seg.start.push_back(n);
}

// Division of non-negative keys by a fixed divisor: a floating-point estimate
// corrected to the exact quotient (integer division is ~10x slower), with
// exact integer division for keys beyond double precision.
class KeyDivider {
 public:
  explicit KeyDivider(int64_t divisor)
      : divisor_(divisor), inverse_(divisor > 0 ? 1.0 / divisor : 0.0) {}

  // Returns key / divisor and stores key % divisor in *remainder.
  inline int64_t divide(int64_t key, int64_t* remainder) const {
    if (key >= (int64_t{1} << 52)) {
      *remainder = key % divisor_;
      return key / divisor_;
    }
    int64_t q = static_cast<int64_t>(static_cast<double>(key) * inverse_);
    int64_t r = key - q * divisor_;
    while (r < 0) {
      --q;
      r += divisor_;
    }
    while (r >= divisor_) {
      ++q;
      r -= divisor_;
    }
    *remainder = r;
    return q;
  }

 private:
  int64_t divisor_;
  double inverse_;
};

int64_t row_width(const at::Tensor& values) {
  int64_t width = 1;
  for (int64_t d = 1; d < values.dim(); ++d) width *= values.size(d);
  return width;
}

// Sums the value rows of segment s into acc[0:width] (accumulation type).
template <typename scalar_t, typename acc_t>
inline void sum_segment(const Segments& seg, int64_t s,
                        const scalar_t* __restrict__ values, int64_t width,
                        acc_t* __restrict__ acc) {
  const int64_t b = seg.start[s];
  const int64_t e = seg.start[s + 1];
  const scalar_t* __restrict__ row = values + seg.perm[b] * width;
  for (int64_t j = 0; j < width; ++j) acc[j] = static_cast<acc_t>(row[j]);
  for (int64_t k = b + 1; k < e; ++k) {
    row = values + seg.perm[k] * width;
    for (int64_t j = 0; j < width; ++j) acc[j] += static_cast<acc_t>(row[j]);
  }
}

// SparseAdam update of one row (torch's operation order, in acc_t).
template <typename scalar_t, typename acc_t>
inline void sparse_adam_row(scalar_t* __restrict__ p, scalar_t* __restrict__ m,
                            scalar_t* __restrict__ v,
                            const acc_t* __restrict__ grad, int64_t width,
                            acc_t sign, acc_t one_minus_b1, acc_t one_minus_b2,
                            acc_t eps, acc_t neg_step) {
  for (int64_t j = 0; j < width; ++j) {
    const acc_t g = sign * grad[j];
    const acc_t m_old = static_cast<acc_t>(m[j]);
    const acc_t v_old = static_cast<acc_t>(v[j]);
    const acc_t m_new = (g - m_old) * one_minus_b1 + m_old;
    const acc_t v_new = (g * g - v_old) * one_minus_b2 + v_old;
    const acc_t denom = std::sqrt(v_new) + eps;
    m[j] = static_cast<scalar_t>(m_new);
    v[j] = static_cast<scalar_t>(v_new);
    p[j] = static_cast<scalar_t>(static_cast<acc_t>(p[j]) +
                                 (m_new / denom) * neg_step);
  }
}

// Adagrad update of one row (torch's operation order, in acc_t).
template <typename scalar_t, typename acc_t>
inline void adagrad_row(scalar_t* __restrict__ p, scalar_t* __restrict__ sum,
                        const acc_t* __restrict__ grad, int64_t width,
                        acc_t sign, acc_t eps, acc_t neg_clr) {
  for (int64_t j = 0; j < width; ++j) {
    const acc_t g = sign * grad[j];
    const acc_t sum_new = static_cast<acc_t>(sum[j]) + g * g;
    const acc_t std_ = std::sqrt(sum_new) + eps;
    sum[j] = static_cast<scalar_t>(sum_new);
    p[j] = static_cast<scalar_t>(static_cast<acc_t>(p[j]) +
                                 (g / std_) * neg_clr);
  }
}

// The row updates are bound by sqrt/div throughput once the rows are in
// cache (1M x 64 float32 benchmark: a step on a 4 MiB parameter costs about
// as much as on a 256 MiB one), so float32/float64 rows are also compiled for
// AVX2 (8/4 lanes instead of SSE2's 4/2) and picked at load time by the
// dynamic loader (GCC/clang target_clones, x86-64 Linux). FMA stays off, so
// both versions round exactly alike (IEEE sqrt/div, no contraction).
#if defined(__x86_64__) && defined(__linux__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define CK_ROW_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef CK_ROW_CLONES
#define CK_ROW_CLONES
#endif

template <typename T>
CK_ROW_CLONES void adagrad_row_fast(T* __restrict__ p, T* __restrict__ sum,
                                   const T* __restrict__ grad, int64_t width,
                                   T sign, T eps, T neg_clr);
template <>
CK_ROW_CLONES void adagrad_row_fast<float>(float* __restrict__ p,
                                           float* __restrict__ sum,
                                           const float* __restrict__ grad,
                                           int64_t width, float sign,
                                           float eps, float neg_clr) {
  adagrad_row<float, float>(p, sum, grad, width, sign, eps, neg_clr);
}
template <>
CK_ROW_CLONES void adagrad_row_fast<double>(double* __restrict__ p,
                                            double* __restrict__ sum,
                                            const double* __restrict__ grad,
                                            int64_t width, double sign,
                                            double eps, double neg_clr) {
  adagrad_row<double, double>(p, sum, grad, width, sign, eps, neg_clr);
}

template <typename T>
CK_ROW_CLONES void sparse_adam_row_fast(T* __restrict__ p, T* __restrict__ m,
                                       T* __restrict__ v,
                                       const T* __restrict__ grad,
                                       int64_t width, T sign, T one_minus_b1,
                                       T one_minus_b2, T eps, T neg_step);
template <>
CK_ROW_CLONES void sparse_adam_row_fast<float>(
    float* __restrict__ p, float* __restrict__ m, float* __restrict__ v,
    const float* __restrict__ grad, int64_t width, float sign,
    float one_minus_b1, float one_minus_b2, float eps, float neg_step) {
  sparse_adam_row<float, float>(p, m, v, grad, width, sign, one_minus_b1,
                                one_minus_b2, eps, neg_step);
}
template <>
CK_ROW_CLONES void sparse_adam_row_fast<double>(
    double* __restrict__ p, double* __restrict__ m, double* __restrict__ v,
    const double* __restrict__ grad, int64_t width, double sign,
    double one_minus_b1, double one_minus_b2, double eps, double neg_step) {
  sparse_adam_row<double, double>(p, m, v, grad, width, sign, one_minus_b1,
                                  one_minus_b2, eps, neg_step);
}

// Dispatches to the cloned float/double versions; half types use the template.
template <typename scalar_t, typename acc_t>
inline void adagrad_row_any(scalar_t* p, scalar_t* sum, const acc_t* grad,
                            int64_t width, acc_t sign, acc_t eps,
                            acc_t neg_clr) {
  if constexpr (std::is_same_v<scalar_t, acc_t> &&
                (std::is_same_v<acc_t, float> ||
                 std::is_same_v<acc_t, double>)) {
    adagrad_row_fast<acc_t>(p, sum, grad, width, sign, eps, neg_clr);
  } else {
    adagrad_row<scalar_t, acc_t>(p, sum, grad, width, sign, eps, neg_clr);
  }
}

template <typename scalar_t, typename acc_t>
inline void sparse_adam_row_any(scalar_t* p, scalar_t* m, scalar_t* v,
                                const acc_t* grad, int64_t width, acc_t sign,
                                acc_t one_minus_b1, acc_t one_minus_b2,
                                acc_t eps, acc_t neg_step) {
  if constexpr (std::is_same_v<scalar_t, acc_t> &&
                (std::is_same_v<acc_t, float> ||
                 std::is_same_v<acc_t, double>)) {
    sparse_adam_row_fast<acc_t>(p, m, v, grad, width, sign, one_minus_b1,
                                one_minus_b2, eps, neg_step);
  } else {
    sparse_adam_row<scalar_t, acc_t>(p, m, v, grad, width, sign, one_minus_b1,
                                     one_minus_b2, eps, neg_step);
  }
}

// Software prefetch of a row (random rows defeat the hardware prefetcher; the
// steps are bound by memory latency, not bandwidth). Only the first 1 KiB of a
// row is prefetched; the hardware prefetcher streams the rest.
// How many segments ahead to prefetch so that about `lines_in_flight` cache
// lines are requested ahead of use. The optimizer steps use 64 (measured on
// the 1M x 64 float32 benchmark, 1 thread, interleaved in one process: Adagrad
// 4-6 segments ahead is 15-25% faster than 1 ahead; 8 is no better, 16 worse);
// coalesce keeps 16.
constexpr int64_t kStepLinesInFlight = 64;

inline int64_t prefetch_distance(int64_t row_bytes, int64_t rows_per_segment,
                                 int64_t lines_in_flight) {
  const int64_t lines = rows_per_segment * ((row_bytes + 63) / 64);
  return std::max<int64_t>(1, lines_in_flight / std::max<int64_t>(1, lines));
}

template <typename T>
inline void prefetch_row_for_read(const T* row, int64_t width) {
  const char* p = reinterpret_cast<const char*>(row);
  const int64_t bytes = std::min<int64_t>(width * sizeof(T), 1024);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 3);
}

template <typename T>
inline void prefetch_row_for_write(const T* row, int64_t width) {
  const char* p = reinterpret_cast<const char*>(row);
  const int64_t bytes = std::min<int64_t>(width * sizeof(T), 1024);
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 1, 3);
}

// Grain size (segments per task) so that a task touches ~32 KiB of rows.
int64_t segment_grain(int64_t width) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, width));
}

// Checks that a dense in-place target matches param's shape/dtype/device and
// is contiguous (the Python layer makes them contiguous).
void check_target(const at::Tensor& t, const at::Tensor& param,
                  const char* what) {
  check_cpu(t, what);
  TORCH_CHECK_VALUE(t.sizes() == param.sizes(), what, " shape ", t.sizes(),
                    " does not match param shape ", param.sizes());
  TORCH_CHECK_TYPE(t.scalar_type() == param.scalar_type(), what, " dtype ",
                   t.scalar_type(), " does not match param dtype ",
                   param.scalar_type());
  TORCH_CHECK(t.is_contiguous(), what, " must be contiguous");
}

// ---------------------------------------------------------------------------
// Operators
// ---------------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> coalesce_cpu(const at::Tensor& indices,
                                                const at::Tensor& values_in,
                                                at::IntArrayRef size) {
  const int64_t sparse_dim = check_coo(indices, values_in, size);
  const at::Tensor values = values_in.contiguous();
  SegmentsLease lease;
  const Segments& seg = lease.get();
  sort_and_segment(indices, size.slice(0, sparse_dim), lease.get());
  const int64_t nseg = seg.count();
  const int64_t width = row_width(values);

  std::vector<int64_t> out_values_shape(values.sizes().begin(),
                                        values.sizes().end());
  out_values_shape[0] = nseg;
  at::Tensor out_values = at::detail::empty_cpu(out_values_shape, values.options());
  at::Tensor out_indices = at::detail::empty_cpu({sparse_dim, nseg}, indices.options());

  // Indices come from the sorted keys (sequential) rather than from the
  // original columns (a random gather).
  int64_t* op = out_indices.mutable_data_ptr<int64_t>();
  std::vector<KeyDivider> dividers;
  for (int64_t d = 0; d < sparse_dim; ++d) dividers.emplace_back(size[d]);
  at::parallel_for(0, nseg, 4 * kGrain, [&](int64_t b, int64_t e) {
    for (int64_t s = b; s < e; ++s) {
      int64_t rest = seg.keys[s];
      for (int64_t d = sparse_dim - 1; d > 0; --d) {
        rest = dividers[d].divide(rest, &op[d * nseg + s]);
      }
      if (sparse_dim > 0) op[s] = rest;
    }
  });

  AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(
      at::kHalf, at::kBFloat16, at::kBool, values.scalar_type(), "coalesce",
      [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* vp = values.const_data_ptr<scalar_t>();
        scalar_t* outp = out_values.mutable_data_ptr<scalar_t>();
        const int64_t distance =
            prefetch_distance(width * sizeof(scalar_t), 1, 16);
        at::parallel_for(
            0, nseg, segment_grain(width), [&](int64_t b, int64_t e) {
              std::unique_ptr<acc_t[]> acc(new acc_t[width]);
              for (int64_t s = b; s < e; ++s) {
                if (width == 0) continue;
                if (s + distance < e) {
                  prefetch_row_for_read(
                      vp + seg.perm[seg.start[s + distance]] * width, width);
                }
                sum_segment<scalar_t, acc_t>(seg, s, vp, width, acc.get());
                scalar_t* __restrict__ dst = outp + s * width;
                for (int64_t j = 0; j < width; ++j) {
                  dst[j] = static_cast<scalar_t>(acc[j]);
                }
              }
            });
      });
  return {out_indices, out_values};
}

// Shared prologue of the optimizer steps: validates inputs and returns the
// sorted segments of the gradient plus a contiguous view of its values.
void prepare_sparse_step(const at::Tensor& param, const at::Tensor& indices,
                         const at::Tensor& values, Segments& seg) {
  check_cpu(param, "param");
  check_floating(param, "param");
  TORCH_CHECK(param.is_contiguous(), "param must be contiguous");
  TORCH_CHECK_TYPE(values.scalar_type() == param.scalar_type(),
                   "gradient dtype ", values.scalar_type(),
                   " does not match param dtype ", param.scalar_type());
  const int64_t sparse_dim = check_coo(indices, values, param.sizes());
  sort_and_segment(indices, param.sizes().slice(0, sparse_dim), seg);
}

void sparse_adam_step_cpu(const at::Tensor& param, const at::Tensor& exp_avg,
                          const at::Tensor& exp_avg_sq,
                          const at::Tensor& indices,
                          const at::Tensor& values_in, double step_size,
                          double beta1, double beta2, double eps,
                          bool maximize) {
  check_target(exp_avg, param, "exp_avg");
  check_target(exp_avg_sq, param, "exp_avg_sq");
  SegmentsLease lease;
  const Segments& seg = lease.get();
  prepare_sparse_step(param, indices, values_in, lease.get());
  const at::Tensor values = values_in.contiguous();
  const int64_t width = row_width(values);
  const int64_t nseg = seg.count();
  if (width == 0 || nseg == 0) return;

  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, param.scalar_type(), "sparse_adam_step", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* vp = values.const_data_ptr<scalar_t>();
        scalar_t* pp = param.mutable_data_ptr<scalar_t>();
        scalar_t* mp = exp_avg.mutable_data_ptr<scalar_t>();
        scalar_t* sp = exp_avg_sq.mutable_data_ptr<scalar_t>();
        const acc_t one_minus_b1 = static_cast<acc_t>(1.0 - beta1);
        const acc_t one_minus_b2 = static_cast<acc_t>(1.0 - beta2);
        const acc_t eps_a = static_cast<acc_t>(eps);
        const acc_t neg_step = static_cast<acc_t>(-step_size);
        const acc_t sign = maximize ? acc_t(-1) : acc_t(1);
        const int64_t distance =
            prefetch_distance(width * sizeof(scalar_t), 4, kStepLinesInFlight);
        at::parallel_for(
            0, nseg, segment_grain(width), [&](int64_t b, int64_t e) {
              std::unique_ptr<acc_t[]> acc(new acc_t[width]);
              for (int64_t s = b; s < e; ++s) {
                if (s + distance < e) {
                  const int64_t ahead = s + distance;
                  const int64_t off_ahead = seg.keys[ahead] * width;
                  prefetch_row_for_read(vp + seg.perm[seg.start[ahead]] * width, width);
                  prefetch_row_for_write(pp + off_ahead, width);
                  prefetch_row_for_write(mp + off_ahead, width);
                  prefetch_row_for_write(sp + off_ahead, width);
                }
                sum_segment<scalar_t, acc_t>(seg, s, vp, width, acc.get());
                const int64_t off = seg.keys[s] * width;
                sparse_adam_row_any<scalar_t, acc_t>(pp + off, mp + off, sp + off,
                                                 acc.get(), width, sign,
                                                 one_minus_b1, one_minus_b2,
                                                 eps_a, neg_step);
              }
            });
      });
}

void adagrad_step_cpu(const at::Tensor& param, const at::Tensor& state_sum,
                      const at::Tensor& indices, const at::Tensor& values_in,
                      double clr, double eps, bool maximize) {
  check_target(state_sum, param, "state_sum");
  SegmentsLease lease;
  const Segments& seg = lease.get();
  prepare_sparse_step(param, indices, values_in, lease.get());
  const at::Tensor values = values_in.contiguous();
  const int64_t width = row_width(values);
  const int64_t nseg = seg.count();
  if (width == 0 || nseg == 0) return;

  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, param.scalar_type(), "adagrad_step", [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const scalar_t* vp = values.const_data_ptr<scalar_t>();
        scalar_t* pp = param.mutable_data_ptr<scalar_t>();
        scalar_t* sp = state_sum.mutable_data_ptr<scalar_t>();
        const acc_t eps_a = static_cast<acc_t>(eps);
        const acc_t neg_clr = static_cast<acc_t>(-clr);
        const acc_t sign = maximize ? acc_t(-1) : acc_t(1);
        const int64_t distance =
            prefetch_distance(width * sizeof(scalar_t), 3, kStepLinesInFlight);
        at::parallel_for(
            0, nseg, segment_grain(width), [&](int64_t b, int64_t e) {
              std::unique_ptr<acc_t[]> acc(new acc_t[width]);
              for (int64_t s = b; s < e; ++s) {
                if (s + distance < e) {
                  const int64_t ahead = s + distance;
                  const int64_t off_ahead = seg.keys[ahead] * width;
                  prefetch_row_for_read(vp + seg.perm[seg.start[ahead]] * width, width);
                  prefetch_row_for_write(pp + off_ahead, width);
                  prefetch_row_for_write(sp + off_ahead, width);
                }
                sum_segment<scalar_t, acc_t>(seg, s, vp, width, acc.get());
                const int64_t off = seg.keys[s] * width;
                adagrad_row_any<scalar_t, acc_t>(pp + off, sp + off, acc.get(), width,
                                             sign, eps_a, neg_clr);
              }
            });
      });
}

void check_masked_pair(const at::Tensor& values, const at::Tensor& mask) {
  check_cpu(values, "values");
  check_cpu(mask, "mask");
  check_floating(values, "values");
  TORCH_CHECK_TYPE(mask.scalar_type() == at::kBool,
                   "mask must be a bool tensor, got ", mask.scalar_type());
  TORCH_CHECK_VALUE(values.sizes() == mask.sizes(), "mask shape ",
                    mask.sizes(), " does not match values shape ",
                    values.sizes());
}

// Returns (mean, count): mean is a 0-d tensor of values' dtype (NaN when the
// mask is all false), count a 0-d int64 tensor. Masked-out entries are never
// read into the sum, so NaN/inf there cannot leak into the result.
std::tuple<at::Tensor, at::Tensor> masked_mean_cpu(const at::Tensor& values_in,
                                                   const at::Tensor& mask_in) {
  check_masked_pair(values_in, mask_in);
  const at::Tensor values = values_in.contiguous();
  const at::Tensor mask = mask_in.contiguous();
  const int64_t n = values.numel();
  const int64_t chunks = std::max<int64_t>(
      1, std::min<int64_t>(at::get_num_threads(), n / 16384));
  std::vector<double> partial_sum(chunks, 0.0);
  std::vector<int64_t> partial_count(chunks, 0);
  const bool* mp = mask.const_data_ptr<bool>();
  at::Tensor mean = at::detail::empty_cpu({}, values.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, values.scalar_type(), "masked_mean", [&] {
        const scalar_t* vp = values.const_data_ptr<scalar_t>();
        at::parallel_for(0, chunks, 1, [&](int64_t cb, int64_t ce) {
          for (int64_t c = cb; c < ce; ++c) {
            double sum = 0.0;
            int64_t count = 0;
            for (int64_t i = n * c / chunks; i < n * (c + 1) / chunks; ++i) {
              const bool keep = mp[i];
              sum += keep ? static_cast<double>(vp[i]) : 0.0;
              count += keep;
            }
            partial_sum[c] = sum;
            partial_count[c] = count;
          }
        });
        double sum = 0.0;
        int64_t count = 0;
        for (int64_t c = 0; c < chunks; ++c) {
          sum += partial_sum[c];
          count += partial_count[c];
        }
        const double result = count > 0
                                  ? sum / static_cast<double>(count)
                                  : std::numeric_limits<double>::quiet_NaN();
        *mean.mutable_data_ptr<scalar_t>() = static_cast<scalar_t>(result);
        partial_count[0] = count;
      });
  at::Tensor count = at::detail::empty_cpu({}, values.options().dtype(at::kLong));
  *count.mutable_data_ptr<int64_t>() = partial_count[0];
  return {mean, count};
}

// d(mean)/d(values): grad / count at masked-in entries, zero elsewhere; all
// zero when the mask is empty.
at::Tensor masked_mean_backward_cpu(const at::Tensor& grad,
                                    const at::Tensor& mask_in,
                                    const at::Tensor& count) {
  check_cpu(grad, "grad");
  check_cpu(mask_in, "mask");
  check_floating(grad, "grad");
  TORCH_CHECK_VALUE(grad.numel() == 1, "grad must have one element, got ",
                    grad.sizes());
  TORCH_CHECK_TYPE(mask_in.scalar_type() == at::kBool,
                   "mask must be a bool tensor, got ", mask_in.scalar_type());
  const at::Tensor mask = mask_in.contiguous();
  const int64_t cnt = count.item<int64_t>();
  at::Tensor out = at::detail::empty_cpu(mask.sizes(), grad.options());
  const int64_t n = mask.numel();
  const bool* mp = mask.const_data_ptr<bool>();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, grad.scalar_type(), "masked_mean_backward",
      [&] {
        using acc_t = at::opmath_type<scalar_t>;
        const acc_t g = static_cast<acc_t>(grad.item<double>());
        const scalar_t share =
            cnt > 0 ? static_cast<scalar_t>(g / static_cast<acc_t>(cnt))
                    : scalar_t(0);
        const scalar_t zero(0);
        scalar_t* op = out.mutable_data_ptr<scalar_t>();
        at::parallel_for(0, n, 8 * kGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) op[i] = mp[i] ? share : zero;
        });
      });
  return out;
}

}  // namespace
}  // namespace conformance_kernels

TORCH_LIBRARY(conformance_kernels_cpu, m) {
  m.def("coalesce(Tensor indices, Tensor values, int[] size) -> (Tensor, Tensor)");
  m.def(
      "sparse_adam_step_(Tensor(a!) param, Tensor(b!) exp_avg, "
      "Tensor(c!) exp_avg_sq, Tensor indices, Tensor values, float step_size, "
      "float beta1, float beta2, float eps, bool maximize) -> ()");
  m.def(
      "adagrad_step_(Tensor(a!) param, Tensor(b!) state_sum, Tensor indices, "
      "Tensor values, float clr, float eps, bool maximize) -> ()");
  m.def("masked_mean(Tensor values, Tensor mask) -> (Tensor, Tensor)");
  m.def(
      "masked_mean_backward(Tensor grad, Tensor mask, Tensor count) -> Tensor");
}

TORCH_LIBRARY_IMPL(conformance_kernels_cpu, CPU, m) {
  m.impl("coalesce", &conformance_kernels::coalesce_cpu);
  m.impl("sparse_adam_step_", &conformance_kernels::sparse_adam_step_cpu);
  m.impl("adagrad_step_", &conformance_kernels::adagrad_step_cpu);
  m.impl("masked_mean", &conformance_kernels::masked_mean_cpu);
  m.impl("masked_mean_backward",
         &conformance_kernels::masked_mean_backward_cpu);
}
