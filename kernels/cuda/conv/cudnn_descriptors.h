// Owning wrappers for the cuDNN (legacy API) descriptors a convolution needs, built from our
// tensors: each tensor keeps its own memory format, so NCHW and NHWC (and, for filters, cuDNN's
// K,R,S,C "NHWC" filter layout) are described exactly as they lie in memory.
#pragma once
#include "ganengine/tensor.h"
#include "runtime/cuda_check.h"

namespace ge {
namespace gpu {

inline cudnnDataType_t cudnn_data_type(DType t) {
  switch (t) {
    case DType::F32: return CUDNN_DATA_FLOAT;
    case DType::F16: return CUDNN_DATA_HALF;
    case DType::BF16: return CUDNN_DATA_BFLOAT16;
    default: fail("cuDNN convolutions take f32, f16 or bf16, got ", dtype_name(t));
  }
}

inline cudnnTensorFormat_t cudnn_format(MemoryFormat f) {
  return f == MemoryFormat::NHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
}

inline int int_dim(const Tensor& t, int i) {
  const int64_t d = t.dim(i);
  GE_CHECK(d > 0 && d <= INT32_MAX, "cuDNN takes dimensions in 1..2^31-1, got ", t.str());
  return static_cast<int>(d);
}

class TensorDescriptor {
 public:
  explicit TensorDescriptor(const Tensor& t) {
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&desc_));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(desc_, cudnn_format(t.format()), cudnn_data_type(t.dtype()), int_dim(t, 0),
                                           int_dim(t, 1), int_dim(t, 2), int_dim(t, 3)));
  }
  ~TensorDescriptor() { cudnnDestroyTensorDescriptor(desc_); }
  TensorDescriptor(const TensorDescriptor&) = delete;
  TensorDescriptor& operator=(const TensorDescriptor&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

// A (K, C, R, S) weight; NHWC means K,R,S,C in memory.
class FilterDescriptor {
 public:
  explicit FilterDescriptor(const Tensor& w) {
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&desc_));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(desc_, cudnn_data_type(w.dtype()), cudnn_format(w.format()), int_dim(w, 0),
                                           int_dim(w, 1), int_dim(w, 2), int_dim(w, 3)));
  }
  ~FilterDescriptor() { cudnnDestroyFilterDescriptor(desc_); }
  FilterDescriptor(const FilterDescriptor&) = delete;
  FilterDescriptor& operator=(const FilterDescriptor&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// Cross-correlation (what deep-learning frameworks call convolution), dilation 1, fp32 compute.
class ConvolutionDescriptor {
 public:
  ConvolutionDescriptor(int pad, int stride, cudnnMathType_t math) {
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&desc_));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(desc_, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    set_math(math);
  }
  ~ConvolutionDescriptor() { cudnnDestroyConvolutionDescriptor(desc_); }
  ConvolutionDescriptor(const ConvolutionDescriptor&) = delete;
  ConvolutionDescriptor& operator=(const ConvolutionDescriptor&) = delete;
  void set_math(cudnnMathType_t math) { CUDNN_CHECK(cudnnSetConvolutionMathType(desc_, math)); }
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

}  // namespace gpu
}  // namespace ge
