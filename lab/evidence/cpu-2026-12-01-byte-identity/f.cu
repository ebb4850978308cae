namespace { constexpr int MyVariable = 1; __device__ int dv[4]; }
template <int N> __global__ void kern(int* o) { o[threadIdx.x] = dv[threadIdx.x % 4] + N + MyVariable; }
template __global__ void kern<3>(int*);
