/* A cache of large scratch blocks for Halide's halide_malloc/halide_free.
 *
 * Why: a pipeline allocates its intermediate buffers on every call and frees
 * them at its end; the next call asks for the same sizes again. glibc hands
 * blocks of more than a few hundred KiB back to the kernel when they are freed
 * (munmap, or trimming the top of a thread's heap), so every call faulted its
 * scratch pages in again: an encoder layer at batch 8 zero-filled about
 * 15 MiB per call that way, 15% of its time. This cache keeps freed blocks of
 * at least MLK_SCRATCH_MIN bytes and gives one back to a request that fits it.
 *
 * Contract (what Halide asks of halide_malloc, HalideRuntime.h): the pointer
 * is aligned to 128 bytes, the usable size is a multiple of 128, and reading
 * up to 128 bytes past the end (and 16 before the start) stays in memory
 * that belongs to the process. A block is reused for a request of n bytes only if
 * its capacity is in [n, n + n/4]. At most MLK_SCRATCH_SLOTS blocks and
 * MLK_SCRATCH_BYTES bytes are kept idle; past that, the oldest idle block is
 * freed first. mlk_scratch_release() frees every idle block (at dlclose of
 * an artifact, through the destructor below). Thread-safe.
 *
 * This file is plain C: the C ABI wrapper of every built artifact embeds it
 * (artifact/build.cpp), and the JIT includes it (scheduler/compile.cpp), so
 * the tuner measures a candidate the way an artifact runs it. */
#ifndef MLK_TARGETS_SCRATCH_CACHE_H_
#define MLK_TARGETS_SCRATCH_CACHE_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define MLK_SCRATCH_MIN ((size_t)64 << 10)
#define MLK_SCRATCH_SLOTS 64
#define MLK_SCRATCH_BYTES ((size_t)256 << 20)
#define MLK_SCRATCH_ALIGN ((size_t)128)
#define MLK_SCRATCH_FN static __attribute__((unused))

/* Each block is the caller's pointer p, 128-aligned inside a malloc()ed
 * chunk; the 16 bytes before p hold the chunk's address and p's capacity. */
static pthread_mutex_t mlk_scratch_mu = PTHREAD_MUTEX_INITIALIZER;
static void* mlk_scratch_idle[MLK_SCRATCH_SLOTS]; /* idle blocks, oldest first */
static int mlk_scratch_nidle = 0;
static size_t mlk_scratch_idle_bytes = 0;

MLK_SCRATCH_FN size_t mlk_scratch_capacity(void* p) { return ((size_t*)p)[-1]; }
MLK_SCRATCH_FN void mlk_scratch_free(void* p) { free(((void**)p)[-2]); }

MLK_SCRATCH_FN void* mlk_scratch_get(size_t n) {
  const size_t cap = (n + MLK_SCRATCH_ALIGN - 1) / MLK_SCRATCH_ALIGN * MLK_SCRATCH_ALIGN;
  if (cap < n) return NULL; /* n overflowed */
  if (cap >= MLK_SCRATCH_MIN) {
    void* hit = NULL;
    pthread_mutex_lock(&mlk_scratch_mu);
    int best = -1;
    for (int i = 0; i < mlk_scratch_nidle; ++i) {
      size_t c = mlk_scratch_capacity(mlk_scratch_idle[i]);
      if (c >= cap && c - cap <= cap / 4 && (best < 0 || c < mlk_scratch_capacity(mlk_scratch_idle[best]))) best = i;
    }
    if (best >= 0) {
      hit = mlk_scratch_idle[best];
      mlk_scratch_idle_bytes -= mlk_scratch_capacity(hit);
      for (int i = best; i + 1 < mlk_scratch_nidle; ++i) mlk_scratch_idle[i] = mlk_scratch_idle[i + 1];
      --mlk_scratch_nidle;
    }
    pthread_mutex_unlock(&mlk_scratch_mu);
    if (hit) return hit;
  }
  if (cap > (size_t)-1 - 3 * MLK_SCRATCH_ALIGN) return NULL;
  /* Plain malloc, aligned by hand as Halide's default allocator does
   * (posix_memalign splits chunks: for a kernel that allocates a small
   * buffer per row that cost more than the kernel). Room for the header,
   * the alignment and one alignment unit read past the end. */
  char* raw = (char*)malloc(cap + 3 * MLK_SCRATCH_ALIGN);
  if (!raw) return NULL;
  char* p = (char*)(((uintptr_t)raw + 16 + MLK_SCRATCH_ALIGN - 1) & ~(uintptr_t)(MLK_SCRATCH_ALIGN - 1));
  ((void**)p)[-2] = raw;
  ((size_t*)p)[-1] = cap;
  return p;
}

MLK_SCRATCH_FN void mlk_scratch_put(void* p) {
  if (!p) return;
  const size_t cap = mlk_scratch_capacity(p);
  if (cap < MLK_SCRATCH_MIN || cap > MLK_SCRATCH_BYTES) {
    mlk_scratch_free(p);
    return;
  }
  void* evict[MLK_SCRATCH_SLOTS];
  int nevict = 0;
  pthread_mutex_lock(&mlk_scratch_mu);
  while (mlk_scratch_nidle > 0 &&
         (mlk_scratch_nidle == MLK_SCRATCH_SLOTS || mlk_scratch_idle_bytes + cap > MLK_SCRATCH_BYTES)) {
    void* old = mlk_scratch_idle[0];
    mlk_scratch_idle_bytes -= mlk_scratch_capacity(old);
    for (int i = 0; i + 1 < mlk_scratch_nidle; ++i) mlk_scratch_idle[i] = mlk_scratch_idle[i + 1];
    --mlk_scratch_nidle;
    evict[nevict++] = old;
  }
  mlk_scratch_idle[mlk_scratch_nidle++] = p;
  mlk_scratch_idle_bytes += cap;
  pthread_mutex_unlock(&mlk_scratch_mu);
  for (int i = 0; i < nevict; ++i) mlk_scratch_free(evict[i]);
}

MLK_SCRATCH_FN void mlk_scratch_release(void) {
  pthread_mutex_lock(&mlk_scratch_mu);
  for (int i = 0; i < mlk_scratch_nidle; ++i) mlk_scratch_free(mlk_scratch_idle[i]);
  mlk_scratch_nidle = 0;
  mlk_scratch_idle_bytes = 0;
  pthread_mutex_unlock(&mlk_scratch_mu);
}

/* The number of idle blocks and their bytes (for tests). */
MLK_SCRATCH_FN void mlk_scratch_stats(int* blocks, size_t* bytes) {
  pthread_mutex_lock(&mlk_scratch_mu);
  *blocks = mlk_scratch_nidle;
  *bytes = mlk_scratch_idle_bytes;
  pthread_mutex_unlock(&mlk_scratch_mu);
}

#endif /* MLK_TARGETS_SCRATCH_CACHE_H_ */
