"""CUDA C++ versions of the kernels, built with ``torch.utils.cpp_extension.load_inline``.

The extension is compiled once per session (``load`` is cached; the ``cuda_ext`` fixture in
conftest.py calls it) into a build directory under the system's temporary directory, never
into the repository. Each kernel is launched on PyTorch's current stream, so the timer can
capture it in a CUDA graph.
"""

from __future__ import annotations

import functools
import os
import tempfile
from types import ModuleType

import torch

CUDA_SOURCE = r"""
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/types.h>

namespace {

constexpr int kThreads = 256;  // 1D kernels: threads per block
constexpr int kTile = 16;      // 2D kernel: kTile x kTile threads per block

void check_input(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), name, " must be a CUDA tensor");
  TORCH_CHECK(t.is_contiguous(), name, " must be contiguous");
  TORCH_CHECK(t.scalar_type() == torch::kFloat, name, " must be float32");
}

unsigned int ceil_div(int64_t n, int64_t d) {
  int64_t blocks = (n + d - 1) / d;
  TORCH_CHECK(blocks <= 0x7fffffff, "too many blocks: ", blocks);
  return static_cast<unsigned int>(blocks);
}

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i];
    float inner = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanhf(inner));
  }
}

__global__ void add_kernel(const float* __restrict__ x, const float* __restrict__ y,
                           float* __restrict__ out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = x[i] + y[i];
  }
}

__global__ void square_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t rows,
                              int64_t cols) {
  int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (row < rows && col < cols) {
    int64_t i = row * cols + col;
    y[i] = x[i] * x[i];
  }
}

}  // namespace

torch::Tensor gelu(const torch::Tensor& x) {
  check_input(x, "x");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) {
    return y;  // a grid of zero blocks is an invalid launch
  }
  gelu_kernel<<<ceil_div(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}

torch::Tensor add(const torch::Tensor& x, const torch::Tensor& y) {
  check_input(x, "x");
  check_input(y, "y");
  TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have the same shape");
  TORCH_CHECK(x.device() == y.device(), "x and y must be on the same device");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto out = torch::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) {
    return out;
  }
  add_kernel<<<ceil_div(n, kThreads), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

torch::Tensor square(const torch::Tensor& x) {
  check_input(x, "x");
  TORCH_CHECK(x.dim() == 2, "x must be 2D (rows x cols)");
  const c10::cuda::OptionalCUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  const int64_t rows = x.size(0);
  const int64_t cols = x.size(1);
  if (rows == 0 || cols == 0) {
    return y;
  }
  const dim3 threads(kTile, kTile);
  const dim3 blocks(ceil_div(cols, kTile), ceil_div(rows, kTile));
  TORCH_CHECK(blocks.y <= 65535, "too many rows for a 2D grid: ", rows);
  square_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

CPP_SOURCE = """
torch::Tensor gelu(const torch::Tensor& x);
torch::Tensor add(const torch::Tensor& x, const torch::Tensor& y);
torch::Tensor square(const torch::Tensor& x);
"""

FUNCTIONS = {
    "gelu": "GeLU (tanh approximation), one thread per element",
    "add": "x + y, one thread per element",
    "square": "x * x of a 2D tensor, 16x16 threads per block",
}


def unavailable() -> str | None:
    """Why the CUDA C++ kernels cannot be built and run here, or None when they can."""
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    if torch.version.cuda is None:
        return "this PyTorch is not built for CUDA"
    from torch.utils import cpp_extension

    if cpp_extension.CUDA_HOME is None:
        return "no CUDA toolkit found (set CUDA_HOME)"
    if not os.path.exists(os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")):
        return f"no nvcc under {cpp_extension.CUDA_HOME}"
    if not cpp_extension.is_ninja_available():
        return "ninja is not installed"
    return None


def build_directory() -> str:
    """Where the extension is built: outside the repository, one folder per torch version."""
    path = os.path.join(tempfile.gettempdir(), "gpubench-example-ext", f"torch-{torch.__version__}")
    os.makedirs(path, exist_ok=True)
    return path


@functools.cache
def load() -> ModuleType:
    """Compile (or reuse the last build of) the extension; its functions are FUNCTIONS."""
    from torch.utils.cpp_extension import load_inline

    return load_inline(
        name="gpubench_example_kernels",
        cpp_sources=CPP_SOURCE,
        cuda_sources=CUDA_SOURCE,
        functions=FUNCTIONS,
        extra_cuda_cflags=["-O3"],
        build_directory=build_directory(),
    )
