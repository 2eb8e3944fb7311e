/* Halide's parallel loops on the OpenMP team of the host process, where it
 * has one (PyTorch's libgomp), instead of Halide's own thread pool.
 *
 * Why: inside a PyTorch program, PyTorch's OpenMP threads spin for a while
 * after each of its parallel regions, and Halide's pool then runs on the same
 * cores beside them: a 4.3 ms kernel took 5.9 ms right after a torch matmul on
 * two cores. Run on PyTorch's own team, the spinning threads are the ones
 * that take the work.
 *
 * Contract: mlk_omp_team() is GOMP_parallel of the OpenMP runtime PyTorch
 * uses where PyTorch (libtorch_cpu) is loaded into the process, found
 * without loading anything, looked up again only after the process loaded
 * more libraries; null elsewhere (a process that links an OpenMP runtime
 * for other reasons, such as the mlk CLI through XGBoost, keeps Halide's
 * pool). mlk_omp_do_par_for has
 * halide_do_par_for's contract (every index in [min, min + size) run once,
 * in any order, on any thread; the result is 0 or one task's nonzero
 * result) on that team, each thread taking the next index until none is left.
 * Plain C, compiled with _GNU_SOURCE (dl_iterate_phdr): the C wrapper of
 * every CPU artifact embeds it (artifact/build.cpp) and the JIT includes it
 * (scheduler/compile.cpp). Thread-safe. */
#ifndef MLK_TARGETS_OMP_PAR_FOR_H_
#define MLK_TARGETS_OMP_PAR_FOR_H_

#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#define MLK_OMP_FN static __attribute__((unused))

typedef void (*mlk_gomp_parallel_t)(void (*)(void*), void*, unsigned, unsigned);

struct mlk_omp_scan {
  unsigned long long adds;
};

static unsigned long long mlk_omp_adds = ~0ull; /* the loader's count of loads at the last scan */
static mlk_gomp_parallel_t mlk_omp_parallel;

MLK_OMP_FN int mlk_omp_adds_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  ((struct mlk_omp_scan*)data)->adds = info->dlpi_adds;
  return 1; /* the first object carries the count */
}

/* An OpenMP runtime's basename: GNU's, or LLVM's or Intel's (which export
 * GOMP_parallel too). */
MLK_OMP_FN int mlk_omp_runtime(const char* base) {
  return strncmp(base, "libgomp", 7) == 0 || strncmp(base, "libomp", 6) == 0 || strncmp(base, "libiomp5", 8) == 0;
}

MLK_OMP_FN const char* mlk_omp_base(const char* path) {
  const char* b = strrchr(path, '/');
  return b ? b + 1 : path;
}

/* Pass 1 (want == 0): the directory of libtorch_cpu, if loaded. Pass 2: an
 * OpenMP runtime, the one in that directory first (PyTorch's wheel ships
 * its own), else the first one loaded (a distribution's PyTorch links the
 * system's). */
struct mlk_omp_find {
  int pass;
  char torch_dir[4096];
  char runtime[4096];
};

MLK_OMP_FN int mlk_omp_find_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  struct mlk_omp_find* f = (struct mlk_omp_find*)data;
  const char* base = mlk_omp_base(info->dlpi_name);
  const size_t dir = (size_t)(base - info->dlpi_name);
  if (f->pass == 1) {
    if (strncmp(base, "libtorch_cpu", 12) == 0 && dir < sizeof f->torch_dir) {
      memcpy(f->torch_dir, info->dlpi_name, dir);
      f->torch_dir[dir] = 0;
      return 1;
    }
    return 0;
  }
  if (!mlk_omp_runtime(base) || strlen(info->dlpi_name) >= sizeof f->runtime) return 0;
  const int ours = strlen(f->torch_dir) == dir && strncmp(info->dlpi_name, f->torch_dir, dir) == 0;
  if (ours || !f->runtime[0]) strcpy(f->runtime, info->dlpi_name);
  return ours;
}

/* GOMP_parallel of the OpenMP runtime PyTorch uses, where PyTorch
 * (libtorch_cpu) is loaded into the process; else null. */
MLK_OMP_FN mlk_gomp_parallel_t mlk_omp_find_team(void) {
  struct mlk_omp_find f;
  memset(&f, 0, sizeof f);
  f.pass = 1;
  dl_iterate_phdr(mlk_omp_find_cb, &f);
  if (!f.torch_dir[0]) return 0;
  f.pass = 2;
  dl_iterate_phdr(mlk_omp_find_cb, &f);
  if (!f.runtime[0]) return 0;
  void* h = dlopen(f.runtime, RTLD_NOW | RTLD_NOLOAD); /* already loaded: no load, a reference kept */
  return h ? (mlk_gomp_parallel_t)dlsym(h, "GOMP_parallel") : 0;
}

MLK_OMP_FN mlk_gomp_parallel_t mlk_omp_team(void) {
  struct mlk_omp_scan s = {0};
  dl_iterate_phdr(mlk_omp_adds_cb, &s);
  if (s.adds != __atomic_load_n(&mlk_omp_adds, __ATOMIC_ACQUIRE)) {
    __atomic_store_n(&mlk_omp_parallel, mlk_omp_find_team(), __ATOMIC_RELEASE);
    __atomic_store_n(&mlk_omp_adds, s.adds, __ATOMIC_RELEASE);
  }
  return __atomic_load_n(&mlk_omp_parallel, __ATOMIC_ACQUIRE);
}

struct mlk_omp_job {
  int (*f)(void*, int, uint8_t*);
  void* user_context;
  uint8_t* closure;
  int min, size, next, result;
};

MLK_OMP_FN void mlk_omp_body(void* p) {
  struct mlk_omp_job* j = (struct mlk_omp_job*)p;
  for (;;) {
    int i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
    if (i >= j->size) return;
    int r = j->f(j->user_context, j->min + i, j->closure);
    if (r) __atomic_store_n(&j->result, r, __ATOMIC_RELAXED);
  }
}

/* halide_do_par_for on `team` (from mlk_omp_team(), not null). */
MLK_OMP_FN int mlk_omp_do_par_for(mlk_gomp_parallel_t team, void* user_context, int (*f)(void*, int, uint8_t*),
                                  int min, int size, uint8_t* closure) {
  struct mlk_omp_job j = {f, user_context, closure, min, size, 0, 0};
  team(mlk_omp_body, &j, 0, 0);
  return j.result;
}

#endif /* MLK_TARGETS_OMP_PAR_FOR_H_ */
